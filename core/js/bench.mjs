// The JavaScript half of core/js/bench.sh: the npm package on the corpus's
// histories, the operations benches/native.rs times natively. Prints one JSON
// object: each operation's median time for one pass over every history, in ms.
//
//   node bench.mjs CORPUS_DIR   (run where agent-host-core is installed)
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { History } from "agent-host-core";

const dir = process.argv[2];
const tau = JSON.parse(readFileSync(join(dir, "tau-bench-gpt4o-airline/gpt-4o-airline.json"), "utf8"));
const texts = tau.map((run) => JSON.stringify(run.traj));
const ccv = join(dir, "claude-code-sessions-ccv");
for (const name of readdirSync(ccv).filter((n) => n.endsWith(".jsonl")).sort()) {
  texts.push(readFileSync(join(ccv, name), "utf8"));
}

const options = { contextLimit: 8000, compact: true, now: "2025-06-01T09:00:00Z" };

function medianMs(runs, pass) {
  pass(); // warm-up
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    pass();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

// Each history made here is freed at once, as a careful program would.
const loaded = texts.map((t) => History.load(t));
const views = loaded.map((h) => {
  const c = h.compact(options);
  c.append[Symbol.dispose]();
  return c.view;
});
const runs = 15;
const result = {
  histories: texts.length,
  bytes: texts.reduce((n, t) => n + Buffer.byteLength(t), 0),
  load: medianMs(runs, () => {
    for (const t of texts) History.load(t)[Symbol.dispose]();
  }),
  compact: medianMs(runs, () => {
    for (const h of loaded) {
      const c = h.compact(options);
      c.view[Symbol.dispose]();
      c.append[Symbol.dispose]();
    }
  }),
  dump: medianMs(runs, () => {
    for (const v of views) v.dump("openai");
  }),
  all: medianMs(runs, () => {
    for (const t of texts) {
      const h = History.load(t);
      const c = h.compact(options);
      c.view.dump("openai");
      for (const r of [h, c.view, c.append]) r[Symbol.dispose]();
    }
  }),
};
console.log(JSON.stringify(result));
