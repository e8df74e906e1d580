"""Stores and sessions: get-or-create, append, load, query, context."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent_host
from agent_host import InvalidInputError, NotFoundError


@pytest.fixture(params=["files", "sqlite"])
def store(request, tmp_path: Path) -> agent_host.Store:
    if request.param == "files":
        return agent_host.Store(tmp_path / "store")
    return agent_host.Store(f"sqlite:{tmp_path / 'sessions.db'}")


def test_get_or_create_gives_one_session_per_key(store):
    a = store.session("telegram:1", title="first")
    b = store.session("telegram:1")
    other = store.session("telegram:1", agent="planner")
    assert a.id == b.id != other.id
    assert a.key == "telegram:1" and a.agent == "default" and a.title == "first"
    assert store.get("telegram:1").id == a.id
    assert store.get(a.id).id == a.id
    assert store.get("nobody") is None
    assert {s.id for s in store.sessions()} == {a.id, other.id}


def test_append_load_and_query(store, chat):
    s = store.session("work")
    assert s.append(chat[:4]) == 4
    assert s.append(agent_host.from_messages(chat[4:])) == 7
    assert s.current() == len(s) == 7
    log = s.load()
    assert log.roles == agent_host.from_messages(chat).roles
    assert log.to_messages()[2]["tool_calls"][0]["id"] == "call_1"
    # The text of a message, its tool calls' arguments included.
    found = s.query(contains="PARIS")
    assert found.roles == ["user", "assistant", "assistant"]
    assert [m["content"] for m in found.to_messages()] == [
        "What is the weather in Paris?",
        None,
        "It is 18 C and clear in Paris.",
    ]
    assert s.query(roles=["user"], limit=1).to_messages()[0]["content"] == "And tomorrow?"
    assert len(s.query(since="1h")) == 7


def test_a_bad_append_stores_nothing(store):
    s = store.session("careful")
    s.append([{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidInputError):
        s.append('[{"role": "user", "content": ')
    assert s.current() == 1


def test_bad_query_values_are_invalid_input(store):
    s = store.session("q")
    with pytest.raises(InvalidInputError) as e:
        s.query(since="yesterday-ish")
    assert "since" in str(e.value)
    with pytest.raises(InvalidInputError) as e:
        s.query(roles=["wizard"])
    assert "wizard" in str(e.value)


def test_the_context_report_says_what_the_next_view_holds(store, chat):
    s = store.session("ctx")
    s.append(chat)
    report = s.context(context_limit=8000)
    assert report["context_limit"] == 8000
    assert report["messages_in_view"] == 7
    assert report["session"]["id"] == s.id
    assert report["triggers"]


def test_delete_and_a_missing_session(store):
    s = store.session("gone")
    store.delete("gone")
    assert store.get("gone") is None
    with pytest.raises(NotFoundError):
        store.delete("gone")
    with pytest.raises(NotFoundError):
        s.current()


def test_a_store_that_cannot_be_opened_is_an_error(tmp_path: Path):
    not_a_db = tmp_path / "text.db"
    not_a_db.write_text("this is not SQLite")
    with pytest.raises(agent_host.AgentHostError) as e:
        agent_host.Store(f"sqlite:{not_a_db}").session("x")
    assert str(not_a_db) in str(e.value)
