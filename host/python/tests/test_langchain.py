"""The LangChain adapter with real langchain-core messages and runnables."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import agent_host
from agent_host.langchain import from_langchain, to_langchain, transform


def conversation():
    return [
        SystemMessage("You are a careful assistant."),
        HumanMessage("What is the weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}]),
        ToolMessage("18 C, clear", tool_call_id="call_1"),
        AIMessage("It is 18 C and clear in Paris."),
        HumanMessage("And in Rome?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Rome"}, "id": "call_2"}]),
        ToolMessage("24 C, sunny", tool_call_id="call_2"),
        AIMessage("It is 24 C and sunny in Rome."),
    ]


def test_messages_go_over_and_back_with_their_tool_calls():
    history = from_langchain(conversation())
    assert history.format == "langchain"
    assert history.violations() == []
    back = to_langchain(history)
    assert [type(m) for m in back] == [type(m) for m in conversation()]
    assert back[2].tool_calls[0]["id"] == "call_1"
    assert back[2].tool_calls[0]["args"] == {"city": "Paris"}
    assert back[3].tool_call_id == "call_1"
    assert back[-1].content == "It is 24 C and sunny in Rome."


def test_a_processor_transform_keeps_the_last_turn_and_its_pairs(processor):
    keep = transform([agent_host.Processor(processor("keep-last-turns"), {"turns": 1})])
    out = keep.invoke(conversation())
    assert [type(m).__name__ for m in out] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert out[1].content == "And in Rome?"
    assert out[2].tool_calls[0]["id"] == out[3].tool_call_id == "call_2"


def test_the_transform_composes_with_a_chat_model(processor):
    seen = []
    model = FakeMessagesListChatModel(responses=[AIMessage("Noted.")])
    keep = transform([agent_host.Processor(processor("keep-last-turns"), {"turns": 1})])

    def record(messages):
        seen.append(list(messages))
        return messages

    from langchain_core.runnables import RunnableLambda

    chain = keep | RunnableLambda(record) | model
    answer = chain.invoke(conversation())
    assert answer.content == "Noted."
    assert len(seen[0]) == 5


def test_the_pipeline_fits_a_budget(processor):
    long = [SystemMessage("Be brief.")]
    for i in range(40):
        long.append(HumanMessage(f"question {i} " + "more words " * 50))
        long.append(AIMessage(f"answer {i} " + "more words " * 50))
    out = transform(context_limit=2000, pipeline=True).invoke(long)
    assert len(out) < len(long)
    assert isinstance(out[0], SystemMessage)
    assert from_langchain(out).tokens <= 2000
