"""Running a processor natively, for an author's `python3 -m unittest`.

    out = testing.run(MyProcessor, '{"turns": 1}', [message(Role.USER, "hi")])
    assert [m.content for m in out] == ["hi"]
    assert testing.logs() == ["kept 1 of 1 messages"]

`run` does what the host does around a call, short of validating the answer:
parse the configuration (a bad one raises `BadConfig`), call `process`, and
build the output history from the edits.

`serve_summaries` sets what the host service `summarize` answers natively:

    testing.serve_summaries(lambda prompt, text: f"{len(text)} characters")
    assert summarize("p", "abc").text == "3 characters"
    testing.stop_serving_summaries()
"""

from __future__ import annotations

from typing import Callable, List, Optional, Type

from . import host, services
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


def serve_summaries(summaries: Callable[[str, str], str]) -> None:
    """Has `summarize` answer natively with `summaries(prompt, text)`: the
    summary's text, or a `ServiceError` it raises (`ServiceDenied("...")`
    stands for a processor the user did not grant `summarize`). The tokens
    the summary reports are the host's default estimates of the prompt and
    text (read) and of the answer (written)."""
    services.native_summaries = summaries


def stop_serving_summaries() -> None:
    """Stops what `serve_summaries` set: `summarize` raises `ServiceFailed`
    again."""
    services.native_summaries = None
