"""OpenAI Agents SDK: a ``Session`` kept in an agent-host store (``pip install
agent-host[openai-agents]``).

    from agents import Agent, Runner
    import agent_host
    from agent_host.openai_agents import AgentHostSession

    session = AgentHostSession("telegram:123", agent_host.Store(".agent-host"))
    result = await Runner.run(agent, "hello", session=session)

Each item the SDK adds becomes one message of the agent-host session, read
by agent-host's ``responses`` reader (so the CLI, the server and the
pipeline see a user message, an assistant turn with its tool call, a tool
result, reasoning), with the item itself kept verbatim in the message's
metadata under ``"openai_agents"``: ``get_items`` gives back exactly what
``add_items`` took (ids, ``call_id`` pairing of ``function_call`` and
``function_call_output``, reasoning with its encrypted content, item types
agent-host has no place for). Messages written by other front ends (the
gateway, ``agent-host chat``) are written as Responses items.

The log is append-only: ``pop_item`` appends a mark (a synthetic, empty
assistant message whose metadata names the item taken back) and the item
disappears from what the SDK reads, while agent-host's own views show the
log as written. ``clear_session`` removes every message.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple

from agents.memory import SessionSettings

import agent_host
from agent_host import Session as StoredSession
from agent_host import Store

KEY = "openai_agents"
"""The metadata key of what this adapter keeps in a message."""

Item = Dict[str, Any]


def _plain(item: Any) -> Item:
    """The item as JSON-ready dicts (the SDK passes dicts; a model object is
    dumped the way the SDK dumps it)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if dump is None:
        raise agent_host.InvalidInputError(
            f"a session item must be a dict or a pydantic model, not {type(item).__name__}"
        )
    return dump(mode="json", exclude_unset=True)


def to_records(items: List[Any]) -> List[Dict[str, Any]]:
    """agent-host's native records (one per item, a fresh id each) of SDK
    items, each holding its item verbatim."""
    records = []
    for index, raw in enumerate(items):
        item = _plain(raw)
        try:
            read = agent_host.from_messages([item], format="responses").to_messages("jsonl")
        except agent_host.InvalidInputError as e:
            raise agent_host.InvalidInputError(f"session item {index}: {e}") from e
        if len(read) != 1:
            # The reader makes at most one message of one item; none means
            # it had nothing to keep (an empty item).
            raise agent_host.InvalidInputError(
                f"session item {index} ({item.get('type', 'message')}) reads as {len(read)} messages, not one"
            )
        [record] = read
        record["id"] = f"agents-{uuid.uuid4().hex}"
        record.setdefault("metadata", {})[KEY] = {"item": item}
        records.append(record)
    return records


def visible_items(records: List[Dict[str, Any]]) -> List[Tuple[str, int, Item]]:
    """The items the SDK sees in a session's log: ``(message id, index of
    the item within the message, item)``, in order, the popped ones left
    out."""
    popped = set()
    for record in records:
        mark = record.get("metadata", {}).get(KEY, {})
        if "popped" in mark:
            popped.add((mark["popped"], mark.get("index", 0)))
    out: List[Tuple[str, int, Item]] = []
    for record in records:
        kept = record.get("metadata", {}).get(KEY, {})
        if "popped" in kept:
            continue
        if "item" in kept:
            items = [kept["item"]]
        else:
            # Written by another front end: its Responses items.
            items = agent_host.from_messages([record], format="jsonl").to_messages("responses")
        for index, item in enumerate(items):
            if (record["id"], index) not in popped:
                out.append((record["id"], index, item))
    return out


class AgentHostSession:
    """An Agents SDK session (the ``agents.memory.Session`` protocol) kept
    as the session ``key`` of ``agent`` in an agent-host store (a
    :class:`agent_host.Store`, or its spec: a folder, ``sqlite:PATH``, a
    ``postgres://`` URL), created when missing. ``session_id`` is the key.

    Every call runs in a worker thread (the extension releases the GIL).
    Within one process, calls on one object are serialised; a pop racing an
    append from another process can take back the other's item."""

    session_settings: Optional[SessionSettings] = None

    def __init__(
        self,
        key: str,
        store: "Store | str",
        *,
        agent: str = "default",
        session_settings: Optional[SessionSettings] = None,
    ) -> None:
        self.session_id = key
        self.store = store if isinstance(store, Store) else Store(store)
        self.agent = agent
        self.session_settings = session_settings or SessionSettings()
        self._lock = threading.Lock()
        self._stored: Optional[StoredSession] = None

    def _session(self) -> StoredSession:
        if self._stored is None:
            self._stored = self.store.session(self.session_id, agent=self.agent)
        return self._stored

    def _visible(self) -> List[Tuple[str, int, Item]]:
        return visible_items(self._session().load().to_messages("jsonl"))

    # The blocking halves, each under the lock.

    def get_items_sync(self, limit: Optional[int] = None) -> List[Item]:
        """:meth:`get_items`, blocking."""
        if limit is None:
            limit = self.session_settings.limit if self.session_settings else None
        if limit is not None and limit <= 0:
            return []
        with self._lock:
            items = [item for _, _, item in self._visible()]
        return items if limit is None else items[-limit:]

    def add_items_sync(self, items: List[Any]) -> None:
        """:meth:`add_items`, blocking: all of them in one durable append."""
        if not items:
            return
        records = to_records(list(items))
        with self._lock:
            self._session().append(agent_host.from_messages(records, format="jsonl"))

    def pop_item_sync(self) -> Optional[Item]:
        """:meth:`pop_item`, blocking."""
        with self._lock:
            visible = self._visible()
            if not visible:
                return None
            message, index, item = visible[-1]
            mark = {
                "type": "assistant",
                "id": f"agents-{uuid.uuid4().hex}",
                "synthetic": True,
                "metadata": {KEY: {"popped": message, "index": index}},
            }
            self._session().append(agent_host.from_messages([mark], format="jsonl"))
            return item

    def clear_session_sync(self) -> None:
        """:meth:`clear_session`, blocking."""
        with self._lock:
            self._session().clear()

    # The Session protocol.

    async def get_items(self, limit: Optional[int] = None) -> List[Item]:
        """The session's items in order; the newest ``limit`` of them when
        given (else the ``session_settings`` limit, else all)."""
        return await asyncio.to_thread(self.get_items_sync, limit)

    async def add_items(self, items: List[Any]) -> None:
        """Appends ``items`` durably, in one write."""
        await asyncio.to_thread(self.add_items_sync, items)

    async def pop_item(self) -> Optional[Item]:
        """Takes back the newest item and returns it (``None`` when there is none)."""
        return await asyncio.to_thread(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Removes every message of the session (the session itself stays)."""
        await asyncio.to_thread(self.clear_session_sync)

    def __repr__(self) -> str:
        return f"<AgentHostSession {self.session_id!r} of {self.agent!r} in {self.store.spec}>"


__all__ = ["AgentHostSession", "KEY", "to_records", "visible_items"]
