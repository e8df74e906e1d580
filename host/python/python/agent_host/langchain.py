"""LangChain: agent-host processors and the pipeline as a message-list
transform, in the manner of ``trim_messages`` (``pip install
agent-host[langchain]``).

    from agent_host import Processor
    from agent_host.langchain import transform

    keep = transform([Processor("keep-last-turns.wasm", {"turns": 2})])
    chain = keep | model                  # a Runnable, like trim_messages(...)
    trimmed = keep.invoke(messages)       # or on a list of messages directly

Messages go over as LangChain's own dicts (``messages_to_dict``), which
agent-host's LangChain reader takes, and come back through OpenAI messages
(``convert_to_messages``): tool calls keep their ids, so every
``ToolMessage`` still follows the ``AIMessage`` that called it.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

from langchain_core.messages import BaseMessage, convert_to_messages, messages_to_dict
from langchain_core.runnables import RunnableLambda

import agent_host
from agent_host import History, Processor, RunResult


def from_langchain(messages: Sequence[BaseMessage]) -> History:
    """A :class:`agent_host.History` of LangChain messages."""
    return agent_host.from_messages(messages_to_dict(list(messages)), format="langchain")


def to_langchain(history: History) -> List[BaseMessage]:
    """LangChain messages of a :class:`agent_host.History`."""
    return list(convert_to_messages(history.to_messages("openai")))


def run(
    messages: Sequence[BaseMessage],
    processors: Iterable[Processor] = (),
    *,
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> RunResult:
    """Runs ``processors`` (after core's pipeline within ``context_limit``
    when ``pipeline`` is true) over LangChain messages; the result's history
    converts back with :func:`to_langchain`."""
    return agent_host.run(
        from_langchain(messages),
        list(processors),
        context_limit=context_limit,
        pipeline=pipeline,
    )


def transform(
    processors: Iterable[Processor] = (),
    *,
    context_limit: Optional[int] = None,
    pipeline: bool = False,
) -> "RunnableLambda[Sequence[BaseMessage], List[BaseMessage]]":
    """A Runnable that maps a list of LangChain messages to what ``processors``
    (and, with ``pipeline=True``, core's pipeline within ``context_limit``)
    make of it. A processor failing under its ``fail`` policy raises
    :class:`agent_host.ProcessorFailedError`."""
    chain = list(processors)

    def apply(messages: Sequence[BaseMessage]) -> List[BaseMessage]:
        result = run(messages, chain, context_limit=context_limit, pipeline=pipeline)
        return to_langchain(result.history)

    return RunnableLambda(apply, name="agent_host")


__all__ = ["from_langchain", "run", "to_langchain", "transform"]
