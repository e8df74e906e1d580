// The JavaScript SDK for agent-host history processors.
//
// A history processor is a WebAssembly component that receives a session's
// history and answers with edits: keep this message, drop that one, replace a
// third, insert a new one. This module hides the component-model shapes: an
// author writes a `process(history, config)` function over a `History`,
// declares it with `defineProcessor`, and exports it from the component's
// entry file with `exportProcessor`. The same code runs under Node
// (`node --test`) with a local stand-in for the host (see `testing`).
//
// What it deliberately leaves out: the host side, any way to reorder
// messages, and any WASI: a processor sees its input, the host's three
// functions (log, estimate-tokens, estimate-message-tokens) and, when the
// user grants them, the host's services (summarize, countTokens,
// readMemory), nothing else.
//
// The contract is wit/v0.2.0/history.wit: the host lends the history as a
// resource, whose headers the SDK reads at once and whose whole messages it
// fetches on first read (a processor working on headers alone pays for no
// text). A component built with QuickJS (componentize-qjs, which never drops
// that borrowed resource) speaks 0.1.0 instead and receives the list; the
// SDK gives the processor the same `History` either way. The shapes are
// those componentize-qjs and componentize-js give JavaScript: records are objects with camelCase
// keys (`toolCalls`, `toolCallId`), variants are `{tag, val}`, enums are
// strings (`"user"`), flags are objects of booleans, and `option<T>` is the
// value or `null` (componentize-js gives `undefined`; both are accepted).
//
// Example (a complete processor; see the guide for the build):
//
//   import { defineProcessor, config, info } from "agent-host-guest";
//
//   export default defineProcessor({
//     name: "tidy",
//     version: "0.1.0",
//     summary: "Keeps the last turns and drops error results.",
//     config: config.object({ turns: config.integer({ default: 4, min: 0 }) }),
//     configExample: '{"turns": 2}',
//     process(history, { turns }) {
//       history.keepLastTurns(turns);
//       history.retain((m) => !m.flags.error);
//       history.settleToolExchanges();
//       info(`kept ${history.kept()} of ${history.length} messages`);
//     },
//   });

/** @typedef {import("./agent-host-guest.d.ts").Message} Message */
/** @typedef {import("./agent-host-guest.d.ts").RunContext} RunContext */
/** @typedef {import("./agent-host-guest.d.ts").Item} Item */
/** @typedef {import("./agent-host-guest.d.ts").Level} Level */

// ---------------------------------------------------------------------------
// Errors

/**
 * Why a processor refused to answer. The host names the processor and its
 * hash around the message, so say what was wrong, not who you are. Throw one
 * from `process`: `throw ProcessorError.failed("no user message")`.
 */
export class ProcessorError extends Error {
  /**
   * @param {"bad-config" | "failed"} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = "ProcessorError";
    /** @type {"bad-config" | "failed"} */
    this.kind = kind;
    // What the component-model bindings read: componentize-qjs lowers the
    // thrown value itself as the `error` variant, componentize-js its
    // `payload`.
    this.tag = kind;
    this.val = message;
    this.payload = { tag: kind, val: message };
  }

  /** A configuration error: the text says which key and why. */
  static badConfig(message) {
    return new ProcessorError("bad-config", message);
  }

  /** Any other failure. */
  static failed(message) {
    return new ProcessorError("failed", message);
  }

  toString() {
    return this.kind === "bad-config"
      ? `bad configuration: ${this.message}`
      : `failed: ${this.message}`;
  }
}

// ---------------------------------------------------------------------------
// The host: the component's imports, or a local stand-in under Node.

/** The stand-in's log lines, for tests (see `testing.logs`). */
const nativeLogs = [];

// The host's default estimator (agent_host_core::tokens::HeuristicCounter):
// Latin text at 4 characters (code points) a token and CJK at 3, counted run
// by run and each run rounded up; 4 tokens a message, 1,000 an image, 3 a
// tool call beyond its name and arguments. The guest-sdk/conformance cases
// hold every SDK to it.
const LATIN_CHARS_PER_TOKEN = 4;
const CJK_CHARS_PER_TOKEN = 3;
const MESSAGE_OVERHEAD = 4;
const IMAGE_TOKENS = 1000;
const TOOL_CALL_OVERHEAD = 3;

/** Whether code point `c` is CJK, as the host's default estimator counts it. */
function isCjk(c) {
  return (
    (c >= 0x1100 && c <= 0x11ff) ||
    (c >= 0x2e80 && c <= 0x2fdf) ||
    (c >= 0x3000 && c <= 0x4dbf) ||
    (c >= 0x4e00 && c <= 0x9fff) ||
    (c >= 0xa960 && c <= 0xa97f) ||
    (c >= 0xac00 && c <= 0xd7ff) ||
    (c >= 0xf900 && c <= 0xfaff) ||
    (c >= 0xfe30 && c <= 0xfe4f) ||
    (c >= 0xff00 && c <= 0xffef) ||
    (c >= 0x20000 && c <= 0x3ffff)
  );
}

/** The local stand-in for the host's services, used outside WebAssembly. */
const nativeHost = {
  log(level, text) {
    nativeLogs.push({ level, text });
  },
  // The host's default estimator, computed here.
  estimateTokens(text) {
    let total = 0;
    let latin = 0;
    let cjk = 0;
    for (const ch of text) {
      if (isCjk(ch.codePointAt(0))) {
        total += Math.ceil(latin / LATIN_CHARS_PER_TOKEN);
        latin = 0;
        cjk += 1;
      } else {
        total += Math.ceil(cjk / CJK_CHARS_PER_TOKEN);
        cjk = 0;
        latin += 1;
      }
    }
    return total + Math.ceil(latin / LATIN_CHARS_PER_TOKEN) + Math.ceil(cjk / CJK_CHARS_PER_TOKEN);
  },
  estimateMessageTokens(m) {
    let n = MESSAGE_OVERHEAD + this.estimateTokens(m.content);
    for (const p of m.parts) {
      if (p.tag === "text") n += this.estimateTokens(p.val);
      else if (p.tag === "image") n += IMAGE_TOKENS;
      else n += this.estimateTokens(p.val.name) + this.estimateTokens(p.val.path);
    }
    if (m.reasoning) n += this.estimateTokens(m.reasoning.text);
    for (const c of m.toolCalls) {
      n += TOOL_CALL_OVERHEAD + this.estimateTokens(c.name) + this.estimateTokens(c.arguments);
    }
    if (m.toolName != null) n += this.estimateTokens(m.toolName);
    return n;
  },
};

/** The host in use: the component's imports once `exportProcessor` ran. */
let host = nativeHost;

/**
 * Writes a line to the host's log; it appears in the run report under this
 * processor. The host caps the number of lines per call.
 * @param {Level} level
 * @param {string} text
 */
export function log(level, text) {
  host.log(level, String(text));
}

/** Logs at `info` level. @param {string} text */
export const info = (text) => log("info", text);
/** Logs at `warn` level. @param {string} text */
export const warn = (text) => log("warn", text);
/** Logs at `debug` level. @param {string} text */
export const debug = (text) => log("debug", text);

/**
 * The host's estimate of how many tokens `text` costs.
 * @param {string} text
 * @returns {number}
 */
export function estimateTokens(text) {
  return host.estimateTokens(text);
}

/**
 * The host's estimate of a whole message (text, parts, tool calls and the
 * per-message overhead). Input messages carry it in `tokens` already; this
 * is for the ones you build.
 * @param {Message} message
 * @returns {number}
 */
export function estimateMessageTokens(message) {
  return host.estimateMessageTokens(message);
}

// ---------------------------------------------------------------------------
// The services the user grants (contract 0.2.0)

/**
 * Why a host service gave no answer: `kind` is `"denied"` (the user has not
 * granted it; the message names the grant), `"over-budget"` (the call would
 * go over the processor's budget for the run) or `"failed"` (the model timed
 * out, none is configured, ...). Thrown by `summarize`, `countTokens` and
 * `readMemory`, never a trap: catch it and keep the history.
 */
export class ServiceError extends Error {
  /**
   * @param {"denied" | "over-budget" | "failed"} kind
   * @param {string} message the host's reason
   */
  constructor(kind, message) {
    super(message);
    this.name = "ServiceError";
    /** @type {"denied" | "over-budget" | "failed"} */
    this.kind = kind;
  }

  /** `denied: ...`, `over budget: ...` or `failed: ...`, as the Rust SDK's error shows itself. */
  toString() {
    return `${this.kind.replace("-", " ")}: ${this.message}`;
  }
}

/** What `summarize` answers natively: `(prompt, text) => text`, or null. */
let servedSummaries = null;

/** The services outside WebAssembly, as the Rust SDK serves them natively. */
const nativeServices = {
  summarize(prompt, text) {
    if (servedSummaries === null) {
      throw new ServiceError(
        "failed",
        "no summaries are served outside WebAssembly unless a test sets them (testing.serveSummaries)",
      );
    }
    const answer = servedSummaries(prompt, text);
    return {
      text: answer,
      inputTokens: nativeHost.estimateTokens(prompt) + nativeHost.estimateTokens(text),
      outputTokens: nativeHost.estimateTokens(answer),
    };
  },
  countTokens(text) {
    return nativeHost.estimateTokens(text);
  },
  readMemory() {
    return [];
  },
};

/** The component's services import once `exportProcessor` ran (null when
 * its entry gave none), else the native stand-in. */
let services = nativeServices;

/** A component built without the services: every call is denied. */
const noServices = {
  refuse() {
    throw new ServiceError(
      "denied",
      "this component was built without the host services: import " +
        '"agent-host:history/services@0.2.0" in its entry, pass it to exportProcessor, and build ' +
        "it with --backend spidermonkey (contract 0.2.0)",
    );
  },
  summarize() {
    return this.refuse();
  },
  countTokens() {
    return this.refuse();
  },
  readMemory() {
    return this.refuse();
  },
};

/**
 * The answer of a call to the component's `services` import: its value, or
 * the `service-error` it gave as a `ServiceError`. The bindings give an
 * `err` by throwing a value (or an Error with it as `payload`) of the shape
 * `{tag: "denied" | "over-budget" | "failed", val: reason}`.
 */
function serviceCall(call) {
  let answer;
  try {
    answer = call();
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    const payload = e !== null && typeof e === "object" && "payload" in e ? e.payload : e;
    if (payload !== null && typeof payload === "object" && typeof payload.tag === "string") {
      const kind = ["denied", "over-budget", "failed"].includes(payload.tag) ? payload.tag : "failed";
      throw new ServiceError(kind, String(payload.val ?? ""));
    }
    throw e;
  }
  return answer;
}

/**
 * Has the session's model write `text` up as `prompt` (the instructions)
 * asks, within `caps` (`maxTokens`, `timeoutMs`; 0 or absent is the host's
 * cap, which the host lowers to the processor's budget). Blocks while the
 * model answers; the time is not counted against the processor's deadline.
 * Needs the `summarize` grant (`--allow-summarize`).
 *
 *   try {
 *     const summary = summarize("Summarize in one line.", text);
 *     info(summary.text);
 *   } catch (e) {
 *     if (!(e instanceof ServiceError)) throw e;
 *     warn(`no summary (${e}); the history is kept`);
 *   }
 *
 * @param {string} prompt
 * @param {string} text
 * @param {{maxTokens?: number, timeoutMs?: number}} [caps]
 * @returns {{text: string, inputTokens: number, outputTokens: number}}
 * @throws {ServiceError} when the call is denied, over budget or failed
 */
export function summarize(prompt, text, caps = {}) {
  const wit = { maxTokens: caps.maxTokens ?? 0, timeoutMs: caps.timeoutMs ?? 0 };
  const s = serviceCall(() => services.summarize(prompt, text, wit));
  // u64 arrives as a BigInt from the bindings.
  return { text: s.text, inputTokens: Number(s.inputTokens), outputTokens: Number(s.outputTokens) };
}

/**
 * The number of tokens `text` takes with the session's tokenizer. Needs the
 * `count-tokens` grant (`--allow-count-tokens`); `estimateTokens` needs
 * none, and is the host's quick estimate.
 * @param {string} text
 * @returns {number}
 * @throws {ServiceError} when the call is denied, over budget or failed
 */
export function countTokens(text) {
  return serviceCall(() => services.countTokens(text));
}

/**
 * The facts of the session's long-term memory that best match `query` (the
 * newest for an empty one), at most `limit` (the host caps it): the run's
 * user's facts with the run's agent only. Needs the `memory` grant
 * (`--allow-memory`).
 * @param {string} query
 * @param {number} limit
 * @returns {import("./agent-host-guest.d.ts").Fact[]}
 * @throws {ServiceError} when the call is denied, over budget or failed
 */
export function readMemory(query, limit) {
  const facts = serviceCall(() => services.readMemory(query, limit));
  return facts.map((f) => ({
    id: f.id,
    entity: f.entity,
    text: f.text,
    attribute: f.attribute ?? null,
    value: f.value ?? null,
    recorded: { seconds: Number(f.recorded.seconds), nanoseconds: f.recorded.nanoseconds },
  }));
}

// ---------------------------------------------------------------------------
// Messages

/**
 * A message with `role` and `content` and nothing else. Messages a processor
 * inserts are usually `synthetic`.
 * @param {"system" | "user" | "assistant" | "tool"} role
 * @param {string} content
 * @returns {Message}
 */
export function message(role, content = "") {
  return {
    id: "",
    role,
    content,
    parts: [],
    reasoning: null,
    toolCalls: [],
    toolCallId: null,
    toolName: null,
    usage: null,
    model: null,
    timestamp: null,
    agent: null,
    channel: null,
    flags: { synthetic: false, summary: false, error: false },
    metadata: null,
    tokens: 0,
  };
}

/** A message the processor wrote rather than a person or a model. */
export function synthetic(role, content = "") {
  const m = message(role, content);
  m.flags.synthetic = true;
  return m;
}

/** An assistant message that calls tools: `[{id, name, arguments}]`. */
export function toolCallMessage(calls) {
  const m = message("assistant", "");
  m.toolCalls = calls;
  return m;
}

/** A tool's result for the call `callId`. */
export function toolResult(callId, content) {
  const m = message("tool", content);
  m.toolCallId = callId;
  return m;
}

/** A copy of `m` deep enough to change its texts, parts and calls freely. */
export function cloneMessage(m) {
  return {
    ...m,
    parts: m.parts.map((p) => ({ ...p, val: typeof p.val === "object" && p.val ? { ...p.val } : p.val })),
    reasoning: m.reasoning ? { ...m.reasoning } : m.reasoning,
    toolCalls: m.toolCalls.map((c) => ({ ...c })),
    flags: { ...m.flags },
  };
}

/**
 * The content, then each text part, in order (empty ones included, so piece
 * `k > 0` is the `k`-th text part).
 * @param {Message} m
 * @returns {string[]}
 */
export function textPieces(m) {
  const pieces = [m.content];
  for (const p of m.parts) if (p.tag === "text") pieces.push(p.val);
  return pieces;
}

/**
 * The message's text: content and text parts, the non-empty ones joined by
 * a blank line (as the host's `Message::text`).
 * @param {Message} m
 */
export function text(m) {
  return textPieces(m).filter((s) => s !== "").join("\n\n");
}

/**
 * Every text a processor may read or rewrite, in order: the content, text
 * parts, readable reasoning and tool-call arguments. Redacted (opaque)
 * reasoning is left out: it is the provider's, and changing it breaks it.
 * `setText(m, k, value)` writes text `k` of this list back.
 * @param {Message} m
 * @returns {string[]}
 */
export function texts(m) {
  const all = textPieces(m);
  if (m.reasoning && !m.reasoning.redacted) all.push(m.reasoning.text);
  for (const c of m.toolCalls) all.push(c.arguments);
  return all;
}

/**
 * Sets text `k` of `texts(m)` to `value`.
 * @param {Message} m
 * @param {number} k
 * @param {string} value
 */
export function setText(m, k, value) {
  if (k === 0) {
    m.content = value;
    return;
  }
  let at = 0;
  for (const p of m.parts) {
    if (p.tag === "text" && ++at === k) {
      p.val = value;
      return;
    }
  }
  at += 1;
  if (m.reasoning && !m.reasoning.redacted) {
    if (at === k) {
      m.reasoning.text = value;
      return;
    }
    at += 1;
  }
  const call = m.toolCalls[k - at];
  if (!call) throw new RangeError(`setText: message has no text ${k}`);
  call.arguments = value;
}

/** Whether the host or an earlier stage wrote it (checkpoints, repairs). */
export const isSynthetic = (m) => m.flags.synthetic;
/** Whether it is part of a summary checkpoint. */
export const isSummary = (m) => m.flags.summary;
/** Whether it starts a turn: a user message that is not synthetic. */
export const startsTurn = (m) => m.role === "user" && !m.flags.synthetic;

/** `word`, with an `s` unless `n` is 1, for log lines. */
export function plural(n, word) {
  return n === 1 ? word : `${word}s`;
}

/** `12345678` as `12,345,678`, for log lines. */
export function groupThousands(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

// ---------------------------------------------------------------------------
// The history

/** The length of `text` in UTF-8 bytes (QuickJS has no TextEncoder). */
function utf8Length(text) {
  let n = 0;
  for (const ch of text) {
    const c = ch.codePointAt(0);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * The header of `m`, as the host sends it: no string, only what a
 * structural processor reads (`answers`, which needs the history, is given).
 * @param {Message} m
 * @param {number | null} [answers]
 */
export function headerOf(m, answers = null) {
  return {
    role: m.role,
    flags: m.flags,
    tokens: m.tokens,
    timestamp: m.timestamp ?? null,
    answers,
    toolCalls: m.toolCalls.length,
    parts: m.parts.length,
    contentBytes: utf8Length(m.content),
    reasoningBytes: m.reasoning ? utf8Length(m.reasoning.text) : null,
    metadataBytes: m.metadata != null ? utf8Length(m.metadata) : 0,
    usage: m.usage ?? null,
  };
}

/** The headers of `messages`, with the host's rule for `answers`. */
function headersOf(messages) {
  const calls = new Map();
  return messages.map((m, i) => {
    const answers = m.role === "tool" && m.toolCallId != null ? (calls.get(m.toolCallId) ?? null) : null;
    for (const c of m.toolCalls) calls.set(c.id, i);
    return headerOf(m, answers);
  });
}

/**
 * The session's history for one call, and the edits made to it so far.
 *
 * Every input message starts out kept. `drop`, `retain`, `retainHeaders` and
 * the structural helpers drop messages, `replace` and `change` change one,
 * `insertBefore` and `push` add new ones. Reads (`messages`, `get`) see the
 * current contents, indices are always those of the input, and nothing is
 * ever reordered. Change a message only through `replace` or `change(i)`: a
 * message changed in place without them is not sent back.
 *
 * The headers (`headers`, `header(i)`) are always there; the first read of a
 * whole message fetches every message from the host (once), so a processor
 * that reads only headers pays for no text.
 */
export class History {
  /**
   * A history given whole (tests; contract 0.1.0): its headers are worked
   * out here, and its messages count as fetched on first read, as in a
   * component.
   * @param {RunContext} context
   * @param {Message[]} messages
   */
  constructor(context, messages) {
    this._setup(context, headersOf(messages));
    this._unread = messages;
    this._source = null;
  }

  /**
   * The host's history resource (contract 0.2.0): its headers now, its
   * messages when first read. `source` has the resource's `len()`,
   * `headers(start, end)` and `messages(start, end)`.
   * @param {RunContext} context
   */
  static fromHost(context, source) {
    const h = Object.create(History.prototype);
    const n = source.len();
    h._setup(context, source.headers(0, n));
    h._unread = null;
    h._source = source;
    return h;
  }

  _setup(context, headers) {
    /** What the host says about this call. @type {RunContext} */
    this.context = context;
    this._headers = headers;
    this._messages = null;
    this._dropped = new Uint8Array(headers.length);
    this._changed = new Uint8Array(headers.length);
    /** New messages with the input index they go before. */
    this._inserts = [];
    const n = headers.length;
    this._callers = headers.map((h) => (h.answers != null && h.answers < n ? h.answers : null));
  }

  _load() {
    if (this._messages === null) {
      if (this._source !== null) this._messages = this._source.messages(0, this._headers.length);
      else this._messages = this._unread ?? [];
      this._unread = null;
    }
    return this._messages;
  }

  /**
   * The input's messages, with the changes made so far (dropped ones
   * included). The first read fetches them from the host, texts included.
   * @returns {Message[]}
   */
  get messages() {
    return this._load();
  }

  /** How many messages the input had. */
  get length() {
    return this._headers.length;
  }

  /**
   * The input's headers, as the host sent them: roles, flags, token counts,
   * timestamps, tool links and sizes, without any text.
   */
  get headers() {
    return this._headers;
  }

  /**
   * The header of message `index` as it is now (a changed message's is
   * worked out from its new contents; its `answers` stays the input's).
   */
  header(index) {
    this._check(index);
    const h = this._headers[index];
    return this._changed[index] ? headerOf(this._load()[index], h.answers ?? null) : h;
  }

  /**
   * Whether the whole messages have been fetched from the host: whether the
   * processor read, changed or replaced a message (or settled tool exchanges
   * that link a result to a call).
   */
  isLoaded() {
    return this._messages !== null;
  }

  /** Message `index`, as it is now (the first read fetches the messages). */
  get(index) {
    return this._load()[index];
  }

  /** Whether message `index` is still kept. */
  isKept(index) {
    this._check(index);
    return this._dropped[index] === 0;
  }

  /** How many input messages are still kept (changed ones included). */
  kept() {
    let n = 0;
    for (const d of this._dropped) n += d === 0 ? 1 : 0;
    return n;
  }

  /** Drops message `index` from the output. */
  drop(index) {
    this._check(index);
    this._dropped[index] = 1;
  }

  /** Keeps message `index` after all (undoes `drop`). */
  restore(index) {
    this._check(index);
    this._dropped[index] = 0;
  }

  /**
   * Drops every kept message for which `keep(message, index)` is false.
   * @param {(m: Message, index: number) => boolean} keep
   */
  retain(keep) {
    this._load().forEach((m, i) => {
      if (this._dropped[i] === 0 && !keep(m, i)) this._dropped[i] = 1;
    });
  }

  /**
   * Drops every kept message whose current header fails `keep(header,
   * index)`, without reading any text.
   */
  retainHeaders(keep) {
    for (let i = 0; i < this.length; i++) {
      if (this._dropped[i] === 0 && !keep(this.header(i), i)) this._dropped[i] = 1;
    }
  }

  /** Replaces message `index` by `message` (it stays at its place). */
  replace(index, message) {
    this._check(index);
    this._load()[index] = message;
    this._changed[index] = 1;
  }

  /**
   * Message `index`, to change in place: a copy that the host receives back
   * as a replacement, so only ask for it when you change it.
   * @returns {Message}
   */
  change(index) {
    this._check(index);
    const messages = this._load();
    if (this._changed[index] === 0) {
      messages[index] = cloneMessage(messages[index]);
      this._changed[index] = 1;
    }
    return messages[index];
  }

  /** Whether message `index` was replaced or changed. */
  isChanged(index) {
    return this._changed[index] === 1;
  }

  /**
   * Inserts a new message before input message `index` (`length` appends).
   * Several inserts at one place keep the order they were made in.
   */
  insertBefore(index, message) {
    if (!Number.isInteger(index) || index < 0 || index > this.length) {
      throw new RangeError(`insertBefore(${index}) in a history of ${this.length}`);
    }
    this._inserts.push([index, message]);
  }

  /** Appends a new message after the last one. */
  push(message) {
    this._inserts.push([this.length, message]);
  }

  /** The indices where the kept turns start, oldest first. */
  turnStarts() {
    const starts = [];
    for (let i = 0; i < this.length; i++) {
      const h = this.header(i);
      if (this._dropped[i] === 0 && h.role === "user" && !h.flags.synthetic) starts.push(i);
    }
    return starts;
  }

  /**
   * For each input message, the index of the message whose tool call it
   * answers in the input (`null` for messages that are not tool results, and
   * for results whose call is not in the history). A result answers the
   * nearest earlier call with its id.
   * @returns {(number | null)[]}
   */
  toolCallers() {
    return this._callers;
  }

  /**
   * For each message, the name of the tool whose result it is: its
   * `toolName`, or the name in the call it answers; `null` otherwise.
   * @returns {(string | null)[]}
   */
  toolNames() {
    const calls = new Map();
    return this._load().map((m) => {
      for (const c of m.toolCalls) calls.set(c.id, c.name);
      if (m.role !== "tool") return null;
      return m.toolName ?? (m.toolCallId != null ? (calls.get(m.toolCallId) ?? null) : null);
    });
  }

  /**
   * Keeps the last `turns` kept turns, system messages and summaries, and
   * drops everything older. The cut moves back rather than split a tool
   * exchange. Does nothing when there are no more than `turns` turns.
   */
  keepLastTurns(turns) {
    const starts = this.turnStarts();
    if (starts.length <= turns) return;
    let cut = turns === 0 ? this.length : starts[starts.length - turns];
    const callers = this.toolCallers();
    let checked = this.length;
    while (cut < checked) {
      let earliest = Infinity;
      for (let i = cut; i < checked; i++) {
        if (this._dropped[i] === 0 && callers[i] !== null) earliest = Math.min(earliest, callers[i]);
      }
      checked = cut;
      if (earliest < cut) cut = earliest;
    }
    for (let i = 0; i < cut; i++) {
      const h = this.header(i);
      if (h.role !== "system" && !h.flags.summary) this._dropped[i] = 1;
    }
  }

  /**
   * Makes the tool exchanges whole again after drops and changes: a kept
   * result whose call was dropped, or taken out of its message, is dropped;
   * a kept message whose calls lost all their results loses those calls (and
   * is dropped when nothing else is left in it).
   */
  settleToolExchanges() {
    const callers = this._callers;
    // Nothing links a result to a call: nothing to settle, no text to read.
    if (callers.every((c) => c === null)) return;
    const messages = this._load();
    const idOf = (i) => messages[i].toolCallId ?? "";
    callers.forEach((c, i) => {
      if (c !== null && this._dropped[i] === 0) {
        const id = idOf(i);
        if (this._dropped[c] === 1 || !messages[c].toolCalls.some((k) => k.id === id)) {
          this._dropped[i] = 1;
        }
      }
    });
    /** @type {Map<number, {kept: string[], gone: string[]}>} */
    const answered = new Map();
    callers.forEach((c, i) => {
      if (c === null) return;
      if (!answered.has(c)) answered.set(c, { kept: [], gone: [] });
      const entry = answered.get(c);
      (this._dropped[i] === 1 ? entry.gone : entry.kept).push(idOf(i));
    });
    for (const [c, { kept, gone }] of answered) {
      if (this._dropped[c] === 1) continue;
      const lost = gone.filter((id) => !kept.includes(id));
      if (lost.length === 0) continue;
      const m = this.change(c);
      m.toolCalls = m.toolCalls.filter((call) => !lost.includes(call.id));
      const empty = m.toolCalls.length === 0 && m.content.trim() === "" && m.parts.length === 0 && !m.reasoning;
      if (empty) this._dropped[c] = 1;
    }
  }

  /**
   * The answer for the host: one item per kept, changed or new message, in
   * order.
   * @returns {Item[]}
   */
  toItems() {
    return this._merge(
      (message) => ({ tag: "insert", val: message }),
      (i) =>
        this._changed[i] && this._messages !== null
          ? { tag: "replace", val: { index: i, message: this._messages[i] } }
          : { tag: "keep", val: i },
    );
  }

  /**
   * The output the host would build from these edits (without its
   * validation and id assignment): what `testing.run` returns.
   * @returns {Message[]}
   */
  toMessages() {
    const messages = this._load();
    return this._merge(
      (message) => message,
      (i) => messages[i],
    );
  }

  _merge(inserted, kept) {
    const inserts = this._inserts.map(([at, m], order) => [at, order, m]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const out = [];
    let next = 0;
    for (let i = 0; i < this.length; i++) {
      while (next < inserts.length && inserts[next][0] === i) out.push(inserted(inserts[next++][2]));
      if (this._dropped[i] === 0) out.push(kept(i));
    }
    while (next < inserts.length) out.push(inserted(inserts[next++][2]));
    return out;
  }

  _check(index) {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw new RangeError(`index ${index} out of range for a history of ${this.length}`);
    }
  }
}

// ---------------------------------------------------------------------------
// Configuration

/** What a JSON value is, for error messages. */
function describeValue(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "an object";
  if (typeof v === "string") return `the string ${JSON.stringify(v)}`;
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** A configuration error at `path` (`` `extra[0].name`: ... ``). */
function configError(path, message) {
  return ProcessorError.badConfig(path ? `\`${path}\`: ${message}` : message);
}

/**
 * Builders of configuration specs: each checks a JSON value and gives the
 * value the processor receives, or throws a `bad-config` error that names the
 * key (`` `turns`: expected an integer, found the string "four" ``). Objects
 * refuse unknown keys, so a misspelt key is an error, not a silent default.
 */
export const config = {
  /** `true` or `false`; `fallback` when absent. */
  boolean(fallback = false) {
    return {
      default: () => fallback,
      parse(v, path) {
        if (typeof v !== "boolean") throw configError(path, `expected a boolean, found ${describeValue(v)}`);
        return v;
      },
    };
  },
  /** A whole number within `min` and `max`; `fallback` when absent. */
  integer({ default: fallback = 0, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = {}) {
    return {
      default: () => fallback,
      parse(v, path) {
        if (!Number.isInteger(v)) throw configError(path, `expected an integer, found ${describeValue(v)}`);
        if (v < min || v > max) throw configError(path, `${v} is out of range (${min} to ${max})`);
        return v;
      },
    };
  },
  /** Any number; `fallback` when absent. */
  number(fallback = 0) {
    return {
      default: () => fallback,
      parse(v, path) {
        if (typeof v !== "number") throw configError(path, `expected a number, found ${describeValue(v)}`);
        return v;
      },
    };
  },
  /** A string; `fallback` when absent. */
  string(fallback = "") {
    return {
      default: () => fallback,
      parse(v, path) {
        if (typeof v !== "string") throw configError(path, `expected a string, found ${describeValue(v)}`);
        return v;
      },
    };
  },
  /** `spec`'s value, or `null` when absent or `null`. */
  optional(spec) {
    return {
      default: () => null,
      parse: (v, path) => (v === null ? null : spec.parse(v, path)),
    };
  },
  /** A list of `spec`'s values; `fallback()` (an empty list) when absent. */
  list(spec, fallback = () => []) {
    return {
      default: fallback,
      parse(v, path) {
        if (!Array.isArray(v)) throw configError(path, `expected a list, found ${describeValue(v)}`);
        return v.map((item, i) => spec.parse(item, `${path}[${i}]`));
      },
    };
  },
  /**
   * An object with these keys, each a spec; absent keys take their spec's
   * default, unless listed in `required`. Unknown keys are refused.
   * @param {Record<string, any>} fields
   * @param {{required?: string[]}} [options]
   */
  object(fields, { required = [] } = {}) {
    const names = Object.keys(fields);
    const build = (v, path) => {
      if (v === null || typeof v !== "object" || Array.isArray(v)) {
        throw configError(path, `expected an object, found ${describeValue(v)}`);
      }
      for (const key of Object.keys(v)) {
        if (!Object.hasOwn(fields, key)) {
          const expected = names.length ? `expected one of ${names.map((n) => `\`${n}\``).join(", ")}` : "there are none";
          throw configError(path, `unknown field \`${key}\`, ${expected}`);
        }
      }
      const out = {};
      for (const name of names) {
        const at = path ? `${path}.${name}` : name;
        if (Object.hasOwn(v, name)) out[name] = fields[name].parse(v[name], at);
        else if (required.includes(name)) throw configError(path, `missing field \`${name}\``);
        else out[name] = fields[name].default();
      }
      return out;
    };
    return { default: () => build({}, ""), parse: build };
  },
};

/** A configuration with no settings: accepts `{}` (or none), refuses any key. */
config.none = config.object({});

/**
 * Parses the user's configuration text with `spec`: none (empty or `null`)
 * is the spec's default.
 * @param {string} text
 * @param {{default: () => any, parse: (v: any, path: string) => any}} spec
 */
export function parseConfig(text, spec) {
  const trimmed = text.trim();
  if (trimmed === "" || trimmed === "null") return spec.default();
  let value;
  try {
    value = JSON.parse(trimmed);
  } catch (e) {
    throw ProcessorError.badConfig(`not valid JSON: ${e.message}`);
  }
  return spec.parse(value, "");
}

// ---------------------------------------------------------------------------
// Declaring and exporting a processor

/**
 * Declares a processor: its name, version and summary (what `describe`
 * answers), its configuration spec and example, and its `process` function,
 * which edits the history in place (and may return nothing).
 * @template C
 * @param {import("./agent-host-guest.d.ts").ProcessorDefinition<C>} definition
 */
export function defineProcessor(definition) {
  for (const key of ["name", "version", "summary"]) {
    if (typeof definition[key] !== "string" || definition[key] === "") {
      throw new TypeError(`defineProcessor: \`${key}\` must be a non-empty string`);
    }
  }
  if (typeof definition.process !== "function") {
    throw new TypeError("defineProcessor: `process` must be a function (history, config) => void");
  }
  return Object.freeze({ config: config.none, configExample: null, configSchema: null, ...definition });
}

/** The description the host asks for before the first call. */
function describe(definition) {
  return {
    name: definition.name,
    version: definition.version,
    summary: definition.summary,
    configSchema: definition.configSchema ?? null,
    configExample: definition.configExample ?? null,
    reorders: false,
  };
}

/**
 * One call: parse the configuration, run the processor, answer with its
 * edits. Errors other than `ProcessorError` become `failed` with their text.
 */
function processWith(definition, context, input) {
  try {
    const settings = parseConfig(context.config, definition.config);
    // Contract 0.2.0 lends the host's history resource; 0.1.0 gave a list.
    const history = Array.isArray(input) ? new History(context, input) : History.fromHost(context, input);
    definition.process(history, settings);
    return history.toItems();
  } catch (e) {
    if (e instanceof ProcessorError) throw e;
    throw ProcessorError.failed(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  }
}

/**
 * The component's `processor` export for `definition`, calling `imports`
 * (the `agent-host:history/host` module: `@0.1.0` or `@0.2.0`, the same
 * functions) for the log and estimates.
 * The component's entry file is these three lines:
 *
 *   import * as host from "agent-host:history/host@0.1.0";
 *   import { exportProcessor } from "agent-host-guest";
 *   import definition from "./processor.js";
 *   export const processor = exportProcessor(definition, host);
 *
 * A processor that asks for the host's services (`summarize`,
 * `countTokens`, `readMemory`) also hands over the `services` import, and is
 * built with `--backend spidermonkey` (contract 0.2.0; QuickJS builds 0.1.0,
 * which has none):
 *
 *   import * as services from "agent-host:history/services@0.2.0";
 *   export const processor = exportProcessor(definition, host, services);
 *
 * Without it, every service call throws a `ServiceError` of kind `denied`.
 */
export function exportProcessor(definition, imports, serviceImports = null) {
  host = imports;
  services = serviceImports ?? noServices;
  return {
    describe: () => describe(definition),
    process: (context, history) => processWith(definition, context, history),
  };
}

// ---------------------------------------------------------------------------
// Running natively, for tests

/**
 * Running a processor under Node, for its unit tests: the same code as in
 * the component, with the host's services served locally (log lines are
 * kept in `testing.logs`; estimates follow the host's default heuristic).
 * The host does more: it checks the edits, validates the result and gives
 * new messages ids. Test those paths through the real host.
 */
export const testing = {
  /** The log lines of the last `run`, as `{level, text}`. */
  logs: nativeLogs,

  /**
   * A run context for tests: a 128,000-token window, the budget as large,
   * the current time and `configText` as the configuration.
   * @returns {RunContext}
   */
  context(configText = "{}") {
    const ms = Date.now();
    return {
      sessionKey: null,
      agent: null,
      model: null,
      contextWindow: 128000,
      budget: 128000,
      totalTokens: 0,
      turn: 0,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: null, cacheWriteTokens: null },
      now: { seconds: Math.floor(ms / 1000), nanoseconds: (ms % 1000) * 1e6 },
      config: configText,
    };
  },

  /**
   * Runs `definition` with the configuration text `configText` over
   * `messages` and returns the history it produces. Messages whose `tokens`
   * is 0 get an estimate first, as the host would give them. A refusal
   * throws the `ProcessorError`.
   * @param {{context?: RunContext}} [options] a context of your own (its
   *   `config` is replaced by `configText`)
   * @returns {Message[]}
   */
  run(definition, configText, messages, { context } = {}) {
    nativeLogs.length = 0;
    for (const m of messages) if (!m.tokens) m.tokens = nativeHost.estimateMessageTokens(m);
    const ctx = { ...(context ?? testing.context()), config: configText };
    ctx.totalTokens = messages.reduce((n, m) => n + m.tokens, 0);
    const previous = [host, services];
    host = nativeHost;
    services = nativeServices;
    try {
      const settings = parseConfig(ctx.config, definition.config);
      const history = new History(ctx, messages);
      definition.process(history, settings);
      return history.toMessages();
    } finally {
      [host, services] = previous;
    }
  },

  /**
   * Has `summarize` answer natively with `summaries(prompt, text)`: the
   * summary's text, or a `ServiceError` it throws (`new
   * ServiceError("denied", "...")` stands for a processor the user did not
   * grant `summarize`). The tokens it reports are the host's default
   * estimates of the prompt and text (read) and of the answer (written).
   * `countTokens` answers with the default estimate and `readMemory` with
   * no facts, as in the Rust SDK.
   *
   *   testing.serveSummaries((prompt, text) => `${text.length} characters`);
   *
   * @param {(prompt: string, text: string) => string} summaries
   */
  serveSummaries(summaries) {
    servedSummaries = summaries;
  },

  /** Stops what `serveSummaries` set: `summarize` fails again. */
  stopServingSummaries() {
    servedSummaries = null;
  },
};
