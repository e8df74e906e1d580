"""pydantic-ai: agent-host processors and the pipeline as a history
processor (``pip install agent-host[pydantic-ai]``).

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    import agent_host.pydantic_ai

    keep = agent_host.pydantic_ai.processors(
        agent_host.Processor("keep-last-turns.wasm", {"turns": 2}))
    agent = Agent(model, capabilities=[ProcessHistory(keep)])

Messages go over as pydantic-ai's own JSON (``ModelMessagesTypeAdapter``),
which agent-host reads and writes as the ``pydantic-ai`` format: tool calls
keep their ids and stay paired with their returns, thinking parts keep their
signatures (while their text is unchanged), and what agent-host's model has
no place for is kept verbatim and written back.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Union

from pydantic_ai import ModelMessagesTypeAdapter
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


def capability(
    *chain: Union[Processor, str],
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> ProcessHistory:
    """:func:`processors` as a pydantic-ai capability, for
    ``Agent(..., capabilities=[...])``."""
    return ProcessHistory(processors(*chain, context_limit=context_limit, pipeline=pipeline))


__all__ = ["capability", "from_history", "processors", "run", "to_history"]
