"""What the host offers a processor: a log and its token estimates.

Inside the component these call the host (the `host` interface of the WIT
contract). Natively (an author's tests) log lines are collected for
`agent_host_guest.testing` and echoed to standard error, and the estimates
are those of the host's default estimator, computed here (the shared
conformance cases in guest-sdk/conformance check that they agree).
"""

from __future__ import annotations

import sys
from typing import List, Tuple

from .types import IN_COMPONENT, Message, Part_Image, Part_Text

if IN_COMPONENT:
    from wit_world.imports import host as _host  # type: ignore[import-not-found]

    Level = _host.Level
else:
    from ._native import Level  # type: ignore[assignment]

    _host = None


#: Log lines written natively, as (level, text); `testing` reads and clears it.
native_log: List[Tuple[Level, str]] = []
#: Whether native log lines are echoed to standard error.
echo = True


def log(level: Level, text: str) -> None:
    """Writes a line to the host's log; it appears in the run report under
    this processor. The host caps the number of lines per call."""
    if _host is not None:
        _host.log(level, text)
        return
    native_log.append((level, text))
    if echo:
        print(f"[{level.name.lower()}] {text}", file=sys.stderr)


def trace(text: str) -> None:
    """Logs at `trace` level."""
    log(Level.TRACE, text)


def debug(text: str) -> None:
    """Logs at `debug` level."""
    log(Level.DEBUG, text)


def info(text: str) -> None:
    """Logs at `info` level: `info(f"replaced {n} keys")`."""
    log(Level.INFO, text)


def warn(text: str) -> None:
    """Logs at `warn` level."""
    log(Level.WARN, text)


def error(text: str) -> None:
    """Logs at `error` level."""
    log(Level.ERROR, text)


# The host's default estimator (agent_host_core::tokens::HeuristicCounter):
# Latin text at 4 characters a token and CJK at 3, counted run by run and
# each run rounded up; the guest-sdk/conformance cases hold the SDKs to it.
LATIN_CHARS_PER_TOKEN = 4
CJK_CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 4
IMAGE_TOKENS = 1000
TOOL_CALL_OVERHEAD = 3


def _is_cjk(c: int) -> bool:
    """Whether code point `c` is CJK to the host's estimator."""
    return (
        0x1100 <= c <= 0x11FF
        or 0x2E80 <= c <= 0x2FDF
        or 0x3000 <= c <= 0x4DBF
        or 0x4E00 <= c <= 0x9FFF
        or 0xA960 <= c <= 0xA97F
        or 0xAC00 <= c <= 0xD7FF
        or 0xF900 <= c <= 0xFAFF
        or 0xFE30 <= c <= 0xFE4F
        or 0xFF00 <= c <= 0xFFEF
        or 0x20000 <= c <= 0x3FFFF
    )


def _native_estimate(text: str) -> int:
    if text.isascii():
        return -(-len(text) // LATIN_CHARS_PER_TOKEN)
    total = latin = cjk = 0
    for ch in text:
        if _is_cjk(ord(ch)):
            if latin:
                total += -(-latin // LATIN_CHARS_PER_TOKEN)
                latin = 0
            cjk += 1
        else:
            if cjk:
                total += -(-cjk // CJK_CHARS_PER_TOKEN)
                cjk = 0
            latin += 1
    return total + -(-latin // LATIN_CHARS_PER_TOKEN) + -(-cjk // CJK_CHARS_PER_TOKEN)


def estimate_tokens(text: str) -> int:
    """The host's estimate of how many tokens `text` costs."""
    if _host is not None:
        return _host.estimate_tokens(text)
    return _native_estimate(text)


def estimate_message_tokens(message: Message) -> int:
    """The host's estimate of a whole message (text, parts, reasoning, tool
    calls and the per-message overhead). Input messages already carry it in
    `message.tokens`; this is for the ones you build."""
    if _host is not None:
        return _host.estimate_message_tokens(message)
    n = MESSAGE_OVERHEAD + _native_estimate(message.content)
    for part in message.parts:
        if isinstance(part, Part_Text):
            n += _native_estimate(part.value)
        elif isinstance(part, Part_Image):
            n += IMAGE_TOKENS
        else:
            n += _native_estimate(part.value.name) + _native_estimate(part.value.path)
    if message.reasoning is not None:
        n += _native_estimate(message.reasoning.text)
    for call in message.tool_calls:
        n += TOOL_CALL_OVERHEAD + _native_estimate(call.name) + _native_estimate(call.arguments)
    if message.tool_name is not None:
        n += _native_estimate(message.tool_name)
    return n
