// A Cloudflare Worker using agent-host-core through its edge entry, run by
// `workerd test` (core/js/tests/package.rs writes the config): the package's
// files as workerd modules, named as in the package, its core modules Wasm
// modules (each a compiled `WebAssembly.Module`, as Workers give them). It runs the
// pipeline on a history and logs the result for the test to compare with the
// native core's; it also checks that compiling WebAssembly from bytes is
// refused here, which is why the default entry cannot serve Workers.
import { instantiate, CoreError } from "agent-host-core/instantiate";
import core from "agent-host-core/core.wasm";
import core2 from "agent-host-core/core2.wasm";
import core3 from "agent-host-core/core3.wasm";
import coreBytes from "core-bytes";
import history from "history.txt";

export default {
  async test() {
    let refused;
    try {
      await WebAssembly.compile(coreBytes);
      refused = "not refused";
    } catch (e) {
      refused = `${e.name}: ${e.message}`;
    }
    const { History } = await instantiate({ core, core2, core3 });
    const loaded = History.load(history);
    const c = loaded.compact({ contextLimit: 2000, compact: true, now: "2025-06-01T09:00:00Z" });
    let failure;
    try {
      History.load("not a transcript");
    } catch (e) {
      failure = e instanceof CoreError ? e.kind : `not a CoreError: ${e}`;
    }
    const result = { format: loaded.format(), report: c.report, view: c.view.dump("jsonl"), failure, refused };
    console.log(`AGENT_HOST_RESULT ${JSON.stringify(result, (_, v) => (typeof v === "bigint" ? Number(v) : v))}`);
  },
};
