"""Reading histories: from a path, a string, Python objects; every format
detected; bad input refused with the right exception and a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agent_host
from agent_host import InvalidInputError, NotFoundError


def test_a_list_of_dicts_reads_as_openai_and_writes_back_the_same(chat):
    h = agent_host.from_messages(chat)
    assert h.format == "openai"
    assert len(h) == 7
    assert h.roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert h.violations() == []
    back = h.to_messages("openai")
    assert back[2]["tool_calls"][0]["id"] == "call_1"
    assert back[3]["tool_call_id"] == "call_1" and back[3]["content"] == "18 C, clear"
    assert [m.get("content") for m in back] == [m["content"] for m in chat]


def test_a_path_and_a_string_read_the_same(tmp_path: Path, chat):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat))
    from_path = agent_host.load(path)
    from_text = agent_host.loads(path.read_text())
    assert from_path.source == str(path)
    assert from_text.source == "<string>"
    assert from_path.to_messages() == from_text.to_messages()
    assert from_path.tokens == from_text.tokens > 0


def test_every_writable_format_reads_back_as_itself(chat):
    h = agent_host.from_messages(chat)
    for name, writable in agent_host.formats():
        if not writable:
            continue
        again = agent_host.loads(h.dumps(name))
        assert again.format == name, name
        assert again.roles == h.roles, name
        objects = h.to_messages(name)
        # Native records are told from LangChain dicts by their lines only:
        # as a list they are read when the format is named.
        named = name if name == "jsonl" else None
        assert agent_host.from_messages(objects, named).roles == h.roles, name
        if named is None:
            assert agent_host.from_messages(objects).format == name, name


def test_an_anthropic_request_and_langchain_dicts_are_detected():
    anthropic = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        ],
    }
    h = agent_host.from_messages(anthropic)
    assert h.format == "anthropic"
    assert h.roles == ["system", "user", "assistant"]
    langchain = [
        {"type": "human", "data": {"content": "hi", "type": "human"}},
        {"type": "ai", "data": {"content": "hello", "type": "ai"}},
    ]
    h = agent_host.from_messages(langchain)
    assert h.format == "langchain"
    assert h.roles == ["user", "assistant"]


def test_a_claude_code_session_of_the_corpus_reads(corpus: Path):
    sessions = sorted((corpus / "claude-code-sessions-ccv").glob("*.jsonl"))
    assert sessions
    for path in sessions:
        h = agent_host.load(path)
        assert h.format == "claude-code"
        assert len(h) > 0
        assert h.violations() == [], path


def test_a_missing_file_is_not_found_and_named(tmp_path: Path):
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(NotFoundError) as e:
        agent_host.load(missing)
    assert str(missing) in str(e.value)
    assert e.value.kind == "not_found"
    assert isinstance(e.value, LookupError)


def test_a_folder_is_refused_before_it_is_read(tmp_path: Path):
    with pytest.raises(agent_host.AgentHostError) as e:
        agent_host.load(tmp_path)
    assert "not a regular file" in str(e.value)


def test_malformed_json_says_where():
    with pytest.raises(InvalidInputError) as e:
        agent_host.loads('[{"role": "user", "content": "hi"}, {"role": ')
    assert isinstance(e.value, ValueError)
    assert "not valid JSON" in str(e.value)
    assert "column 45" in str(e.value)


def test_a_document_of_no_known_shape_says_what_was_seen():
    with pytest.raises(InvalidInputError) as e:
        agent_host.from_messages({"hello": "world"})
    assert "cannot tell the format" in str(e.value)
    assert "hello" in str(e.value)


def test_a_bad_line_of_a_native_log_names_it(chat):
    good = agent_host.from_messages(chat).dumps("jsonl").splitlines()[0]
    with pytest.raises(InvalidInputError) as e:
        agent_host.loads(good + "\n" + '{"type": "wizard", "content": "x"}\n', format="jsonl")
    assert "line 2" in str(e.value)
    assert "wizard" in str(e.value)


def test_an_unknown_format_name_is_invalid_input(chat):
    with pytest.raises(InvalidInputError) as e:
        agent_host.from_messages(chat, format="yaml")
    assert "yaml" in str(e.value)
    with pytest.raises(InvalidInputError):
        agent_host.from_messages(chat).dumps("claude-code")


def test_objects_json_cannot_hold_are_invalid_input():
    with pytest.raises(InvalidInputError) as e:
        agent_host.from_messages([{"role": "user", "content": object()}])
    assert "JSON" in str(e.value)
