"""The asyncio API: every blocking call of :mod:`agent_host` as a coroutine.

Each runs the synchronous call in a worker thread (``asyncio.to_thread``);
the extension releases the GIL for the whole of the call, so the event loop
and other threads go on meanwhile.

    from agent_host import aio

    history = await aio.load("session.jsonl")
    result = await aio.run(history, context_limit=8000)
    store = await aio.open_store("sqlite:sessions.db")
    session = await store.session("user-42")
    await session.append([{"role": "user", "content": "hi"}])
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Iterable, List, Optional, Union

import agent_host as _sync
from agent_host import History, HistoryLike, Processor, RunResult


async def load(path: Union[str, "os.PathLike[str]"], format: Optional[str] = None) -> History:
    """:func:`agent_host.load` as a coroutine."""
    return await asyncio.to_thread(_sync.load, path, format)


async def loads(text: str, format: Optional[str] = None) -> History:
    """:func:`agent_host.loads` as a coroutine."""
    return await asyncio.to_thread(_sync.loads, text, format)


async def from_messages(messages: Any, format: Optional[str] = None) -> History:
    """:func:`agent_host.from_messages` as a coroutine."""
    return await asyncio.to_thread(_sync.from_messages, messages, format)


async def processor(path: Union[str, "os.PathLike[str]"], config: Any = None, **options: Any) -> Processor:
    """Loads a :class:`agent_host.Processor` (compiling it) in a thread."""
    return await asyncio.to_thread(Processor, os.fspath(path), config, **options)


async def run(
    history: HistoryLike,
    processors: Iterable[Processor] = (),
    *,
    context_limit: Optional[int] = None,
    response_reserve: Optional[int] = None,
    min_recent_messages: Optional[int] = None,
    compact: bool = True,
    pipeline: bool = True,
) -> RunResult:
    """:func:`agent_host.run` as a coroutine."""
    chain = list(processors)
    return await asyncio.to_thread(
        _sync.run,
        history,
        chain,
        context_limit=context_limit,
        response_reserve=response_reserve,
        min_recent_messages=min_recent_messages,
        compact=compact,
        pipeline=pipeline,
    )


class AsyncSession:
    """A :class:`agent_host.Session` whose calls are coroutines."""

    def __init__(self, session: _sync.Session) -> None:
        self.sync = session
        """The synchronous session underneath."""

    @property
    def id(self) -> str:
        """The session's id."""
        return self.sync.id

    @property
    def key(self) -> Optional[str]:
        """The session's key within its agent."""
        return self.sync.key

    @property
    def agent(self) -> str:
        """The agent the session belongs to."""
        return self.sync.agent

    async def append(self, messages: HistoryLike) -> int:
        """Appends messages durably; returns the new message count."""
        return await asyncio.to_thread(self.sync.append, messages)

    async def load(self) -> History:
        """The whole log."""
        return await asyncio.to_thread(self.sync.load)

    async def query(self, **conditions: Any) -> History:
        """The matching messages (see :meth:`agent_host.Session.query`)."""
        return await asyncio.to_thread(lambda: self.sync.query(**conditions))

    async def context(self, *, context_limit: Optional[int] = None) -> Any:
        """The context report (see :meth:`agent_host.Session.context`)."""
        return await asyncio.to_thread(lambda: self.sync.context(context_limit=context_limit))

    async def current(self) -> int:
        """The number of messages the log holds now."""
        return await asyncio.to_thread(self.sync.current)


class AsyncStore:
    """A :class:`agent_host.Store` whose calls are coroutines; make one with
    :func:`open_store`."""

    def __init__(self, store: _sync.Store) -> None:
        self.sync = store
        """The synchronous store underneath."""

    async def session(self, key: str, *, agent: str = "default", title: Optional[str] = None) -> AsyncSession:
        """The session ``key`` of ``agent``, created when it has none yet."""
        s = await asyncio.to_thread(lambda: self.sync.session(key, agent=agent, title=title))
        return AsyncSession(s)

    async def get(self, name: str, *, agent: str = "default") -> Optional[AsyncSession]:
        """The session ``name`` stands for, or ``None``."""
        s = await asyncio.to_thread(lambda: self.sync.get(name, agent=agent))
        return None if s is None else AsyncSession(s)

    async def sessions(self) -> List[AsyncSession]:
        """Every session, most recently updated first."""
        return [AsyncSession(s) for s in await asyncio.to_thread(self.sync.sessions)]

    async def delete(self, name: str, *, agent: str = "default") -> None:
        """Deletes the session ``name`` stands for."""
        await asyncio.to_thread(lambda: self.sync.delete(name, agent=agent))


async def open_store(spec: Union[str, "os.PathLike[str]"]) -> AsyncStore:
    """Opens a store (a folder, ``sqlite:PATH``, ``postgres://...``) in a thread."""
    return AsyncStore(await asyncio.to_thread(_sync.Store, os.fspath(spec)))


__all__ = [
    "AsyncSession",
    "AsyncStore",
    "from_messages",
    "load",
    "loads",
    "open_store",
    "processor",
    "run",
]
