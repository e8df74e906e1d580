// The processor under Node, with the SDK's local stand-in for the host and
// canned summaries: the Rust processor's unit cases. The integration test
// `services` then runs the built component through the real host against a
// model and compares it with the Rust one.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ProcessorError, ServiceError, message, testing, toolCallMessage, toolResult } from "agent-host-guest";
import summarizeHistory, { trim } from "../src/processor.js";

function turns(n) {
  const h = [message("system", "rules")];
  for (let i = 0; i < n; i++) {
    h.push(message("user", `question ${i}`));
    h.push(message("assistant", `answer ${i}`));
  }
  return h;
}

const contents = (out) => out.map((m) => m.content);

/** Serves "THE SUMMARY", keeping the material of every request. */
function serve(t) {
  const asked = [];
  testing.serveSummaries((prompt, text) => {
    asked.push(text);
    return "  THE SUMMARY\n";
  });
  t.after(() => testing.stopServingSummaries());
  return asked;
}

test("the older part becomes a flagged checkpoint pair and the newest turns stay", (t) => {
  const asked = serve(t);
  const out = testing.run(summarizeHistory, '{"keep_turns": 2, "min_messages": 2}', turns(5));
  assert.deepEqual(contents(out), [
    "rules",
    "[The 6 earlier messages of this conversation were summarized.]",
    "THE SUMMARY",
    "question 3",
    "answer 3",
    "question 4",
    "answer 4",
  ]);
  for (const m of out.slice(1, 3)) assert.deepEqual(m.flags, { synthetic: true, summary: true, error: false });
  assert.deepEqual([out[1].role, out[2].role], ["user", "assistant"]);
  assert.match(out[2].metadata, /^\{"summary_of":6,"input_tokens":\d+,"output_tokens":4\}$/);
  assert.ok(asked[0].includes("[user]\nquestion 0"), asked[0]);
  assert.ok(asked[0].includes("answer 2"));
  assert.ok(!asked[0].includes("question 3"));
  assert.ok(!asked[0].includes("rules"));
});

test("a tool exchange across the cut stays whole", (t) => {
  serve(t);
  const h = turns(3);
  // The call is in turn 2; its result comes after turn 3 starts.
  h.splice(5, 0, toolCallMessage([{ id: "c1", name: "search", arguments: "{}" }]));
  h.splice(7, 0, toolResult("c1", "found"));
  const out = testing.run(summarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h);
  assert.deepEqual(contents(out).slice(3), ["", "question 2", "found", "answer 2"]);
  assert.equal(out[3].toolCalls.length, 1);
});

test("a refused summary leaves the history as it was", () => {
  testing.serveSummaries(() => {
    throw new ServiceError("denied", "grant it with --allow-summarize");
  });
  try {
    const h = turns(6);
    const out = testing.run(summarizeHistory, '{"keep_turns": 2, "min_messages": 2}', h);
    assert.deepEqual(contents(out), contents(turns(6)));
    assert.deepEqual(
      testing.logs.map((l) => l.text),
      ["no summary (denied: grant it with --allow-summarize); the history is kept"],
    );
  } finally {
    testing.stopServingSummaries();
  }
});

test("too little to summarize asks nothing", (t) => {
  const asked = serve(t);
  assert.equal(testing.run(summarizeHistory, '{"keep_turns": 2}', turns(4)).length, 9);
  const config = '{"keep_turns": 2, "min_messages": 1, "trigger_tokens": 1000000}';
  assert.equal(testing.run(summarizeHistory, config, turns(4)).length, 9);
  assert.deepEqual(asked, []);
});

test("a previous summary is carried into the material", (t) => {
  const asked = serve(t);
  const h = turns(4);
  h[2].flags = { synthetic: true, summary: true, error: false };
  testing.run(summarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h);
  assert.ok(asked[0].includes("[previous summary]\nanswer 0"), asked[0]);
});

test("a long message is quoted with its middle elided, counting code points", (t) => {
  const asked = serve(t);
  const h = turns(3);
  // Astral characters are two UTF-16 units each: the count is of code points.
  h[1].content = "😀".repeat(2500) + "x".repeat(2500);
  testing.run(summarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h);
  const quoted = asked[0].split("[user]\n")[1].split("\n\n")[0];
  assert.equal(quoted, "😀".repeat(2000) + "\n[... 1000 characters elided ...]\n" + "x".repeat(2000));
});

test("bad configurations are refused", () => {
  for (const config of ['{"keep_turns": 0}', '{"max_words": 0}', '{"turns": 2}', '{"min_messages": -1}', "[1, 2]"]) {
    assert.throws(
      () => testing.run(summarizeHistory, config, []),
      (e) => e instanceof ProcessorError && e.kind === "bad-config",
      config,
    );
  }
});

test("the summary is trimmed as Rust trims", () => {
  // U+0085 is white space to Rust and U+FEFF is not; String.trim thinks the opposite.
  assert.equal(trim("\u0085\ufeffTHE SUMMARY\u3000\n"), "\ufeffTHE SUMMARY");
  assert.equal(trim(" \t "), "");
});
