"""Long-term memory from Python: add, extract, search, get, list, update,
delete; invalidation by a newer value; scoping by user; errors as the
package's exception classes."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent_host
from agent_host import InvalidInputError, NotFoundError


@pytest.fixture(params=["files", "sqlite"])
def memory(request, tmp_path: Path) -> agent_host.Memory:
    if request.param == "files":
        return agent_host.Memory(tmp_path / "store")
    return agent_host.Memory(f"sqlite:{tmp_path / 'sessions.db'}")


def test_add_search_get_update_delete(memory):
    added = memory.add("prefers tabs over spaces", user="alice")
    fact = added["fact"]
    assert fact["entity"] == "alice" and not added["duplicate"]
    found = memory.search("tabs or spaces", user="alice")
    assert found[0]["fact"]["id"] == fact["id"] and found[0]["score"] > 0
    # Another user's memory is not searched, and its facts are not found.
    assert memory.search("tabs", user="bob") == []
    with pytest.raises(NotFoundError):
        memory.get(fact["id"], user="bob")
    assert memory.get(fact["id"], user="alice")["text"] == "prefers tabs over spaces"
    changed = memory.update(fact["id"], user="alice", text="prefers tabs, width 4")
    assert changed["text"] == "prefers tabs, width 4"
    memory.delete(fact["id"], user="alice")
    with pytest.raises(NotFoundError):
        memory.get(fact["id"], user="alice")


def test_a_newer_value_invalidates_the_older_fact(memory):
    old = memory.add("lives in Lisbon", user="alice", attribute="lives in", value="Lisbon")
    new = memory.add("lives in Porto", user="alice", attribute="lives in", value="Porto")
    assert new["invalidated"] == [old["fact"]["id"]]
    valid = [f["fact"]["text"] for f in memory.search("lives", user="alice")]
    assert valid == ["lives in Porto"]
    every = memory.search("lives", user="alice", include_invalid=True)
    assert {f["fact"]["text"] for f in every} == {"lives in Porto", "lives in Lisbon"}


def test_extract_from_a_history_and_list(memory):
    history = agent_host.from_messages(
        [
            {"role": "user", "content": "My name is Ada and I moved to Porto last month."},
            {"role": "assistant", "content": "Welcome to Porto, Ada."},
        ]
    )
    added = memory.extract(history, user="ada", session="s1")
    texts = [a["fact"]["text"] for a in added]
    assert any("Ada" in t for t in texts), texts
    assert all(a["fact"]["source"]["session"] == "s1" for a in added)
    # Facts about Ada, or naming her.
    listed = memory.list(user="ada", entity="ada")
    assert any(f["entity"] == "ada" and f["kind"] == "name" for f in listed), listed
    assert all(f["entity"] == "ada" or "Ada" in f.get("mentions", []) for f in listed)
    assert memory.list(user="ada", entity="Porto") != []
    assert memory.list(user="ada", entity="nobody") == []
    # The same messages again add nothing new.
    again = memory.extract(history, user="ada", session="s1")
    assert all(a["duplicate"] for a in again)


def test_bad_input_is_refused_with_what_and_where(memory, tmp_path):
    with pytest.raises(InvalidInputError) as error:
        memory.add("x" * 100_000, user="alice")
    assert "text" in str(error.value)
    with pytest.raises(agent_host.AgentHostError):
        agent_host.Memory("")
