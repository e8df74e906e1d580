// `summarize-history`, in JavaScript: replaces the older part of a history
// with a summary written by the session's model, through the host service
// `summarize` (granted with --allow-summarize).
//
// A port of the standard Rust processor (processors/summarize-history),
// which is the specification: the same output on the same history with the
// same model, and the same request to the model. Everything before the last
// `keep_turns` turns (system messages aside) is sent to the model and
// replaced by a checkpoint pair flagged synthetic and summary: a user
// message saying what was summarized, and the assistant's summary. The cut
// moves back rather than separate a tool call from its results. When the
// service is denied, over budget or fails, the history is left as it is and
// the reason is logged.
//
// Configuration (defaults): keep_turns (4, at least 1), min_messages (6),
// trigger_tokens (0, off), max_words (400), max_tokens (0: the host's cap),
// timeout_ms (0: the host's cap), instructions (the prompt, with
// `{max_words}` replaced).

import {
  ProcessorError,
  ServiceError,
  config,
  debug,
  defineProcessor,
  info,
  message,
  summarize,
  warn,
} from "agent-host-guest";

/** The built-in prompt (the Rust processor's, word for word). */
export const INSTRUCTIONS =
  "You summarize the earlier part of a conversation between a user and an AI agent so that " +
  "the agent can continue without it. Write Markdown with these headings: Files Modified, Key " +
  "Decisions, Important Values (paths, URLs, identifiers, commands, numbers, copied verbatim " +
  "in backticks), Current State, Pending Tasks. Facts only from the conversation; carry " +
  "forward the facts of a previous summary unless the conversation changed them. Write only " +
  "the summary, under {max_words} words.";

/** Characters (code points) of one message quoted to the model; the middle
 * of a longer one is elided. */
const QUOTE_CHARS = 4000;

const U32 = 0xffffffff;

/** The configuration: every key optional, unknown keys refused. */
const CONFIG = config.object({
  keep_turns: config.integer({ default: 4, min: 0 }),
  min_messages: config.integer({ default: 6, min: 0 }),
  trigger_tokens: config.integer({ default: 0, min: 0 }),
  max_words: config.integer({ default: 400, min: 0, max: U32 }),
  max_tokens: config.integer({ default: 0, min: 0, max: U32 }),
  timeout_ms: config.integer({ default: 0, min: 0, max: U32 }),
  instructions: config.optional(config.string()),
});

/**
 * Where the kept turns start: the start of the last `turns` turns, moved
 * back so that no kept tool result answers a call before it; null when there
 * are no more than `turns` turns.
 */
export function cutAt(history, turns) {
  const starts = history.turnStarts();
  if (starts.length <= turns) return null;
  let cut = starts[starts.length - turns];
  const callers = history.toolCallers();
  let checked = history.length;
  while (cut < checked) {
    let earliest = null;
    for (let i = cut; i < checked; i++) {
      if (callers[i] != null && (earliest === null || callers[i] < earliest)) earliest = callers[i];
    }
    checked = cut;
    if (earliest !== null && earliest < cut) cut = earliest;
  }
  return cut;
}

const ROLES = { system: "system", user: "user", assistant: "assistant", tool: "tool result" };

/** The messages at `span` as plain text for the model. */
export function material(history, span) {
  let out = "<conversation>\n";
  for (const i of span) {
    const m = history.get(i);
    out += `[${m.flags.summary ? "previous summary" : ROLES[m.role]}`;
    if (m.toolName != null) out += ` ${m.toolName}`;
    out += "]\n";
    const text = textOf(m);
    if (text !== "") out += `${quote(text)}\n`;
    for (const call of m.toolCalls) out += `-> calls ${call.name}(${quote(call.arguments)})\n`;
    out += "\n";
  }
  return `${out}</conversation>\n`;
}

/** A message's text: its content and its text parts, a line apart. */
function textOf(m) {
  let text = m.content;
  for (const part of m.parts) {
    if (part.tag !== "text") continue;
    if (text !== "") text += "\n";
    text += part.val;
  }
  return text;
}

/** `text`, its middle elided past QUOTE_CHARS code points (not UTF-16 units). */
export function quote(text) {
  const chars = Array.from(text);
  if (chars.length <= QUOTE_CHARS) return text;
  const half = QUOTE_CHARS / 2;
  const head = chars.slice(0, half).join("");
  const tail = chars.slice(chars.length - half).join("");
  return `${head}\n[... ${chars.length - QUOTE_CHARS} characters elided ...]\n${tail}`;
}

/** What Rust's `str::trim` takes off (Unicode's White_Space): `String.trim`
 * would also take U+FEFF and leave U+0085, and the summary must be the Rust
 * one's. */
const EDGE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

/** `text` without the white space at both ends, as Rust trims it. */
export function trim(text) {
  return text.replace(EDGE_SPACE, "");
}

export default defineProcessor({
  name: "summarize-history",
  version: "0.1.0",
  summary: "Replaces the older part of a history with a summary written by the session's model",
  config: CONFIG,
  configExample: '{"keep_turns": 4, "min_messages": 6, "max_words": 400}',

  process(history, cfg) {
    if (cfg.keep_turns === 0) {
      throw ProcessorError.badConfig(
        "`keep_turns` must be at least 1 (0 would summarize the question being asked)",
      );
    }
    if (cfg.max_words === 0) throw ProcessorError.badConfig("`max_words` must be at least 1");
    const total = history.context.totalTokens;
    if (total < cfg.trigger_tokens) {
      debug(`${total} tokens, under the trigger of ${cfg.trigger_tokens}; nothing summarized`);
      return;
    }
    const cut = cutAt(history, cfg.keep_turns);
    if (cut === null) return;
    const span = [];
    for (let i = 0; i < cut; i++) if (history.header(i).role !== "system") span.push(i);
    if (span.length < Math.max(cfg.min_messages, 1)) {
      debug(`${span.length} older messages, fewer than ${cfg.min_messages}; nothing summarized`);
      return;
    }
    const prompt = (cfg.instructions ?? INSTRUCTIONS).replaceAll("{max_words}", String(cfg.max_words));
    let summary;
    try {
      summary = summarize(prompt, material(history, span), {
        maxTokens: cfg.max_tokens,
        timeoutMs: cfg.timeout_ms,
      });
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      warn(`no summary (${e}); the history is kept`);
      return;
    }
    const text = trim(summary.text);
    if (text === "") {
      warn("the model wrote an empty summary; the history is kept");
      return;
    }
    for (const i of span) history.drop(i);
    const flags = { synthetic: true, summary: true, error: false };
    const boundary = message(
      "user",
      `[The ${span.length} earlier messages of this conversation were summarized.]`,
    );
    boundary.flags = { ...flags };
    const answer = message("assistant", text);
    answer.flags = { ...flags };
    answer.metadata =
      `{"summary_of":${span.length},"input_tokens":${summary.inputTokens},` +
      `"output_tokens":${summary.outputTokens}}`;
    history.insertBefore(span[0], boundary);
    history.insertBefore(span[0], answer);
    info(
      `summarized ${span.length} messages (${summary.inputTokens} model tokens read, ` +
        `${summary.outputTokens} written)`,
    );
  },
});
