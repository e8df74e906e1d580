"""What the host offers a processor: a log and its token estimates.

Inside the component these call the host (the `host` interface of the WIT
contract). Natively (an author's tests) log lines are collected for
`agent_host_guest.testing` and echoed to standard error, and the estimates
are a simple heuristic: a token per four characters, rounded up, plus four
per message (the host's own estimator is close to it but not identical, so
tests should not depend on exact counts).
"""

from __future__ import annotations

import sys
from typing import List, Tuple

from .types import IN_COMPONENT, Message, texts

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


def estimate_tokens(text: str) -> int:
    """The host's estimate of how many tokens `text` costs."""
    if _host is not None:
        return _host.estimate_tokens(text)
    return (len(text) + 3) // 4


def estimate_message_tokens(message: Message) -> int:
    """The host's estimate of a whole message (text, parts, reasoning, tool
    calls and the per-message overhead). Input messages already carry it in
    `message.tokens`; this is for the ones you build."""
    if _host is not None:
        return _host.estimate_message_tokens(message)
    pieces = texts(message) + [call.name for call in message.tool_calls]
    return 4 + sum(estimate_tokens(piece) for piece in pieces)
