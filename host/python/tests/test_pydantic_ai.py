"""The pydantic-ai adapter: a real Agent driven by FunctionModel and
TestModel, its history through WebAssembly processors."""

from __future__ import annotations

from typing import List

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import agent_host
import agent_host.pydantic_ai as ah_pai


def earlier_conversation() -> List[ModelMessage]:
    """Two finished turns: one with thinking and a tool call, one plain."""
    return [
        ModelRequest(parts=[UserPromptPart("What is the weather in Paris?")]),
        ModelResponse(
            parts=[
                ThinkingPart("The user wants the weather.", signature="sig-1"),
                ToolCallPart("weather", {"city": "Paris"}, tool_call_id="call_1"),
            ]
        ),
        ModelRequest(parts=[ToolReturnPart("weather", "18 C, clear", tool_call_id="call_1")]),
        ModelResponse(parts=[TextPart("It is 18 C and clear.")]),
        ModelRequest(parts=[UserPromptPart("Thanks!")]),
        ModelResponse(parts=[TextPart("You are welcome.")]),
    ]


def test_messages_go_over_and_back_with_thinking_and_tool_pairs():
    history = ah_pai.to_history(earlier_conversation())
    assert history.format == "pydantic-ai"
    assert history.roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    back = ah_pai.from_history(history)
    thinking, call = back[1].parts
    assert isinstance(thinking, ThinkingPart)
    assert thinking.content == "The user wants the weather." and thinking.signature == "sig-1"
    assert isinstance(call, ToolCallPart) and call.tool_call_id == "call_1"
    assert call.args_as_dict() == {"city": "Paris"}
    [ret] = back[2].parts
    assert isinstance(ret, ToolReturnPart) and ret.tool_call_id == "call_1"


def test_an_agent_sees_the_history_the_processor_made(processor):
    seen: List[List[ModelMessage]] = []

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Noted.")])

    keep = ah_pai.processors(agent_host.Processor(processor("keep-last-turns"), {"turns": 1}))
    agent = Agent(FunctionModel(model), capabilities=[ah_pai.capability(
        agent_host.Processor(processor("keep-last-turns"), {"turns": 1}))])
    result = agent.run_sync("And tomorrow?", message_history=earlier_conversation())
    assert result.output == "Noted."
    # Only the last turn reaches the model: the new prompt.
    [request] = seen[0]
    assert isinstance(request, ModelRequest)
    assert [p.content for p in request.parts if isinstance(p, UserPromptPart)] == ["And tomorrow?"]
    # The plain function works on its own too.
    assert len(keep(earlier_conversation())) == 2


def test_tool_calls_made_during_the_run_stay_paired(processor):
    agent = Agent(
        TestModel(),
        capabilities=[ah_pai.capability(processor("strip-reasoning"), pipeline=True, context_limit=8000)],
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"18 C in {city}"

    # TestModel calls every tool once on a run's first request, then answers.
    result = agent.run_sync("What is the weather?")
    messages = result.all_messages()
    calls = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    returns = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert calls == returns == {"pyd_ai_tool_call_id__weather"}
    assert "18 C" in result.output
    assert agent_host.from_messages(
        ah_pai.to_history(messages).to_messages("openai")
    ).violations() == []


def test_a_trapping_processor_stops_the_run(guest):
    agent = Agent(TestModel(), capabilities=[ah_pai.capability(guest("panic"))])
    with pytest.raises(agent_host.ProcessorFailedError) as e:
        agent.run_sync("hello")
    assert "panic" in str(e.value)


def test_a_processor_with_run_context_follows_the_deps(processor):
    from dataclasses import dataclass

    from pydantic_ai import RunContext

    @dataclass
    class Deps:
        turns: int

    seen: List[List[ModelMessage]] = []
    contexts: List[RunContext] = []

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("Noted.")])

    def choose(ctx: RunContext[Deps]):
        contexts.append(ctx)
        return [agent_host.Processor(processor("keep-last-turns"), {"turns": ctx.deps.turns})]

    agent = Agent(
        FunctionModel(model),
        deps_type=Deps,
        capabilities=[ah_pai.capability_with_context(choose, context_limit=lambda ctx: 8000)],
    )
    agent.run_sync("And tomorrow?", message_history=earlier_conversation(), deps=Deps(turns=1))
    agent.run_sync("And tomorrow?", message_history=earlier_conversation(), deps=Deps(turns=2))
    # One turn: the new prompt alone; two: the "Thanks!" turn before it too.
    assert [len(s) for s in seen] == [1, 3]
    assert [c.deps.turns for c in contexts] == [1, 2]
    prompts = [p.content for m in seen[1] for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["Thanks!", "And tomorrow?"]


def test_a_processor_with_run_context_is_one_pydantic_ai_calls_with_it(processor):
    from pydantic_ai._utils import takes_run_context

    made = ah_pai.processors_with_context(lambda ctx: [processor("strip-reasoning")])
    assert takes_run_context(made)
    agent = Agent(TestModel(), capabilities=[ah_pai.capability_with_context(
        lambda ctx: [processor("strip-reasoning")], pipeline=True)])
    result = agent.run_sync("hello")
    assert result.output
