// The entry for edge runtimes, `agent-host-core/instantiate`, in Node.js made
// to refuse compiling WebAssembly from bytes (edge.mjs), as Cloudflare Workers
// and Vercel Edge do: what it takes, what it refuses, and that the default
// entry, which compiles the bytes it loads, cannot run there. The corpus runs
// through it in differential.test.mjs. Run by core/js/tests/package.rs with
// `node --test`, beside the installed package.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

import { compiledThenRefusing, coreModuleBytes } from "./edge.mjs";

const modules = compiledThenRefusing();
const { instantiate, coreModuleNames, CoreError } = await import("agent-host-core/instantiate");

const chat = JSON.stringify([
  { role: "system", content: "be brief" },
  { role: "user", content: "list the files" },
  { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: "{}" } }] },
]);

test("compiling bytes is refused here, so the default entry cannot load", async () => {
  await assert.rejects(WebAssembly.compile(coreModuleBytes()), WebAssembly.CompileError);
  // In a process of its own: the default entry compiles its modules in
  // parallel, and the refusals after the first would go unhandled here.
  const child = spawnSync(
    process.execPath,
    ["--input-type=module", "-e", 'import { refuseCompilingBytes } from "./edge.mjs"; refuseCompilingBytes(); await import("agent-host-core");'],
    { cwd: dirname(fileURLToPath(import.meta.url)), encoding: "utf8" },
  );
  assert.notEqual(child.status, 0, "the default entry loaded although compiling bytes is refused");
  assert.match(child.stderr, /CompileError: Wasm code generation disallowed/);
});

test("instantiated from the compiled modules, the core runs", async () => {
  const { History, formats, detect } = await instantiate(modules);
  assert.equal(detect(chat), "openai");
  assert.ok(formats().some((f) => f.name === "anthropic" && f.writable));
  const history = History.load(chat);
  assert.equal(history.len(), 3);
  assert.equal(history.violations().length, 1, "the unanswered tool call");
  const { view, report } = history.compact({ contextLimit: 8000, compact: true, now: "2025-06-01T09:00:00Z" });
  assert.deepEqual(view.violations(), []);
  assert.equal(report.repairs.length, 1);
  assert.throws(() => History.load("not a transcript"), (e) => e instanceof CoreError && e.kind === "invalid-input");
});

test("a function giving the modules (or promises of them) is asked for each by name", async () => {
  const asked = [];
  const byName = Object.fromEntries(Object.entries(coreModuleNames).map(([key, name]) => [name, modules[key]]));
  const { History } = await instantiate(async (name) => {
    asked.push(name);
    return byName[name];
  });
  assert.deepEqual(asked.sort(), Object.values(coreModuleNames).sort());
  assert.equal(History.load(chat).len(), 3);
});

test("two instances are independent, and failures stay CoreError in both", async () => {
  const a = await instantiate(modules);
  const b = await instantiate(modules);
  const fromA = a.History.load(chat);
  const fromB = b.History.load(chat);
  assert.equal(fromA.dump("anthropic"), fromB.dump("anthropic"));
  for (const core of [a, b]) {
    assert.throws(() => core.History.load("[]", "no-such-format"), CoreError);
    assert.throws(() => core.History.load(chat).dump("markdown-or-not"), CoreError);
  }
});

test("anything but the compiled modules or a function is refused with what to pass", async () => {
  const { core2: _, ...missing } = modules;
  const wrongs = [
    coreModuleBytes(),
    undefined,
    modules.core,
    missing,
    { ...modules, core3: coreModuleBytes("core3") },
  ];
  for (const wrong of wrongs) {
    await assert.rejects(instantiate(wrong), (e) => e instanceof TypeError && e.message.includes("{ core, core2, core3 }"));
  }
});
