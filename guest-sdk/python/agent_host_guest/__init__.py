"""The Python SDK for agent-host history processors.

A history processor is a WebAssembly component that receives a session's
history and answers with edits: keep this message, drop that one, replace a
third, insert a new one. This package hides the component-model bindings: an
author subclasses `Processor`, edits a `History` in `process`, marks the class
with `@export`, and builds it with componentize-py (`build.sh` in a project
made by `agent-host processor new NAME --lang python`).

What it deliberately leaves out: the host side, reordering kept messages, and
any WASI: components are built with `--stub-wasi`, so `open`, `time.time()`
or `random` trap inside the sandbox.

A complete processor, which drops error results and everything older than the
last `turns` turns without splitting a tool call from its results:

    from dataclasses import dataclass
    from agent_host_guest import MessageFlags, Processor, export, info

    @dataclass
    class Config:
        turns: int = 4

    @export
    class Tidy(Processor):
        name = "tidy"
        version = "0.1.0"
        summary = "Keeps the last turns and drops failed tool results"
        Config = Config
        config_example = '{"turns": 2}'

        def process(self, history, config):
            history.keep_last_turns(config.turns)
            history.retain(lambda m: not m.flags & MessageFlags.ERROR)
            history.settle_tool_exchanges()
            info(f"kept {history.kept()} of {len(history)} messages")

The same code runs natively under `python3 -m unittest`, with
`agent_host_guest.testing.run(Tidy, '{"turns": 1}', messages)`.

The host's services (contract 0.2.0), each behind a grant the user gives the
processor: `summarize` (a summary by the session's model), `count_tokens`
(the session's tokenizer) and `read_memory` (the session's long-term
memory). A refused or failed call raises a `ServiceError`, which the
processor catches; natively, `testing.serve_summaries` sets what
`summarize` answers.
"""

from .config import NoConfig, parse_config
from .errors import BadConfig, Failed, ProcessorError
from .history import History
from .host import (
    Level,
    debug,
    error,
    estimate_message_tokens,
    estimate_tokens,
    info,
    log,
    trace,
    warn,
)
from .processor import Processor, export
from .services import (
    Fact,
    ServiceDenied,
    ServiceError,
    ServiceFailed,
    ServiceOverBudget,
    Summary,
    SummaryCaps,
    count_tokens,
    read_memory,
    summarize,
)
from .types import *  # noqa: F401,F403  (the contract's types and message helpers)
from .types import __all__ as _types_all

__version__ = "0.1.0"

__all__ = [
    "BadConfig",
    "Fact",
    "Failed",
    "History",
    "Level",
    "NoConfig",
    "Processor",
    "ProcessorError",
    "ServiceDenied",
    "ServiceError",
    "ServiceFailed",
    "ServiceOverBudget",
    "Summary",
    "SummaryCaps",
    "count_tokens",
    "debug",
    "error",
    "estimate_message_tokens",
    "estimate_tokens",
    "export",
    "info",
    "log",
    "parse_config",
    "read_memory",
    "summarize",
    "trace",
    "warn",
] + list(_types_all)
