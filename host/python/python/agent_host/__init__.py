"""agent-host in process: read any agent's history, make it fit a context
window, run sandboxed WebAssembly history processors over it, and keep
sessions in a store, with no CLI and no Rust toolchain.

    import agent_host

    history = agent_host.load("session.jsonl")           # any supported format
    result = agent_host.run(history, context_limit=8000,
                            processors=[agent_host.Processor("filter.wasm",
                                                             config={"roles": ["user", "assistant"]})])
    result.history.to_messages("openai")                 # list of dicts
    result.report["pipeline"]["usage"]

    store = agent_host.Store(".agent-host")              # or "sqlite:sessions.db"
    session = store.session("telegram:123")              # get-or-create
    session.append([{"role": "user", "content": "hi"}])
    session.query(contains="hi", since="30m")

Every call that reads, compiles, runs or stores releases the GIL;
:mod:`agent_host.aio` offers the same calls as coroutines. Errors are the
classes of :mod:`agent_host.errors`, one per kind.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, List, Optional, Tuple, Union

from . import errors
from ._native import History, Memory, Processor, RunResult, Session, Store
from ._native import __version__ as __version__
from ._native import formats as _formats
from ._native import register_errors as _register_errors
from ._native import run as _run
from .errors import (
    AgentHostError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    InternalError,
    InvalidInputError,
    LimitExceededError,
    NotFoundError,
    ProcessorFailedError,
    ProviderFailedError,
    StorageError,
    UnauthorizedError,
)

_register_errors(dict(errors.BY_KIND))

HistoryLike = Union[History, str, List[Any], dict]
"""What a call reading messages accepts: a :class:`History`, the text of a
history in any supported format, or its Python objects (message dicts)."""


def load(path: Union[str, "os.PathLike[str]"], format: Optional[str] = None) -> History:
    """Reads the history in the file at ``path`` (its format detected unless
    ``format`` names one: ``jsonl``, ``openai``, ``anthropic``, ``responses``,
    ``claude-code``, ``codex``, ``gemini-cli``, ``pydantic-ai``, ``langchain``).

    Raises :class:`NotFoundError` when there is no such file,
    :class:`InvalidInputError` when it is no history agent-host can read,
    :class:`LimitExceededError` when it is over a limit (256 MiB, 500,000
    messages).
    """
    return History.from_path(os.fspath(path), format)


def loads(text: str, format: Optional[str] = None) -> History:
    """Reads a history from ``text`` (JSON or JSONL of any supported format)."""
    return History.from_string(text, format)


def from_messages(messages: Any, format: Optional[str] = None) -> History:
    """Reads a history from Python objects: a list of message dicts (OpenAI,
    Anthropic, Responses, pydantic-ai, LangChain, native records) or a whole
    document such as an Anthropic request dict."""
    return History.from_messages(messages, format)


def run(
    history: HistoryLike,
    processors: Iterable[Processor] = (),
    *,
    context_limit: Optional[int] = None,
    response_reserve: Optional[int] = None,
    min_recent_messages: Optional[int] = None,
    compact: bool = True,
    pipeline: bool = True,
) -> RunResult:
    """Runs core's pipeline over ``history`` within a budget of
    ``context_limit`` tokens (default 128,000), then each of ``processors``
    in order; see :class:`RunResult` for what comes back.

    ``compact=False`` only repairs tool-call pairing and packs the budget (no
    pruning, summary or truncation); ``pipeline=False`` runs the processors
    alone on the history as given. A processor failing under its ``fail``
    policy raises :class:`ProcessorFailedError` (whose ``report`` says what
    ran).
    """
    return _run(
        history,
        list(processors),
        context_limit=context_limit,
        response_reserve=response_reserve,
        min_recent_messages=min_recent_messages,
        compact=compact,
        pipeline=pipeline,
    )


def formats() -> List[Tuple[str, bool]]:
    """Every supported format's name, with whether it can be written."""
    return _formats()


__all__ = [
    "AgentHostError",
    "ConfigurationError",
    "ConflictError",
    "ForbiddenError",
    "History",
    "HistoryLike",
    "InternalError",
    "InvalidInputError",
    "LimitExceededError",
    "Memory",
    "NotFoundError",
    "Processor",
    "ProcessorFailedError",
    "ProviderFailedError",
    "RunResult",
    "Session",
    "StorageError",
    "Store",
    "UnauthorizedError",
    "errors",
    "formats",
    "from_messages",
    "load",
    "loads",
    "run",
]
