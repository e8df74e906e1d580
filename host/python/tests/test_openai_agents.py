"""The OpenAI Agents SDK session: items through an agent-host store and
back, and a real Agent run (a scripted model, no network) keeping its
history there."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any, List

import pytest
from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

import agent_host
from agent_host.openai_agents import AgentHostSession

set_tracing_disabled(True)


@pytest.fixture(params=["folder", "sqlite"])
def store(request, tmp_path) -> agent_host.Store:
    if request.param == "folder":
        return agent_host.Store(str(tmp_path / "store"))
    return agent_host.Store(f"sqlite:{tmp_path / 'sessions.db'}")


def items() -> List[Any]:
    """A turn as the SDK stores it: the user's input, reasoning with its
    encrypted content, a tool call and its output, the answer, and an item
    type agent-host's model has no place for."""
    return [
        {"content": "What is the weather in Paris?", "role": "user"},
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Look the weather up."}],
            "encrypted_content": "gAAAA-opaque",
        },
        {
            "arguments": '{"city":"Paris"}',
            "call_id": "call_1",
            "name": "weather",
            "type": "function_call",
            "id": "fc_1",
            "status": "completed",
        },
        {"call_id": "call_1", "output": "18 C, clear", "type": "function_call_output"},
        {
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "Paris weather"},
        },
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "It is 18 C and clear.", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
    ]


def run(coroutine):
    return asyncio.run(coroutine)


def test_it_is_an_sdk_session(store):
    assert isinstance(AgentHostSession("k", store), Session)


def test_items_come_back_exactly_and_the_log_is_an_agent_host_history(store):
    session = AgentHostSession("telegram:1", store)
    sent = items()
    run(session.add_items(sent[:3]))
    run(session.add_items(sent[3:]))
    assert run(session.get_items()) == items()
    assert run(session.get_items(limit=2)) == items()[-2:]
    assert run(session.get_items(limit=0)) == []
    # A new object (a new process) over the same store reads the same.
    assert run(AgentHostSession("telegram:1", store).get_items()) == items()
    # SessionSettings' limit applies when no limit is given.
    limited = AgentHostSession("telegram:1", store, session_settings=SessionSettings(limit=1))
    assert run(limited.get_items()) == items()[-1:]

    # agent-host's own view: the tool call stays paired with its result.
    log = store.session("telegram:1").load()
    assert log.roles == ["user", "assistant", "assistant", "tool", "assistant", "assistant"]
    openai = log.to_messages("openai")
    [call] = [m for m in openai if m.get("tool_calls")]
    assert call["tool_calls"][0]["id"] == "call_1"
    assert openai[openai.index(call) + 1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "18 C, clear",
    }


def test_pop_takes_back_the_newest_item_for_good(store):
    session = AgentHostSession("k", store)
    run(session.add_items(items()))
    assert run(session.pop_item()) == items()[-1]
    assert run(session.pop_item()) == items()[-2]
    assert run(session.get_items()) == items()[:-2]
    # Durable: another object sees the pops, and the log keeps everything.
    assert run(AgentHostSession("k", store).get_items()) == items()[:-2]
    assert len(store.session("k").load()) == len(items()) + 2
    run(session.add_items([{"role": "user", "content": "again"}]))
    assert run(session.get_items(limit=1)) == [{"role": "user", "content": "again"}]
    while run(session.pop_item()) is not None:
        pass
    assert run(session.get_items()) == []


def test_clear_removes_every_message(store):
    session = AgentHostSession("k", store)
    run(session.add_items(items()))
    run(session.pop_item())
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert len(store.session("k").load()) == 0
    run(session.add_items(items()[:1]))
    assert run(session.get_items()) == items()[:1]


def test_messages_other_front_ends_wrote_read_as_items(store, chat):
    store.session("shared").append(chat)
    session = AgentHostSession("shared", store)
    got = run(session.get_items())
    calls = [i for i in got if i.get("type") == "function_call"]
    outputs = [i for i in got if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs] == ["call_1"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert got[-1]["role"] == "assistant"
    # Popping works on them too, one item at a time.
    assert run(session.pop_item()) == got[-1]
    assert run(session.get_items()) == got[:-1]


def test_a_bad_item_is_refused_and_nothing_is_stored(store):
    session = AgentHostSession("k", store)
    with pytest.raises(agent_host.InvalidInputError) as e:
        run(session.add_items([{"role": "user", "content": "fine"}, {"type": "function_call"}]))
    assert "session item 1" in str(e.value)
    assert run(session.get_items()) == []


class ScriptedModel(Model):
    """A model that answers from a script, recording what it was sent: a
    tool call with reasoning first, then text."""

    def __init__(self) -> None:
        self.inputs: List[Any] = []
        self.calls = 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kwargs):
        self.inputs.append(copy.deepcopy(input))
        self.calls += 1
        n = self.calls
        if n % 2 == 1:
            output = [
                ResponseReasoningItem(
                    id=f"rs_{n}", type="reasoning", encrypted_content=f"enc-{n}",
                    summary=[Summary(text="Call the tool.", type="summary_text")],
                ),
                ResponseFunctionToolCall(
                    id=f"fc_{n}", call_id=f"call_{n}", name="weather", type="function_call",
                    arguments=json.dumps({"city": "Paris" if n == 1 else "Rome"}), status="completed",
                ),
            ]
        else:
            output = [
                ResponseOutputMessage(
                    id=f"msg_{n}", role="assistant", status="completed", type="message",
                    content=[ResponseOutputText(text=f"Answer {n}.", type="output_text", annotations=[])],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise AssertionError("the test runs the agent without streaming")


def test_an_agent_run_keeps_its_history_in_the_store(store):
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"18 C in {city}"

    model = ScriptedModel()
    agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[weather])
    session = AgentHostSession("user-42", store)

    first = Runner.run_sync(agent, "Weather in Paris?", session=session)
    assert first.final_output == "Answer 2."
    second = Runner.run_sync(agent, "And in Rome?", session=session)
    assert second.final_output == "Answer 4."

    # The second run's first request holds the first run's whole history,
    # read back from the store: the tool call, its output and the reasoning.
    sent = model.inputs[2]
    types = [i.get("type", "message") for i in sent]
    assert types == ["message", "reasoning", "function_call", "function_call_output", "message", "message"]
    assert sent[1]["encrypted_content"] == "enc-1"
    assert sent[2]["call_id"] == sent[3]["call_id"] == "call_1"
    assert sent[3]["output"] == "18 C in Paris"
    assert sent[-1]["content"] == "And in Rome?"

    stored = run(session.get_items())
    assert len(stored) == 10
    assert [i["call_id"] for i in stored if i.get("type") == "function_call_output"] == ["call_1", "call_3"]
    log = store.session("user-42").load()
    assert log.violations() == []
    assert log.roles.count("tool") == 2
