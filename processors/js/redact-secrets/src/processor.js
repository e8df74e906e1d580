// `redact-secrets`, in JavaScript: replaces API keys, tokens, private keys and
// passwords in a history's text with typed placeholders such as
// `[REDACTED:openai-key]`. A port of the Rust standard processor
// (processors/redact-secrets): the same configuration, the same rule, the
// same output; its crate doc describes the kinds and the scan in full.
//
// It scans every message's content, text parts, readable reasoning and
// tool-call arguments. A message with no secret is kept untouched; only the
// messages where something was replaced go back to the host. Signed
// reasoning that holds a secret is dropped (a signed block cannot be edited).
// At the end it logs what it replaced, per kind:
//
//   redacted 3 secrets in 2 messages: openai-key 2, github-token 1
//   no secrets found in 120 messages
//
// Extra patterns use the Rust processor's syntax (regex-lite); see
// pattern.js for what the JavaScript port accepts of it.

import { config, defineProcessor, info, plural, texts, textPieces, setText } from "agent-host-guest";
import { BUILTINS } from "./kinds.js";
import { Redactor } from "./redactor.js";

/** The configuration: every key optional, unknown keys refused. */
const CONFIG = config.object({
  emails: config.boolean(false),
  kinds: config.optional(config.list(config.string())),
  extra: config.list(
    config.object({ name: config.string(), pattern: config.string() }, { required: ["name", "pattern"] }),
  ),
  placeholder: config.string("[REDACTED:{kind}]"),
});

/** The JSON Schema `describe` publishes: the Rust processor's. */
const SCHEMA = JSON.stringify({
  type: "object",
  properties: {
    emails: { type: "boolean", default: false },
    kinds: { type: "array", items: { enum: BUILTINS.map((k) => k.name) } },
    extra: {
      type: "array",
      items: {
        type: "object",
        properties: {
          name: { type: "string", pattern: "^[A-Za-z0-9_.-]+$" },
          pattern: { type: "string", minLength: 1 },
        },
        required: ["name", "pattern"],
        additionalProperties: false,
      },
    },
    placeholder: { type: "string", minLength: 1, default: "[REDACTED:{kind}]" },
  },
  additionalProperties: false,
});

/**
 * The log line: how many secrets of each kind were replaced, in how many of
 * the `messages`.
 */
export function summary(redactor, counts, changed, messages) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return `no secrets found in ${messages} ${plural(messages, "message")}`;
  const perKind = counts.flatMap((n, k) => (n > 0 ? [`${redactor.kindName(k)} ${n}`] : []));
  return `redacted ${total} ${plural(total, "secret")} in ${changed} ${plural(changed, "message")}: ${perKind.join(", ")}`;
}

export default defineProcessor({
  name: "redact-secrets",
  version: "0.1.0",
  summary: "Replaces API keys, tokens, private keys and passwords in URLs with typed placeholders",
  config: CONFIG,
  configExample:
    '{"emails": false, "extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{32}"}], "placeholder": "[REDACTED:{kind}]"}',
  configSchema: SCHEMA,

  process(history, settings) {
    const redactor = new Redactor(settings);
    const counts = new Array(redactor.kindCount()).fill(0);
    let changed = 0;
    let signedDropped = 0;
    for (let i = 0; i < history.length; i++) {
      // Texts are redacted from the input first, so a message with no
      // secret is never asked for as changed (that would replace it).
      const redacted = [];
      texts(history.get(i)).forEach((text, k) => {
        const out = redactor.redactCounting(text, counts);
        if (out !== null) redacted.push([k, out]);
      });
      if (redacted.length === 0) continue;
      changed += 1;
      const m = history.change(i);
      // In `texts`, readable reasoning comes right after the pieces.
      const reasoningAt = textPieces(m).length;
      const reasoning = m.reasoning;
      const signedHit =
        reasoning != null &&
        !reasoning.redacted &&
        reasoning.signature != null &&
        redacted.some(([k]) => k === reasoningAt);
      for (const [k, out] of redacted) setText(m, k, out);
      if (signedHit) {
        m.reasoning = null;
        signedDropped += 1;
      }
    }
    info(summary(redactor, counts, changed, history.length));
    if (signedDropped > 0) {
      info(
        `dropped the signed reasoning of ${signedDropped} ${plural(signedDropped, "message")}: ` +
          "it held a secret and a signed block cannot be edited",
      );
    }
  },
});
