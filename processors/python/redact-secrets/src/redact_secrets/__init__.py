"""`redact-secrets`, in Python: replaces API keys, tokens, private keys and
passwords in a history's text with typed placeholders such as
`[REDACTED:openai-key]`.

A port of the standard Rust processor (`processors/redact-secrets`) that gives
the same output on the same input; the Rust crate's doc is the specification
(the kinds, their patterns and the scan rule), and its configuration is the
same:

- `emails` (default false): also redact e-mail addresses.
- `kinds` (default: every built-in kind but `email`): the kinds that run.
- `extra`: more kinds, `[{"name": ..., "pattern": ...}]`; a group named
  `secret` limits what is replaced. The patterns are Python regular
  expressions compiled with `re.ASCII`; the syntax the Rust processor
  accepts and Python's `re` shares (which is most of it) behaves the same.
  Look-around, back-references, atomic groups and possessive repetition are
  refused, as `regex-lite` refuses them.
- `placeholder` (default `"[REDACTED:{kind}]"`).

It scans every message's content, text parts, readable reasoning and
tool-call arguments. A message with no secret is kept untouched; the others
go back as replacements. Signed reasoning that holds a secret is dropped
(a signed block cannot be edited); opaque (`redacted`) reasoning is never
touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from agent_host_guest import History, Processor, export, info, plural, set_texts, text_pieces, texts

from .redactor import Redactor

__all__ = ["Config", "ExtraPattern", "RedactSecrets", "Redactor", "summary"]


@dataclass
class ExtraPattern:
    """A kind of secret the configuration adds."""

    #: The kind's name, for the placeholder and the log.
    name: str
    #: The regular expression; a group named `secret` limits what is replaced.
    pattern: str


@dataclass
class Config:
    """The configuration; every key is optional and unknown keys are refused."""

    #: Also redact e-mail addresses.
    emails: bool = False
    #: The built-in kinds that run; None is all but `email`.
    kinds: Optional[List[str]] = None
    #: More kinds, each a named regular expression.
    extra: List[ExtraPattern] = field(default_factory=list)
    #: What replaces a secret; `{kind}` becomes the kind's name.
    placeholder: str = "[REDACTED:{kind}]"


@export
class RedactSecrets(Processor):
    """The processor."""

    name = "redact-secrets"
    version = "0.1.0"
    summary = "Replaces API keys, tokens, private keys and passwords in URLs with typed placeholders"
    Config = Config
    config_example = (
        '{"emails": false, "extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{32}"}], '
        '"placeholder": "[REDACTED:{kind}]"}'
    )
    config_schema = (
        '{"type":"object","properties":{"emails":{"type":"boolean","default":false},'
        '"kinds":{"type":"array","items":{"enum":["private-key","anthropic-key","openai-key",'
        '"aws-access-key","aws-secret-key","github-token","slack-webhook","slack-token",'
        '"bearer-token","url-password","email"]}},"extra":{"type":"array","items":{"type":"object",'
        '"properties":{"name":{"type":"string","pattern":"^[A-Za-z0-9_.-]+$"},'
        '"pattern":{"type":"string","minLength":1}},"required":["name","pattern"],'
        '"additionalProperties":false}},"placeholder":{"type":"string","minLength":1,'
        '"default":"[REDACTED:{kind}]"}},"additionalProperties":false}'
    )

    def process(self, history: History, config: Config) -> None:
        redactor = Redactor(config)
        counts = [0] * redactor.kind_count()
        changed = 0
        signed_dropped = 0
        all_texts = [texts(m) for m in history.messages]
        candidates = redactor.candidates(all_texts)
        for i in sorted(candidates) if candidates is not None else range(len(history)):
            # Texts are redacted from the input first, so a message with no
            # secret is never asked for mutably (that would replace it).
            originals = all_texts[i]
            redacted = [redactor.redact(t, counts) for t in originals]
            hits = [k for k, new in enumerate(redacted) if new is not None]
            if not hits:
                continue
            changed += 1
            m = history.message_mut(i)
            # In `texts()`, readable reasoning comes right after the pieces.
            reasoning_at = len(text_pieces(m))
            r = m.reasoning
            signed_hit = (
                r is not None and not r.redacted and r.signature is not None and reasoning_at in hits
            )
            set_texts(m, [new if new is not None else old for old, new in zip(originals, redacted)])
            if signed_hit:
                m.reasoning = None
                signed_dropped += 1
        info(summary(redactor, counts, changed, len(history)))
        if signed_dropped:
            info(
                f"dropped the signed reasoning of {signed_dropped} "
                f"{plural(signed_dropped, 'message')}: it held a secret and a signed block cannot be edited"
            )


def summary(redactor: Redactor, counts: List[int], changed: int, messages: int) -> str:
    """The log line: how many secrets of each kind were replaced, in how many
    of the `messages`."""
    total = sum(counts)
    if total == 0:
        return f"no secrets found in {messages} {plural(messages, 'message')}"
    per_kind = ", ".join(
        f"{redactor.kind_name(k)} {n}" for k, n in enumerate(counts) if n > 0
    )
    return (
        f"redacted {total} {plural(total, 'secret')} in {changed} "
        f"{plural(changed, 'message')}: {per_kind}"
    )


# Compile the default configuration's patterns now, at build time: `re` keeps
# them in its cache, which the component's snapshot holds, so a call with the
# default configuration compiles nothing.
Redactor(Config())
