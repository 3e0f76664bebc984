"""AsyncKemem against the real engine: the same answers as Kemem (one core), many calls at once
on one event loop, async hooks awaited, background reinforcement carried by the loop, and the
loop kept free while the model works."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kemem_es import AsyncKemem, Kemem
from kemem_es.errors import InvalidInput, NotFound
from kemem_es.runtime import AwaitingClient

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_async"}


def twin(kemem: Kemem, **update: Any) -> AsyncKemem:
    akm = AsyncKemem(kemem.settings.model_copy(update=update) if update else kemem.settings)
    akm.core.embedder = kemem.embedder
    return akm


def run(coro: Any) -> Any:
    return asyncio.new_event_loop().run_until_complete(coro)


def test_same_answers_as_the_sync_api_on_the_async_client(kemem: Kemem) -> None:
    kemem.init()
    for text in ("木木周末去吃了火锅", "木木养了一只柯基叫豆包", "祁煜在画室画了一整夜"):
        kemem.add(text, **A, refresh=True)
    want = kemem.query("想吃火锅", **A, score_threshold=0, reinforce=False)

    async def go() -> Any:
        async with twin(kemem) as akm:
            got = await akm.query("想吃火锅", **A, score_threshold=0, reinforce=False)
            assert isinstance(akm.core.engine.client, AwaitingClient)  # the async client
            page = await akm.get_all(**A)
            one = await akm.get(page.results[0].id, **A)
            with pytest.raises(NotFound):
                await akm.get("nope", **A)
            with pytest.raises(InvalidInput):
                await akm.add("x", agent_id="qiyu", user_id="")
            return got, page, one

    got, page, one = run(go())
    assert [(e.index, e.score) for e in got.memory_events] == [
        (e.index, e.score) for e in want.memory_events
    ]
    assert got.memory_events[0].description == "木木周末去吃了火锅"
    assert len(page.results) == 3 and one.id == page.results[0].id


def test_many_calls_at_once_hooks_and_reinforcement(kemem: Kemem) -> None:
    kemem.init()
    seen: list[str] = []

    async def tag(response: Any, ctx: Any) -> Any:  # an async hook: awaited on the loop
        await asyncio.sleep(0)
        seen.append(ctx.user_id)
        return response

    async def go() -> tuple[list[Any], list[Any], int, float]:
        async with twin(kemem, reinforce=True, reinforce_flush_s=60) as akm:
            akm.hooks.after_search.append(tag)
            users = [f"u{i}" for i in range(6)]
            added = await asyncio.gather(
                *(akm.add(f"{u}周末去海边看日出", agent_id="qiyu", user_id=u, refresh=True)
                  for u in users)
            )  # fmt: skip
            answers = await asyncio.gather(
                *(akm.query("海边日出", agent_id="qiyu", user_id=u, score_threshold=0)
                  for u in users)
            )  # fmt: skip
            flushed = await akm.flush()  # the reinforcer's bulk, carried by this loop
            mem = await akm.get(added[0][0].id, agent_id="qiyu", user_id="u0")
            return added, answers, flushed, mem.strength

    added, answers, flushed, strength = run(go())
    assert all(a[0].event == "ADD" for a in added)
    for i, resp in enumerate(answers):  # each user got their own memory, nobody else's
        assert [e.index for e in resp.memory_events] == [added[i][0].id]
    assert sorted(seen) == [f"u{i}" for i in range(6)]
    assert flushed == 6 and strength > 0


def test_the_event_loop_stays_free_while_the_model_works(kemem: Kemem) -> None:
    """Embedding runs in the loop's thread pool: a ticker on the same loop keeps ticking while
    a batch of long texts is embedded for an import."""
    kemem.init()
    rows = [
        {
            **A,
            "id": f"r{i}",
            "description": "木木今天" + "很开心" * 120,
            "created_at": "2025-05-01T10:00:00",
        }
        for i in range(48)
    ]

    async def go() -> tuple[int, float]:
        ticks, longest, stop = 0, 0.0, False

        async def ticker() -> None:
            nonlocal ticks, longest
            last = time.perf_counter()
            while not stop:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                longest, last, ticks = max(longest, now - last), now, ticks + 1

        async with twin(kemem) as akm:
            await akm.warm_up()
            task = asyncio.create_task(ticker())
            report = await akm.index_records(rows, "events")
            stop = True
            await task
        assert report.indexed == 48
        return ticks, longest

    ticks, longest = run(go())
    assert ticks > 5 and longest < 0.5, (ticks, longest)


def test_a_flush_while_the_loop_is_not_running_keeps_its_queue(caplog) -> None:
    """An AsyncKemem's reinforcement thread flushes through the event loop. Between the loop's
    runs (or after it) the call cannot be made; the recalls wait for the next flush instead of
    being dropped with a traceback ("reinforcement flush crashed")."""
    from datetime import datetime

    from kemem_es.config import Settings
    from kemem_es.memory.strength import Reinforcer
    from kemem_es.runtime import LoopNotRunning
    from kemem_es.store.reinforce import Reinforcements
    from kemem_es.store.scope import Scope

    class LoopBackedEngine:
        def __init__(self) -> None:
            self.settings = Settings(index_prefix="t-flush")
            self.running = False
            self.painless = True  # the script path (a cluster with Painless)
            self.written: list[list[dict[str, Any]]] = []

        def bulk(
            self, lines: list[dict[str, Any]], refresh: bool = False, timeout_s: float | None = None
        ) -> dict[str, Any]:
            if not self.running:
                raise LoopNotRunning(
                    "an async engine call while AsyncKemem's event loop is stopped"
                )
            self.written.append(lines)
            return {"items": [{"update": {"status": 200}}] * (len(lines) // 2)}

    engine = LoopBackedEngine()
    reinforcer = Reinforcer(Reinforcements(engine), amount=1.0, flush_s=3600)  # type: ignore[arg-type]
    try:
        reinforcer.recalled([("t-flush-events", "m1", "r1")], datetime(2025, 1, 1, 12, 0))
        assert reinforcer.flush() == 0 and reinforcer.failed_flushes == 1
        assert "kept for the next one" not in caplog.text  # an idle loop is a wait, not a warning
        engine.running = True
        assert reinforcer.flush() == 1 and len(engine.written) == 1
        # after the loop has ended for good, the last flush says what was not written
        engine.running = False
        reinforcer.recalled([("t-flush-events", "m2", "r1")], datetime(2025, 1, 1, 13, 0))
        reinforcer.active(Scope.of(agent_id="qiyu", user_id="u1", db="user"))
        assert reinforcer.flush(final=True) == 0
        assert "1 memories and the activity of 1 users not written at shutdown" in caplog.text
    finally:
        reinforcer.close()


class _HungEngine:
    """An engine that never answers a bulk: each call waits out its timeout (``timeout_s``,
    else the client's ``write_timeout_s``), then times out as the clients do."""

    def __init__(self, write_timeout_s: float) -> None:
        from kemem_es.config import Settings

        self.settings = Settings(index_prefix="t-hung")
        self.write_timeout_s = write_timeout_s
        self.calls: list[float | None] = []
        self.painless = True  # the script path (a cluster with Painless)
        self.gone = threading.Event()  # set: stop waiting (the test is over)

    def bulk(
        self, lines: list[dict[str, Any]], refresh: bool = False, timeout_s: float | None = None
    ) -> dict[str, Any]:
        from kemem_es.errors import DeadlineExceeded

        self.calls.append(timeout_s)
        self.gone.wait(timeout_s if timeout_s is not None else self.write_timeout_s)
        # what Engine.request raises for the clients' timeout
        raise DeadlineExceeded("search engine: the search engine did not answer in time")


def _queued_reinforcer(engine: _HungEngine, flush_s: float) -> Any:
    from datetime import datetime

    from kemem_es.memory.strength import Reinforcer
    from kemem_es.store.reinforce import Reinforcements
    from kemem_es.store.scope import Scope

    reinforcer = Reinforcer(Reinforcements(engine), amount=1.0, flush_s=flush_s)  # type: ignore[arg-type]
    reinforcer.recalled([("t-hung-events", "m1", "r1")], datetime(2025, 1, 1, 12, 0))
    reinforcer.active(Scope.of(agent_id="qiyu", user_id="u1", db="user"))
    return reinforcer


def _closing_time(reinforcer: Any, deadline_s: float) -> float:
    start = time.monotonic()
    reinforcer.close(deadline_s=deadline_s)
    return time.monotonic() - start


LOST = "1 memories and the activity of 1 users not written at shutdown"


def test_closing_with_a_hung_engine_keeps_to_the_shutdown_deadline(caplog) -> None:
    """A hung engine held a stopping process for two write timeouts (62 s): close() waited for
    the background flush under way, then flushed again with the whole write timeout. Now all
    of it keeps to one deadline, there is no second try after a timeout, and the log says what
    was not written (counts)."""
    # a background flush is under way and hangs past the deadline: not waited for any longer
    engine = _HungEngine(write_timeout_s=30)
    reinforcer = _queued_reinforcer(engine, flush_s=0.05)
    while not engine.calls:
        time.sleep(0.01)
    assert _closing_time(reinforcer, deadline_s=1.0) < 1.5
    assert engine.calls == [None] and LOST in caplog.text
    engine.gone.set()
    # the background flush timed out while closing: no second try
    caplog.clear()
    engine = _HungEngine(write_timeout_s=0.5)
    reinforcer = _queued_reinforcer(engine, flush_s=0.05)
    while not engine.calls:
        time.sleep(0.01)
    assert _closing_time(reinforcer, deadline_s=3.0) < 1.5
    assert engine.calls == [None] and LOST in caplog.text
    # nothing under way: one last try, within what is left of the deadline
    caplog.clear()
    engine = _HungEngine(write_timeout_s=30)
    reinforcer = _queued_reinforcer(engine, flush_s=3600)
    assert _closing_time(reinforcer, deadline_s=1.0) < 1.5
    assert len(engine.calls) == 1 and 0 < (engine.calls[0] or 0) <= 1.0
    assert LOST in caplog.text
    assert "qiyu" not in caplog.text and "u1" not in caplog.text  # counts, not ids


def test_a_write_cancelled_between_memory_and_history_keeps_both(kemem: Kemem, monkeypatch) -> None:
    """A cancellation that came after the memory was written used to skip its history entry;
    now the two finish together and the verb is cancelled afterwards."""
    import threading

    from kemem_es.runtime import pause
    from kemem_es.store.crud import Crud

    kemem.init()
    real = Crud.record_history
    started = threading.Event()

    def slow_history(self: Crud, entries: list, doing: str) -> None:
        started.set()
        pause(0.3)  # the memory is written; the caller is cancelled now
        real(self, entries, doing)

    monkeypatch.setattr(Crud, "record_history", slow_history)

    async def go() -> None:
        async with twin(kemem) as akm:
            for verb in ("add", "update", "delete"):
                started.clear()
                if verb == "add":
                    call = akm.add(
                        {"id": "c1", "description": "木木去看海", "created_at": "2025-01-01"}, **A
                    )
                elif verb == "update":
                    call = akm.update("c1", "木木去看海了", **A)
                else:
                    call = akm.delete("c1", **A)
                task = asyncio.ensure_future(call)
                while not started.is_set():
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            # the verb after a cancelled one works (no lock left held)
            with pytest.raises(NotFound):
                await akm.get("c1", **A)

    run(go())
    monkeypatch.setattr(Crud, "record_history", real)
    assert [h.event for h in kemem.history("c1", **A)] == ["ADD", "UPDATE", "DELETE"]


def test_verbs_after_close_raise_closed(kemem: Kemem) -> None:
    """After close() the background writers are stopped: a verb used to queue reinforcement and
    activity that nothing wrote any more, silently."""
    from kemem_es.errors import Closed

    kemem.init()
    kemem.add("木木去看海", **A, refresh=True)
    kemem.close()
    for call in (
        lambda: kemem.query("看海", **A),
        lambda: kemem.search("看海", **A),
        lambda: kemem.add("木木又去看海", **A),
        lambda: kemem.get_all(**A),
        lambda: kemem.flush(),
    ):
        with pytest.raises(Closed, match="closed"):
            call()
    kemem.close()  # closing again is harmless

    async def go() -> None:
        akm = twin(kemem)
        assert await akm.count(**A) == 1
        await akm.aclose()
        with pytest.raises(Closed):
            await akm.query("看海", **A)
        await akm.aclose()

    run(go())


def test_an_async_kemem_on_a_second_event_loop_says_so(kemem: Kemem) -> None:
    """It used to answer a permanent, misleading EngineUnavailable (and a degraded query
    silently answered "no memories")."""
    from kemem_es.errors import WrongEventLoop

    kemem.init()
    akm = twin(kemem)

    async def first() -> None:
        assert await akm.count(**A) == 0
        await akm.aclose()

    async def second() -> None:
        with pytest.raises(WrongEventLoop, match="one AsyncKemem per event loop"):
            await akm.count(**A)
        with pytest.raises(WrongEventLoop):
            await akm.query("看海", **A, degrade=True)

    asyncio.run(first())
    asyncio.run(second())
