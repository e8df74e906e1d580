"""Running a processor natively, for an author's `python3 -m unittest`.

    out = testing.run(MyProcessor, '{"turns": 1}', [message(Role.USER, "hi")])
    assert [m.content for m in out] == ["hi"]
    assert testing.logs() == ["kept 1 of 1 messages"]

`run` does what the host does around a call, short of validating the answer:
parse the configuration (a bad one raises `BadConfig`), call `process`, and
build the output history from the edits.
"""

from __future__ import annotations

from typing import List, Optional, Type

from . import host
from .history import History
from .processor import Processor
from .types import Message, RunContext, Timestamp, Usage


def context(config: str = "{}", budget: int = 100_000) -> RunContext:
    """A run context as the host would give it, with `config` as the
    configuration's text."""
    return RunContext(
        session_key=None,
        agent=None,
        model=None,
        context_window=128_000,
        budget=budget,
        total_tokens=0,
        turn=0,
        usage=Usage(0, 0, None, None),
        now=Timestamp(1_700_000_000, 0),
        config=config,
    )


def run_history(cls: Type[Processor], config: str, messages: List[Message]) -> History:
    """Runs `cls` over `messages` and returns the edited `History` (to ask
    which messages were changed)."""
    host.native_log.clear()
    return cls.run(context(config), messages)


def run(cls: Type[Processor], config: str, messages: List[Message]) -> List[Message]:
    """Runs `cls` over `messages` with `config` (JSON text) and returns the
    output history."""
    return run_history(cls, config, messages).into_messages()


def logs(level: Optional[host.Level] = None) -> List[str]:
    """The lines the last `run` logged (at `level` only, when given)."""
    return [text for lvl, text in host.native_log if level is None or lvl == level]
