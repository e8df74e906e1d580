"""LangChain agents: agent-host processors and the pipeline as agent
middleware for ``langchain.agents.create_agent`` (``pip install
'agent-host[langchain-agents]'``; the message-list transform of
:mod:`agent_host.langchain` needs langchain-core alone).

    from langchain.agents import create_agent
    from agent_host import Processor
    from agent_host.langchain_middleware import ProcessorMiddleware

    keep = ProcessorMiddleware([Processor("keep-last-turns.wasm", {"turns": 2})])
    agent = create_agent(model, tools, middleware=[keep])

Two kinds, as LangChain's own middleware come:

- :class:`ProcessorMiddleware` (``wrap_model_call``) changes what each model
  call is sent; the agent's state keeps every message, as agent-host's
  session log does;
- :class:`ProcessorStateMiddleware` (``before_model``) writes what the
  processors made back into the state (every message replaced), so later
  steps and the checkpointer see the processed history, as
  ``SummarizationMiddleware`` does.

The system prompt stays outside: LangChain keeps it apart from the
messages. Messages cross as in :mod:`agent_host.langchain` (tool calls keep
their ids). A processor failing under its ``fail`` policy raises
:class:`agent_host.ProcessorFailedError`, which stops the agent.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from agent_host import Processor
from agent_host.langchain import from_langchain, run, to_langchain


class _Processing:
    """The chain and the budget both middlewares run."""

    def __init__(
        self,
        processors: Iterable[Processor],
        context_limit: Optional[int],
        pipeline: bool,
    ) -> None:
        self.processors = list(processors)
        self.context_limit = context_limit
        self.pipeline = pipeline

    def apply(self, messages: Sequence[BaseMessage]) -> Optional[List[BaseMessage]]:
        """What the chain makes of ``messages``; ``None`` when it left them
        as they were."""
        if not messages:
            return None
        before = from_langchain(messages)
        result = run(messages, self.processors, context_limit=self.context_limit, pipeline=self.pipeline)
        if result.history.to_messages("openai") == before.to_messages("openai"):
            return None
        return to_langchain(result.history)


class ProcessorMiddleware(AgentMiddleware):
    """Runs ``processors`` (after core's pipeline within ``context_limit``
    when ``pipeline`` is true) over the messages of every model call; the
    agent's state is left whole."""

    def __init__(
        self,
        processors: Iterable[Processor] = (),
        *,
        context_limit: Optional[int] = None,
        pipeline: bool = False,
    ) -> None:
        super().__init__()
        self._processing = _Processing(processors, context_limit, pipeline)

    @property
    def name(self) -> str:
        return "agent_host"

    def _request(self, request: ModelRequest) -> ModelRequest:
        processed = self._processing.apply(request.messages)
        return request if processed is None else request.override(messages=processed)

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        return handler(self._request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await handler(await asyncio.to_thread(self._request, request))


class ProcessorStateMiddleware(AgentMiddleware):
    """Runs ``processors`` (after core's pipeline within ``context_limit``
    when ``pipeline`` is true) before every model call and puts what they
    made in the agent's state in place of its messages."""

    def __init__(
        self,
        processors: Iterable[Processor] = (),
        *,
        context_limit: Optional[int] = None,
        pipeline: bool = False,
    ) -> None:
        super().__init__()
        self._processing = _Processing(processors, context_limit, pipeline)

    @property
    def name(self) -> str:
        return "agent_host_state"

    def _update(self, state: AgentState) -> Optional[Dict[str, Any]]:
        processed = self._processing.apply(state["messages"])
        if processed is None:
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *processed]}

    def before_model(self, state: AgentState, runtime: Runtime[Any]) -> Optional[Dict[str, Any]]:
        return self._update(state)

    async def abefore_model(self, state: AgentState, runtime: Runtime[Any]) -> Optional[Dict[str, Any]]:
        return await asyncio.to_thread(self._update, state)


__all__ = ["ProcessorMiddleware", "ProcessorStateMiddleware"]
