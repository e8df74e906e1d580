// The SDK's pure logic under Node: the history's edits and the answer they
// make, the tool-exchange helpers, configuration parsing and its errors, the
// export's WIT shapes, and the native stand-in for the host.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  History,
  ProcessorError,
  ServiceError,
  countTokens,
  readMemory,
  summarize,
  warn,
  config,
  defineProcessor,
  estimateTokens,
  exportProcessor,
  groupThousands,
  info,
  message,
  parseConfig,
  plural,
  setText,
  synthetic,
  testing,
  text,
  texts,
  toolCallMessage,
  toolResult,
} from "../agent-host-guest.js";

const withId = (m, id) => Object.assign(m, { id });
const user = (t) => withId(message("user", t), t);
const assistant = (t) => withId(message("assistant", t), t);
const call = (id) => withId(toolCallMessage([{ id, name: "t", arguments: "{}" }]), `call-${id}`);
const result = (id) => withId(toolResult(id, "ok"), `result-${id}`);
const ids = (h) => h.toMessages().map((m) => m.id);

test("items keep, replace and insert in order", () => {
  const h = new History(testing.context(), [user("a"), assistant("b"), user("c")]);
  h.drop(1);
  h.replace(2, user("C"));
  h.insertBefore(0, assistant("first"));
  h.push(assistant("last"));
  h.insertBefore(2, assistant("x"));
  h.insertBefore(2, assistant("y"));
  assert.deepEqual(
    h.toItems().map((i) => (i.tag === "keep" ? i.val : i.tag === "replace" ? `r${i.val.index}` : i.val.id)),
    ["first", 0, "x", "y", "r2", "last"],
  );
  assert.equal(h.kept(), 2);
  assert.ok(h.isChanged(2) && !h.isChanged(0));
});

test("change copies the message, so the input message stays as it was", () => {
  const original = user("a");
  const h = new History(testing.context(), [original]);
  h.change(0).content = "A";
  assert.equal(original.content, "a");
  assert.equal(h.get(0).content, "A");
  assert.deepEqual(h.toItems(), [{ tag: "replace", val: { index: 0, message: h.get(0) } }]);
});

test("out-of-range indices throw", () => {
  const h = new History(testing.context(), [user("a")]);
  assert.throws(() => h.drop(1), RangeError);
  assert.throws(() => h.insertBefore(2, user("x")), RangeError);
});

test("dropping a call takes its results, and results take their calls", () => {
  let h = new History(testing.context(), [user("u"), call("c1"), result("c1"), assistant("done")]);
  h.drop(1);
  h.settleToolExchanges();
  assert.deepEqual(ids(h), ["u", "done"]);

  const both = withId(
    toolCallMessage([
      { id: "c1", name: "t", arguments: "{}" },
      { id: "c2", name: "t", arguments: "{}" },
    ]),
    "both",
  );
  h = new History(testing.context(), [user("u"), both, result("c1"), result("c2")]);
  h.drop(2);
  h.settleToolExchanges();
  assert.deepEqual(ids(h), ["u", "both", "result-c2"]);
  assert.deepEqual(
    h.get(1).toolCalls.map((c) => c.id),
    ["c2"],
  );
});

test("keep_last_turns never splits a tool exchange", () => {
  const h = new History(testing.context(), [
    withId(message("system", "s"), "s"),
    user("one"),
    call("c1"),
    user("two"),
    result("c1"),
    assistant("end"),
  ]);
  h.keepLastTurns(1);
  assert.deepEqual(ids(h), ["s", "call-c1", "two", "result-c1", "end"]);
  assert.deepEqual(h.toolCallers(), [null, null, null, null, 2, null]);
});

test("texts cover content, parts, readable reasoning and arguments", () => {
  const m = message("assistant", "a");
  m.parts.push({ tag: "text", val: "b" }, { tag: "image", val: { source: { tag: "url", val: "x" }, mimeType: null } });
  m.reasoning = { text: "think", signature: null, redacted: false };
  m.toolCalls.push({ id: "c", name: "t", arguments: "{}" });
  assert.deepEqual(texts(m), ["a", "b", "think", "{}"]);
  assert.equal(text(m), "a\n\nb");
  setText(m, 2, "THINK");
  setText(m, 3, "[]");
  setText(m, 1, "B");
  assert.deepEqual(texts(m), ["a", "B", "THINK", "[]"]);
  m.reasoning.redacted = true;
  assert.deepEqual(texts(m), ["a", "B", "[]"]);
});

test("configuration: defaults, types and unknown keys name the key", () => {
  const spec = config.object({
    turns: config.integer({ default: 4, min: 0 }),
    words: config.list(config.string()),
    model: config.optional(config.string()),
    nested: config.list(config.object({ name: config.string() }, { required: ["name"] })),
  });
  assert.deepEqual(parseConfig("", spec), { turns: 4, words: [], model: null, nested: [] });
  assert.deepEqual(parseConfig(" null ", spec).turns, 4);
  assert.deepEqual(parseConfig('{"turns": 2, "model": null}', spec).turns, 2);
  const bad = (json) => {
    try {
      parseConfig(json, spec);
    } catch (e) {
      assert.ok(e instanceof ProcessorError && e.kind === "bad-config");
      return e.message;
    }
    assert.fail(`${json} was accepted`);
  };
  assert.equal(bad('{"turns": "four"}'), '`turns`: expected an integer, found the string "four"');
  assert.equal(bad('{"turns": -1}'), "`turns`: -1 is out of range (0 to 9007199254740991)");
  assert.match(bad('{"turn": 1}'), /^unknown field `turn`, expected one of `turns`, `words`/);
  assert.equal(bad('{"words": ["a", 2]}'), "`words[1]`: expected a string, found number 2");
  assert.equal(bad('{"nested": [{}]}'), "`nested[0]`: missing field `name`");
  assert.match(bad("{"), /^not valid JSON/);
  assert.match(bad("[]"), /expected an object, found a list/);
  assert.throws(() => parseConfig('{"x": 1}', config.none), /unknown field `x`, there are none/);
});

const tidy = defineProcessor({
  name: "tidy",
  version: "1.2.3",
  summary: "Drops system messages.",
  config: config.object({ note: config.boolean(false) }),
  configExample: '{"note": true}',
  process(history, { note }) {
    history.retain((m) => m.role !== "system");
    if (note) history.push(synthetic("assistant", "tidied"));
    info(`kept ${history.kept()} ${plural(history.kept(), "message")}`);
  },
});

test("the export answers describe and process in the WIT shapes", () => {
  const lines = [];
  const fakeHost = {
    log: (level, t) => lines.push(`${level}: ${t}`),
    estimateTokens: () => 7,
    estimateMessageTokens: () => 9,
  };
  const exported = exportProcessor(tidy, fakeHost);
  assert.deepEqual(exported.describe(), {
    name: "tidy",
    version: "1.2.3",
    summary: "Drops system messages.",
    configSchema: null,
    configExample: '{"note": true}',
    reorders: false,
  });
  const ctx = { ...testing.context('{"note": true}') };
  const items = exported.process(ctx, [message("system", "s"), message("user", "u")]);
  assert.deepEqual(
    items.map((i) => i.tag),
    ["keep", "insert"],
  );
  assert.equal(items[0].val, 1);
  assert.equal(items[1].val.flags.synthetic, true);
  assert.deepEqual(lines, ["info: kept 1 message"]);
  assert.equal(estimateTokens("anything"), 7, "the host's estimate, once exported");

  // Errors come out as the WIT `error` variant.
  const refused = (() => {
    try {
      exported.process(testing.context('{"nope": 1}'), []);
    } catch (e) {
      return e;
    }
  })();
  assert.equal(refused.tag, "bad-config");
  assert.match(refused.val, /unknown field `nope`/);
  assert.deepEqual(refused.payload, { tag: refused.tag, val: refused.val });
  const broken = exportProcessor(
    defineProcessor({
      name: "broken",
      version: "0.1.0",
      summary: "Throws.",
      process() {
        throw new TypeError("oops");
      },
    }),
    fakeHost,
  );
  assert.throws(() => broken.process(testing.context(), []), { tag: "failed", val: "TypeError: oops" });
});

test("testing.run gives the output history and estimates tokens", () => {
  const input = [message("system", "s"), message("user", "hello world")];
  const out = testing.run(tidy, "{}", input);
  assert.deepEqual(
    out.map((m) => m.content),
    ["hello world"],
  );
  assert.ok(out[0].tokens > 0);
  assert.deepEqual(testing.logs, [{ level: "info", text: "kept 1 message" }]);
  assert.throws(() => testing.run(tidy, '{"note": 1}', []), /`note`: expected a boolean/);
});

test("declarations are checked", () => {
  assert.throws(() => defineProcessor({ name: "", version: "1", summary: "s", process() {} }), /`name`/);
  assert.throws(() => defineProcessor({ name: "x", version: "1", summary: "s" }), /`process`/);
});

test("log helpers format like the Rust SDK's", () => {
  assert.equal(plural(1, "message"), "message");
  assert.equal(plural(0, "message"), "messages");
  assert.equal(groupThousands(0), "0");
  assert.equal(groupThousands(999), "999");
  assert.equal(groupThousands(12345678), "12,345,678");
});

// ---------------------------------------------------------------------------
// The host services

/** Replaces the history by one summary of it, or keeps it without one. */
const summarizes = defineProcessor({
  name: "summarizes",
  version: "0.1.0",
  summary: "Replaces the history by a summary.",
  process(history) {
    let summary;
    try {
      summary = summarize("Sum up.", history.messages.map((m) => m.content).join("\n"));
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      warn(`no summary (${e})`);
      return;
    }
    for (let i = 0; i < history.length; i++) history.drop(i);
    history.push(message("assistant", summary.text));
  },
});

/** What `f` gives inside a native run (as a processor would call it). */
function natively(f) {
  let answer;
  let thrown = null;
  const probe = defineProcessor({
    name: "probe",
    version: "0.1.0",
    summary: "Calls f.",
    process() {
      try {
        answer = f();
      } catch (e) {
        thrown = e;
      }
    },
  });
  testing.run(probe, "{}", []);
  if (thrown) throw thrown;
  return answer;
}

test("served summaries answer with the estimated cost", (t) => {
  t.after(() => testing.stopServingSummaries());
  const asked = [];
  testing.serveSummaries((prompt, text) => {
    asked.push([prompt, text]);
    return `${text.length} characters`;
  });
  assert.deepEqual(natively(() => summarize("Sum up.", "abcdefgh", { maxTokens: 10 })), {
    text: "8 characters",
    inputTokens: 4,
    outputTokens: 3,
  });
  assert.deepEqual(asked, [["Sum up.", "abcdefgh"]]);
  const out = testing.run(summarizes, "{}", [user("a"), assistant("bc")]);
  assert.deepEqual(out.map((m) => m.content), ["4 characters"]);
});

test("a refusal is a ServiceError the processor catches", (t) => {
  t.after(() => testing.stopServingSummaries());
  for (const kind of ["denied", "over-budget", "failed"]) {
    testing.serveSummaries(() => {
      throw new ServiceError(kind, "grant it with --allow-summarize");
    });
    const out = testing.run(summarizes, "{}", [user("a"), assistant("b")]);
    assert.deepEqual(out.map((m) => m.id), ["a", "b"]);
    assert.deepEqual(testing.logs, [
      { level: "warn", text: `no summary (${kind.replace("-", " ")}: grant it with --allow-summarize)` },
    ]);
  }
});

test("without served summaries summarize fails; counts and memory answer natively", () => {
  assert.throws(
    () => natively(() => summarize("p", "t")),
    (e) => e instanceof ServiceError && e.kind === "failed" && e.message.includes("testing.serveSummaries"),
  );
  assert.equal(natively(() => countTokens("abcde")), 2);
  assert.deepEqual(natively(() => readMemory("", 10)), []);
});

test("the component's service errors become ServiceErrors, and its BigInts numbers", () => {
  const refusal = (tag) => {
    // componentize-js throws an Error carrying the variant as `payload`.
    const e = new Error("(see error.payload)");
    e.payload = { tag, val: `${tag} because` };
    return e;
  };
  const component = {
    summarize(prompt, text, caps) {
      if (caps.maxTokens === 1) throw refusal("over-budget");
      if (caps.maxTokens === 2) throw { tag: "denied", val: "no grant" };
      return { text: `${prompt}|${text}|${caps.timeoutMs}`, inputTokens: 7n, outputTokens: 2n };
    },
    countTokens() {
      throw refusal("failed");
    },
    readMemory() {
      return [
        {
          id: "f1",
          entity: "alice",
          text: "lives in Porto",
          attribute: undefined,
          value: undefined,
          recorded: { seconds: 1700000000n, nanoseconds: 5 },
        },
      ];
    },
  };
  const hostImports = { log() {}, estimateTokens: () => 0, estimateMessageTokens: () => 0 };
  const seen = [];
  const probe = defineProcessor({
    name: "probe",
    version: "0.1.0",
    summary: "Calls the services.",
    process() {
      seen.push(summarize("p", "t", { timeoutMs: 9 }));
      for (const maxTokens of [1, 2]) {
        try {
          summarize("p", "t", { maxTokens });
        } catch (e) {
          seen.push([e instanceof ServiceError, e.kind, e.message]);
        }
      }
      try {
        countTokens("x");
      } catch (e) {
        seen.push([e instanceof ServiceError, e.kind, e.message]);
      }
      seen.push(readMemory("", 5));
    },
  });
  exportProcessor(probe, hostImports, component).process(testing.context(), []);
  assert.deepEqual(seen, [
    { text: "p|t|9", inputTokens: 7, outputTokens: 2 },
    [true, "over-budget", "over-budget because"],
    [true, "denied", "no grant"],
    [true, "failed", "failed because"],
    [
      {
        id: "f1",
        entity: "alice",
        text: "lives in Porto",
        attribute: null,
        value: null,
        recorded: { seconds: 1700000000, nanoseconds: 5 },
      },
    ],
  ]);
  // An entry that gave no services: every call is denied.
  const denied = [];
  const asks = defineProcessor({
    name: "asks",
    version: "0.1.0",
    summary: "Asks for a count.",
    process() {
      try {
        countTokens("x");
      } catch (e) {
        denied.push(e);
      }
    },
  });
  exportProcessor(asks, hostImports).process(testing.context(), []);
  assert.equal(denied.length, 1);
  assert.ok(denied[0] instanceof ServiceError && denied[0].kind === "denied");
  assert.match(denied[0].message, /services@0\.2\.0/);
});
