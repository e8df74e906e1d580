// The processor under Node, with the SDK's stand-in for the host: run with
// `npm test` (`node --test`). The build then runs the same code in the
// sandbox.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ProcessorError, message, testing, toolCallMessage, toolResult } from "agent-host-guest";
import processor from "../src/processor.js";

function history() {
  const failed = toolResult("c1", "permission denied");
  failed.flags.error = true;
  return [
    message("user", "list the files"),
    toolCallMessage([{ id: "c1", name: "shell", arguments: '{"cmd": "ls /root"}' }]),
    failed,
    toolCallMessage([{ id: "c2", name: "shell", arguments: '{"cmd": "ls"}' }]),
    toolResult("c2", "a.txt"),
    message("assistant", "There is a.txt."),
  ];
}

test("failed results and their calls are dropped", () => {
  const out = testing.run(processor, "{}", history());
  assert.deepEqual(
    out.map((m) => m.role),
    ["user", "assistant", "tool", "assistant"],
  );
  assert.equal(out[2].content, "a.txt");
  assert.deepEqual(testing.logs.map((l) => l.text), ["dropped 2 messages"]);
});

test("keep_errors keeps everything", () => {
  const out = testing.run(processor, '{"keep_errors": true}', history());
  assert.equal(out.length, 6);
});

test("a misspelt key is refused with its name", () => {
  assert.throws(
    () => testing.run(processor, '{"keep_error": true}', history()),
    (e) => e instanceof ProcessorError && e.kind === "bad-config" && /unknown field `keep_error`/.test(e.message),
  );
});
