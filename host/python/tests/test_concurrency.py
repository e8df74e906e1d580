"""Long calls release the GIL, and the asyncio API keeps the loop running."""

from __future__ import annotations

import asyncio
import threading
import time

import agent_host
from agent_host import aio


def test_a_long_call_lets_other_python_threads_run(guest, chat):
    # The spin guest runs until its deadline: 300 ms inside the extension.
    spin = agent_host.Processor(guest("spin"), deadline_ms=300, on_failure="skip")
    history = agent_host.from_messages(chat)  # read beforehand: only the call is timed
    span = []
    done = threading.Event()

    def call() -> None:
        span.append(time.perf_counter())
        spin.run(history)
        span.append(time.perf_counter())
        done.set()

    worker = threading.Thread(target=call)
    samples = []
    ticks = 0
    worker.start()
    while not done.is_set():
        ticks += 1
        if ticks % 1000 == 0:
            samples.append(time.perf_counter())
    worker.join()
    begun, ended = span
    assert ended - begun >= 0.25
    # Were the GIL held through the call, this thread could not run between
    # its start and its end.
    inside = [t for t in samples if begun + 0.05 < t < ended - 0.05]
    assert len(inside) > 10, (len(inside), len(samples))


def test_the_asyncio_api(tmp_path, guest, processor, chat):
    async def main() -> None:
        history = await aio.from_messages(chat)
        assert len(history) == 7
        path = tmp_path / "chat.json"
        path.write_text(history.dumps())
        assert (await aio.load(path)).roles == history.roles
        keep = await aio.processor(processor("keep-last-turns"), {"turns": 1})
        result = await aio.run(path.read_text(), [keep], context_limit=8000)
        assert len(result.history) == 3

        store = await aio.open_store(tmp_path / "store")
        session = await store.session("async")
        assert await session.append(chat) == 7
        assert len(await session.load()) == 7
        assert len(await session.query(contains="paris")) == 3
        assert (await session.context())["messages_in_view"] == 7
        assert [s.id for s in await store.sessions()] == [session.id]

        # The loop keeps turning while a processor runs in its thread.
        spin = await aio.processor(guest("spin"), deadline_ms=300, on_failure="skip")
        ticks = 0
        task = asyncio.ensure_future(aio.run(chat, [spin]))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        await task
        assert ticks >= 10, ticks

    asyncio.run(main())
