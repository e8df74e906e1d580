"""`summarize-history`, in Python: replaces the older part of a history with
a summary written by the session's model, through the host service
`summarize`.

A port of the standard Rust processor (`processors/summarize-history`),
which is the specification: it gives the same output on the same history
with the same model, and asks the model the same thing. Everything before
the last `keep_turns` turns (system messages aside) is sent to the model and
replaced by a checkpoint pair flagged synthetic and summary: a user message
saying what was summarized, and the assistant's summary. The cut moves back
rather than separate a tool call from its results. When the service is
denied, over budget or fails, the history is left as it is and the reason
is logged.

Configuration (defaults): `keep_turns` (4, at least 1), `min_messages` (6),
`trigger_tokens` (0, off), `max_words` (400), `max_tokens` (0: the host's
cap), `timeout_ms` (0: the host's cap), `instructions` (the prompt, with
`{max_words}` replaced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from agent_host_guest import (
    BadConfig,
    History,
    Message,
    MessageFlags,
    Processor,
    Role,
    ServiceError,
    SummaryCaps,
    TextPart,
    debug,
    export,
    info,
    message,
    summarize,
    warn,
)

__all__ = ["Config", "SummarizeHistory", "material"]

#: The built-in prompt (the Rust processor's, word for word).
INSTRUCTIONS = (
    "You summarize the earlier part of a conversation between a user and an AI agent so that "
    "the agent can continue without it. Write Markdown with these headings: Files Modified, Key "
    "Decisions, Important Values (paths, URLs, identifiers, commands, numbers, copied verbatim "
    "in backticks), Current State, Pending Tasks. Facts only from the conversation; carry "
    "forward the facts of a previous summary unless the conversation changed them. Write only "
    "the summary, under {max_words} words."
)

#: What Rust's `str::trim` takes off (Unicode's White_Space): `str.strip()`
#: would also take U+001C to U+001F, and the summary must be the Rust one's.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

#: The configuration's numbers, none of which may be negative.
NUMBERS = ("keep_turns", "min_messages", "trigger_tokens", "max_words", "max_tokens", "timeout_ms")

#: Characters (code points) of one message quoted to the model; the middle
#: of a longer one is elided.
QUOTE_CHARS = 4_000


@dataclass
class Config:
    """The configuration; every key is optional and unknown keys are refused."""

    #: The newest turns kept as they are (at least 1).
    keep_turns: int = 4
    #: The fewest messages worth a summary.
    min_messages: int = 6
    #: Summarize only a history of at least this many tokens (0: always).
    trigger_tokens: int = 0
    #: The summary's length in words, told to the model.
    max_words: int = 400
    #: The most tokens the summary may take (0: the host's cap).
    max_tokens: int = 0
    #: The most time the call may take, in milliseconds (0: the host's cap).
    timeout_ms: int = 0
    #: The prompt, replacing the built-in one.
    instructions: Optional[str] = None


@export
class SummarizeHistory(Processor):
    """The processor."""

    name = "summarize-history"
    version = "0.1.0"
    summary = (
        "Replaces the older part of a history with a summary written by the session's model"
    )
    Config = Config
    config_example = '{"keep_turns": 4, "min_messages": 6, "max_words": 400}'

    def process(self, history: History, config: Config) -> None:
        # (`parse_config` refused anything but a JSON object already.)
        for key in NUMBERS:
            if getattr(config, key) < 0:
                raise BadConfig(f"`{key}` must not be negative")
        if config.keep_turns == 0:
            raise BadConfig(
                "`keep_turns` must be at least 1 (0 would summarize the question being asked)"
            )
        if config.max_words == 0:
            raise BadConfig("`max_words` must be at least 1")
        total = history.context.total_tokens
        if total < config.trigger_tokens:
            debug(f"{total} tokens, under the trigger of {config.trigger_tokens}; nothing summarized")
            return
        cut = cut_at(history, config.keep_turns)
        if cut is None:
            return
        span = [i for i in range(cut) if history.header(i).role != Role.SYSTEM]
        if len(span) < max(config.min_messages, 1):
            debug(f"{len(span)} older messages, fewer than {config.min_messages}; nothing summarized")
            return
        prompt = (config.instructions if config.instructions is not None else INSTRUCTIONS).replace(
            "{max_words}", str(config.max_words)
        )
        caps = SummaryCaps(max_tokens=config.max_tokens, timeout_ms=config.timeout_ms)
        try:
            summary = summarize(prompt, material(history, span), caps)
        except ServiceError as e:
            warn(f"no summary ({e}); the history is kept")
            return
        if not summary.text.strip(WHITE_SPACE):
            warn("the model wrote an empty summary; the history is kept")
            return
        for i in span:
            history.drop(i)
        flags = MessageFlags.SYNTHETIC | MessageFlags.SUMMARY
        boundary = message(
            Role.USER,
            f"[The {len(span)} earlier messages of this conversation were summarized.]",
            flags=flags,
        )
        answer = message(
            Role.ASSISTANT,
            summary.text.strip(WHITE_SPACE),
            flags=flags,
            metadata=(
                f'{{"summary_of":{len(span)},"input_tokens":{summary.input_tokens},'
                f'"output_tokens":{summary.output_tokens}}}'
            ),
        )
        history.insert_before(span[0], boundary)
        history.insert_before(span[0], answer)
        info(
            f"summarized {len(span)} messages ({summary.input_tokens} model tokens read, "
            f"{summary.output_tokens} written)"
        )


def cut_at(history: History, turns: int) -> Optional[int]:
    """Where the kept turns start: the start of the last `turns` turns, moved
    back so that no kept tool result answers a call before it. None when
    there are no more than `turns` turns."""
    starts = history.turn_starts()
    if len(starts) <= turns:
        return None
    cut = starts[len(starts) - turns]
    callers = history.tool_callers()
    checked = len(history)
    while cut < checked:
        earliest = min((c for c in callers[cut:checked] if c is not None), default=None)
        checked = cut
        if earliest is not None and earliest < cut:
            cut = earliest
    return cut


def material(history: History, span: List[int]) -> str:
    """The messages at `span` as plain text for the model."""
    out = ["<conversation>\n"]
    for i in span:
        m = history[i]
        if m.flags & MessageFlags.SUMMARY:
            who = "previous summary"
        else:
            who = {
                Role.SYSTEM: "system",
                Role.USER: "user",
                Role.ASSISTANT: "assistant",
                Role.TOOL: "tool result",
            }[m.role]
        out.append(f"[{who}")
        if m.tool_name is not None:
            out.append(f" {m.tool_name}")
        out.append("]\n")
        text = text_of(m)
        if text:
            out.append(quote(text) + "\n")
        for call in m.tool_calls:
            out.append(f"-> calls {call.name}({quote(call.arguments)})\n")
        out.append("\n")
    out.append("</conversation>\n")
    return "".join(out)


def text_of(m: Message) -> str:
    """A message's text: its content and its text parts."""
    text = m.content
    for part in m.parts:
        if isinstance(part, TextPart):
            if text:
                text += "\n"
            text += part.value
    return text


def quote(text: str) -> str:
    """`text`, its middle elided past `QUOTE_CHARS` code points."""
    count = len(text)
    if count <= QUOTE_CHARS:
        return text
    half = QUOTE_CHARS // 2
    return f"{text[:half]}\n[... {count - QUOTE_CHARS} characters elided ...]\n{text[count - half:]}"
