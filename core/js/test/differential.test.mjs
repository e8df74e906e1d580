// The npm package against the native core: each case of $AGENT_HOST_CORE_CASES
// (`[{name, text}]`, histories of the corpus and a few broken ones) is run
// through the package as a user installed it, and what it gives must equal
// what the native Rust core gave for the same case ($AGENT_HOST_CORE_EXPECTED,
// written by core/js/tests/package.rs). Run there by `node --test`, once
// through the default entry and once (AGENT_HOST_CORE_ENTRY=instantiate)
// through the entry for edge runtimes, `agent-host-core/instantiate`, given the
// compiled core module while compiling bytes is refused (edge.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const { History, formats, CoreError } =
  process.env.AGENT_HOST_CORE_ENTRY === "instantiate"
    ? await (await import("./edge.mjs")).instantiatedAtTheEdge()
    : await import("agent-host-core");

const cases = JSON.parse(readFileSync(process.env.AGENT_HOST_CORE_CASES, "utf8"));
const expected = JSON.parse(readFileSync(process.env.AGENT_HOST_CORE_EXPECTED, "utf8"));
const { now, pipelines, queries } = JSON.parse(readFileSync(process.env.AGENT_HOST_CORE_PLAN, "utf8"));

/** Plain JSON: bigints as numbers, undefined fields left out. */
function plain(value) {
  return JSON.parse(JSON.stringify(value, (_, v) => (typeof v === "bigint" ? Number(v) : v)));
}

/** `{ok}` or `{err: {kind, message}}`, as the Rust side writes them. */
function attempt(run) {
  try {
    return { ok: run() };
  } catch (e) {
    if (!(e instanceof CoreError)) throw e;
    return { err: { kind: e.kind, message: e.message } };
  }
}

function results(text) {
  // Read as a named format (JSONL) rather than a detected one.
  const named = attempt(() => {
    const h = History.load(text, "jsonl");
    return { format: h.format(), len: h.len() };
  });
  let history;
  const load = attempt(() => {
    history = History.load(text);
    return {
      format: history.format(),
      len: history.len(),
      tokens: history.tokens(),
      roles: history.roles(),
      title: history.title(),
      quarantined: history.quarantined(),
      violations: history.violations(),
    };
  });
  if (load.err) return plain({ named, load });
  const repaired = history.repair();
  const dumps = {};
  for (const f of formats().filter((f) => f.writable)) {
    dumps[f.name] = attempt(() => history.dump(f.name));
  }
  return plain({
    named,
    load,
    repair: {
      repairs: repaired.repairs,
      violations: repaired.history.violations(),
      jsonl: repaired.history.dump("jsonl"),
    },
    dumps,
    markdown: history.markdown("corpus"),
    queries: queries.map((q) => attempt(() => history.query(q).dump("jsonl"))),
    compact: pipelines.map((options) =>
      attempt(() => {
        const c = history.compact({ ...options, now });
        return {
          report: c.report,
          checkpoint: c.checkpoint,
          view: c.view.dump("jsonl"),
          append: c.append.dump("jsonl"),
        };
      }),
    ),
  });
}

test("the cases and the native results line up", () => {
  assert.ok(cases.length > 0, "no cases");
  assert.equal(cases.length, expected.length);
});

/** Where `a` and `b` first differ (a path such as `compact[2].ok.view`), or null. */
function difference(a, b, path = "") {
  if (a === b) return null;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null ||
      Array.isArray(a) !== Array.isArray(b)) {
    return path || "(the whole result)";
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    const at = Array.isArray(a) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
    const found = difference(a[k], b[k], at);
    if (found) return found;
  }
  return null;
}

function at(value, path) {
  for (const part of path.match(/[^.[\]]+/g) ?? []) value = value?.[part];
  return value;
}

function shown(value) {
  const text = value === undefined ? "(absent)" : JSON.stringify(value);
  return text.length > 300 ? `${text.slice(0, 300)}... (${text.length} chars)` : text;
}

cases.forEach(({ name, text }, i) => {
  test(`same as the native core: ${name}`, () => {
    const got = results(text);
    const path = difference(got, expected[i]);
    if (path) {
      assert.fail(`${path} differs:\n  package: ${shown(at(got, path))}\n  native:  ${shown(at(expected[i], path))}`);
    }
  });
});
