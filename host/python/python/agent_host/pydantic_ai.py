"""pydantic-ai: agent-host processors and the pipeline as a history
processor (``pip install agent-host[pydantic-ai]``).

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    import agent_host.pydantic_ai

    keep = agent_host.pydantic_ai.processors(
        agent_host.Processor("keep-last-turns.wasm", {"turns": 2}))
    agent = Agent(model, capabilities=[ProcessHistory(keep)])

    # Or chosen per run from the RunContext (its deps, its usage, ...):
    per_user = agent_host.pydantic_ai.processors_with_context(
        lambda ctx: [ctx.deps.processor], context_limit=lambda ctx: ctx.deps.window)
    agent = Agent(model, deps_type=Deps, capabilities=[ProcessHistory(per_user)])

Messages go over as pydantic-ai's own JSON (``ModelMessagesTypeAdapter``),
which agent-host reads and writes as the ``pydantic-ai`` format: tool calls
keep their ids and stay paired with their returns, thinking parts keep their
signatures (while their text is unchanged), and what agent-host's model has
no place for is kept verbatim and written back.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from pydantic_ai import ModelMessagesTypeAdapter, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage

import agent_host
from agent_host import History, Processor, RunResult


def to_history(messages: List[ModelMessage]) -> History:
    """A :class:`agent_host.History` of pydantic-ai messages."""
    return agent_host.from_messages(
        ModelMessagesTypeAdapter.dump_python(messages, mode="json"), format="pydantic-ai"
    )


def from_history(history: History) -> List[ModelMessage]:
    """pydantic-ai messages of a :class:`agent_host.History`."""
    return ModelMessagesTypeAdapter.validate_python(history.to_messages("pydantic-ai"))


def run(
    messages: List[ModelMessage],
    processors: Iterable[Processor] = (),
    *,
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> RunResult:
    """Runs ``processors`` (after core's pipeline within ``context_limit``
    when ``pipeline`` is true) over pydantic-ai messages."""
    return agent_host.run(
        to_history(messages), list(processors), context_limit=context_limit, pipeline=pipeline
    )


def processors(
    *chain: Union[Processor, str],
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> Callable[[List[ModelMessage]], List[ModelMessage]]:
    """A pydantic-ai history processor (for ``ProcessHistory``) that runs
    ``chain`` (processors, or paths of components loaded with their
    defaults) and, with ``pipeline=True``, core's pipeline within
    ``context_limit`` first. pydantic-ai calls it in a worker thread; the
    sandbox runs with the GIL released. A processor failing under its
    ``fail`` policy raises :class:`agent_host.ProcessorFailedError`, which
    stops the agent's run."""
    loaded = [p if isinstance(p, Processor) else Processor(p) for p in chain]

    def process(messages: List[ModelMessage]) -> List[ModelMessage]:
        if not messages:
            return messages
        result = run(messages, loaded, context_limit=context_limit, pipeline=pipeline)
        return from_history(result.history)

    return process


ContextChoice = Callable[[RunContext[Any]], Iterable[Union[Processor, str]]]
"""What :func:`processors_with_context` takes: the run's context to the
processors (or paths of components) to run."""


def processors_with_context(
    choose: ContextChoice,
    *,
    context_limit: Union[None, int, Callable[[RunContext[Any]], Optional[int]]] = None,
    pipeline: bool = False,
) -> Callable[[RunContext[Any], List[ModelMessage]], List[ModelMessage]]:
    """A pydantic-ai history processor that takes the run's ``RunContext``:
    before each model request, ``choose(ctx)`` names the processors to run
    (``Processor`` objects, or paths, each loaded once with its defaults and
    kept) and ``context_limit`` is a number or ``context_limit(ctx)``. So
    the chain and the budget can follow ``ctx.deps`` (a user's settings),
    ``ctx.usage`` or ``ctx.model``. Otherwise as :func:`processors`."""
    loaded: Dict[str, Processor] = {}
    lock = threading.Lock()

    def load(p: Union[Processor, str]) -> Processor:
        if isinstance(p, Processor):
            return p
        with lock:
            if p not in loaded:
                loaded[p] = Processor(p)
            return loaded[p]

    def process(ctx: RunContext[Any], messages: List[ModelMessage]) -> List[ModelMessage]:
        if not messages:
            return messages
        chain = [load(p) for p in choose(ctx)]
        limit = context_limit(ctx) if callable(context_limit) else context_limit
        result = run(messages, chain, context_limit=limit, pipeline=pipeline)
        return from_history(result.history)

    return process


def capability(
    *chain: Union[Processor, str],
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> ProcessHistory:
    """:func:`processors` as a pydantic-ai capability, for
    ``Agent(..., capabilities=[...])``."""
    return ProcessHistory(processors(*chain, context_limit=context_limit, pipeline=pipeline))


def capability_with_context(
    choose: ContextChoice,
    *,
    context_limit: Union[None, int, Callable[[RunContext[Any]], Optional[int]]] = None,
    pipeline: bool = False,
) -> ProcessHistory:
    """:func:`processors_with_context` as a pydantic-ai capability."""
    return ProcessHistory(processors_with_context(choose, context_limit=context_limit, pipeline=pipeline))


__all__ = [
    "ContextChoice",
    "capability",
    "capability_with_context",
    "from_history",
    "processors",
    "processors_with_context",
    "run",
    "to_history",
]
