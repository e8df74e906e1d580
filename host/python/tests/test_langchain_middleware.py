"""agent-host processors as LangChain agent middleware, in a real
``create_agent`` graph driven by a fake chat model (no network)."""

from __future__ import annotations

from typing import List

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_model_call
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import agent_host
from agent_host.langchain_middleware import ProcessorMiddleware, ProcessorStateMiddleware


def earlier() -> List[BaseMessage]:
    """Two finished turns, the first with a tool call and its result."""
    return [
        HumanMessage("What is the weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}]),
        ToolMessage("18 C, clear", tool_call_id="call_1"),
        AIMessage("It is 18 C and clear in Paris."),
        HumanMessage("Thanks!"),
        AIMessage("You are welcome."),
    ]


def agent_with(middleware, answers=1, asynchronous=False):
    """An agent whose model answers "Noted." and records what it was sent."""
    sent: List[List[BaseMessage]] = []

    if asynchronous:

        @wrap_model_call
        async def record(request, handler):
            sent.append(list(request.messages))
            return await handler(request)

    else:

        @wrap_model_call
        def record(request, handler):
            sent.append(list(request.messages))
            return handler(request)

    model = FakeMessagesListChatModel(responses=[AIMessage("Noted.")] * answers)
    # The first middleware wraps the ones after it: `record` sees what
    # agent-host made.
    agent = create_agent(model, tools=[], system_prompt="Be brief.", middleware=[middleware, record])
    return agent, sent


def test_the_model_is_sent_what_the_processor_made_and_the_state_keeps_all(processor):
    keep = ProcessorMiddleware([agent_host.Processor(processor("keep-last-turns"), {"turns": 1})])
    agent, sent = agent_with(keep)
    state = agent.invoke({"messages": earlier() + [HumanMessage("And tomorrow?")]})
    [request] = sent
    assert [type(m).__name__ for m in request] == ["HumanMessage"]
    assert request[0].content == "And tomorrow?"
    assert len(state["messages"]) == len(earlier()) + 2
    assert state["messages"][-1].content == "Noted."


def test_the_state_middleware_replaces_the_state_keeping_tool_pairs(processor):
    keep = ProcessorStateMiddleware([agent_host.Processor(processor("keep-last-turns"), {"turns": 2})])
    agent, sent = agent_with(keep)
    state = agent.invoke({"messages": earlier() + [HumanMessage("And tomorrow?")]})
    names = [type(m).__name__ for m in state["messages"]]
    assert names == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert [m.content for m in sent[0]] == ["Thanks!", "You are welcome.", "And tomorrow?"]
    # Two turns back from the end reach the tool call: its result stays with it.
    keep3 = ProcessorStateMiddleware([agent_host.Processor(processor("keep-last-turns"), {"turns": 3})])
    agent, sent = agent_with(keep3)
    state = agent.invoke({"messages": earlier() + [HumanMessage("And tomorrow?")]})
    calls = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [c.tool_calls[0]["id"] for c in calls] == [r.tool_call_id for r in results] == ["call_1"]


def test_nothing_changes_when_the_processor_keeps_everything(processor):
    keep = ProcessorStateMiddleware([agent_host.Processor(processor("keep-last-turns"), {"turns": 50})])
    agent, sent = agent_with(keep)
    first = earlier() + [HumanMessage("And tomorrow?")]
    for i, m in enumerate(first):
        m.id = f"m{i}"
    state = agent.invoke({"messages": first})
    # The state's messages are the ones given (their ids kept), then the answer.
    assert [m.id for m in state["messages"][:-1]] == [f"m{i}" for i in range(len(first))]
    assert len(sent[0]) == len(first)


@pytest.mark.parametrize("kind", [ProcessorMiddleware, ProcessorStateMiddleware])
def test_the_async_agent_runs_it_too(processor, kind):
    import asyncio

    keep = kind([agent_host.Processor(processor("keep-last-turns"), {"turns": 1})])
    agent, sent = agent_with(keep, asynchronous=True)
    state = asyncio.run(agent.ainvoke({"messages": earlier() + [HumanMessage("And tomorrow?")]}))
    assert [m.content for m in sent[0]] == ["And tomorrow?"]
    assert state["messages"][-1].content == "Noted."


def test_a_trapping_processor_stops_the_agent(guest):
    agent, _ = agent_with(ProcessorMiddleware([agent_host.Processor(guest("panic"))]))
    with pytest.raises(agent_host.ProcessorFailedError):
        agent.invoke({"messages": [HumanMessage("hello")]})
