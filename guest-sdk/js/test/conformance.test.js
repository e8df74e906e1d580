// The shared conformance cases (guest-sdk/conformance/cases/*.json, the
// format in its README), run against the JavaScript SDK: the `conformance`
// processor the cases configure, written with the SDK's own API, over each
// case's history; its answer, whether it fetched the messages, and the SDK's
// native token estimates, compared with what the case expects. Each edits
// case runs twice: over a history given whole, and over a stand-in for the
// host's history resource (contract 0.2.0), which counts what is fetched.
// The Rust, Python and C SDKs run the same cases.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  History,
  ProcessorError,
  config,
  estimateMessageTokens,
  estimateTokens,
  headerOf,
  message,
  parseConfig,
  testing,
} from "../agent-host-guest.js";

const CASES = join(fileURLToPath(new URL(".", import.meta.url)), "..", "..", "conformance", "cases");

const step = config.object(
  {
    op: config.string(),
    index: config.optional(config.integer({ min: 0, max: 0xffffffff })),
    turns: config.optional(config.integer({ min: 0, max: 0xffffffff })),
    tokens: config.optional(config.integer({ min: 0, max: 0xffffffff })),
    role: config.optional(config.string()),
    text: config.optional(config.string()),
    message: { default: () => null, parse: (v) => v },
  },
  { required: ["op"] },
);
const spec = config.object({ steps: config.list(step) });

function needs(s, key) {
  if (s[key] === null || s[key] === undefined) throw ProcessorError.badConfig(`op \`${s.op}\` needs \`${key}\``);
  return s[key];
}

/** The processor the cases configure: each step one call of the SDK's API. */
function conformance(history, { steps }) {
  for (const s of steps) {
    switch (s.op) {
      case "drop":
        history.drop(needs(s, "index"));
        break;
      case "restore":
        history.restore(needs(s, "index"));
        break;
      case "keep_last_turns":
        history.keepLastTurns(needs(s, "turns"));
        break;
      case "settle_tool_exchanges":
        history.settleToolExchanges();
        break;
      case "drop_role": {
        const role = needs(s, "role");
        history.retainHeaders((h) => h.role !== role);
        break;
      }
      case "drop_over_tokens": {
        const most = needs(s, "tokens");
        history.retainHeaders((h) => h.tokens <= most);
        break;
      }
      case "drop_containing": {
        const text = needs(s, "text");
        history.retain((m) => !m.content.includes(text));
        break;
      }
      case "replace":
        history.replace(needs(s, "index"), toMessage(needs(s, "message")));
        break;
      case "set_content":
        history.change(needs(s, "index")).content = needs(s, "text");
        break;
      case "clear_tool_calls":
        history.change(needs(s, "index")).toolCalls = [];
        break;
      case "insert_before":
        history.insertBefore(needs(s, "index"), toMessage(needs(s, "message")));
        break;
      case "push":
        history.push(toMessage(needs(s, "message")));
        break;
      case "fail":
        throw ProcessorError.failed(needs(s, "text"));
      default:
        throw ProcessorError.badConfig(`unknown op \`${s.op}\``);
    }
  }
}

/** `obj`, refusing keys this harness does not know. */
function keys(obj, known, what) {
  assert.ok(obj !== null && typeof obj === "object" && !Array.isArray(obj), `${what} is not an object`);
  for (const k of Object.keys(obj)) assert.ok(known.includes(k), `${what}: unknown key ${k}`);
  return obj;
}

const MESSAGE_KEYS = [
  "id", "role", "content", "parts", "reasoning", "tool_calls", "tool_call_id", "tool_name",
  "model", "agent", "channel", "flags", "metadata", "tokens",
];

/** A message in the cases' JSON shape, as the SDK's `Message`. */
function toMessage(v) {
  keys(v, MESSAGE_KEYS, "message");
  assert.ok(["system", "user", "assistant", "tool"].includes(v.role), `role ${v.role}`);
  const m = message(v.role, v.content ?? "");
  m.id = v.id ?? "";
  m.parts = (v.parts ?? []).map((p) => {
    keys(p, ["text", "image", "file"], "part");
    if ("text" in p) return { tag: "text", val: p.text };
    if ("image" in p) {
      const i = keys(p.image, ["url", "path", "mime_type"], "image");
      const source = "url" in i ? { tag: "url", val: i.url } : { tag: "path", val: i.path };
      return { tag: "image", val: { source, mimeType: i.mime_type ?? null } };
    }
    const f = keys(p.file, ["name", "path", "mime_type"], "file");
    return { tag: "file", val: { name: f.name, path: f.path, mimeType: f.mime_type ?? null } };
  });
  if (v.reasoning != null) {
    const r = keys(v.reasoning, ["text", "signature", "redacted"], "reasoning");
    m.reasoning = { text: r.text, signature: r.signature ?? null, redacted: r.redacted ?? false };
  }
  m.toolCalls = (v.tool_calls ?? []).map((c) => {
    keys(c, ["id", "name", "arguments"], "tool call");
    return { id: c.id, name: c.name, arguments: c.arguments };
  });
  m.toolCallId = v.tool_call_id ?? null;
  m.toolName = v.tool_name ?? null;
  m.model = v.model ?? null;
  m.agent = v.agent ?? null;
  m.channel = v.channel ?? null;
  for (const f of v.flags ?? []) {
    assert.ok(f in m.flags, `flag ${f}`);
    m.flags[f] = true;
  }
  m.metadata = v.metadata ?? null;
  m.tokens = v.tokens ?? 0;
  return m;
}

function toItem(v) {
  keys(v, ["keep", "replace", "message", "insert"], "item");
  if ("keep" in v) return { tag: "keep", val: v.keep };
  if ("replace" in v) return { tag: "replace", val: { index: v.replace, message: toMessage(v.message) } };
  return { tag: "insert", val: toMessage(v.insert) };
}

/**
 * A stand-in for the host's history resource: headers worked out here (a
 * result answers the nearest earlier call with its id), messages handed
 * out and counted.
 */
function hostHistory(messages) {
  const calls = new Map();
  const headers = messages.map((m, i) => {
    const answers = m.role === "tool" && m.toolCallId != null ? (calls.get(m.toolCallId) ?? null) : null;
    for (const c of m.toolCalls) calls.set(c.id, i);
    return headerOf(m, answers);
  });
  const resource = {
    fetched: 0,
    len: () => messages.length,
    headers: (start, end) => headers.slice(start, end),
    messages(start, end) {
      resource.fetched += 1;
      return messages.slice(start, end);
    },
  };
  return resource;
}

function allCases() {
  const files = readdirSync(CASES)
    .filter((f) => f.endsWith(".json"))
    .sort();
  assert.ok(files.length > 0, `no case files in ${CASES}`);
  const all = [];
  for (const file of files) {
    const doc = keys(JSON.parse(readFileSync(join(CASES, file), "utf8")), ["cases"], file);
    for (const c of doc.cases) all.push([file, c]);
  }
  return all;
}

/** What one call gave: the items or the error, and what was fetched. */
function run(c, fromHost) {
  const text = "config_text" in c ? c.config_text : JSON.stringify(c.config ?? {});
  const messages = c.history.map(toMessage);
  const source = hostHistory(messages);
  const ctx = { ...testing.context(), config: text };
  const history = fromHost ? History.fromHost(ctx, source) : new History(ctx, messages);
  try {
    conformance(history, parseConfig(text, spec));
    return { items: history.toItems(), history, source };
  } catch (e) {
    if (!(e instanceof ProcessorError)) throw e;
    return { error: e, history, source };
  }
}

test("every conformance case passes", () => {
  const counts = { edits: 0, errors: 0, tokens: 0 };
  const names = new Set();
  for (const [file, c] of allCases()) {
    keys(c, ["name", "history", "config", "config_text", "expect", "text_tokens", "message_tokens"], "a case");
    const at = `${file}: ${c.name}`;
    assert.ok(!names.has(c.name), `${at}: the name is taken`);
    names.add(c.name);
    if ("text_tokens" in c || "message_tokens" in c) {
      for (const t of c.text_tokens ?? []) {
        assert.equal(estimateTokens(t.text), t.tokens, `${at}: ${JSON.stringify(t.text)}`);
        counts.tokens += 1;
      }
      for (const t of c.message_tokens ?? []) {
        assert.equal(estimateMessageTokens(toMessage(t.message)), t.tokens, `${at}: ${JSON.stringify(t.message)}`);
        counts.tokens += 1;
      }
      continue;
    }
    assert.ok(!("config" in c && "config_text" in c), `${at}: config or config_text, not both`);
    const expect = keys(c.expect, ["items", "loaded", "tool_callers", "error"], "expect");
    for (const fromHost of [false, true]) {
      const where = `${at} (${fromHost ? "from the host's resource" : "given whole"})`;
      const got = run(c, fromHost);
      if (expect.error) {
        keys(expect.error, ["kind", "contains"], "error");
        assert.ok(got.error, `${where}: answered, expected an error`);
        assert.equal(got.error.kind, expect.error.kind, `${where}: ${got.error.message}`);
        assert.ok(got.error.message.includes(expect.error.contains), `${where}: ${got.error.message}`);
        continue;
      }
      assert.ok(!got.error, `${where}: ${got.error?.message}`);
      assert.deepEqual(got.items, expect.items.map(toItem), where);
      if ("loaded" in expect) {
        assert.equal(got.history.isLoaded(), expect.loaded, `${where}: loaded`);
        if (fromHost) assert.equal(got.source.fetched, expect.loaded ? 1 : 0, `${where}: fetches`);
      }
      if ("tool_callers" in expect) assert.deepEqual(got.history.toolCallers(), expect.tool_callers, where);
    }
    counts[expect.error ? "errors" : "edits"] += 1;
  }
  assert.ok(counts.edits > 0 && counts.errors > 0 && counts.tokens > 0, `every kind ran: ${JSON.stringify(counts)}`);
});
