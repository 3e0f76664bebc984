"""Faults on the chat path, against the real engine: the engine hung (SIGSTOP of the test
suite's own local node), stopped (nothing listening), an official index missing, and the server
overloaded. Each answer comes within the query deadline: an error (a ``KememError``) or, with
degrade on, no memories and the reason. Writes never degrade."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_import_safety import Proxy
from test_server import A, client, error_of

from kemem_es import AsyncKemem, Kemem
from kemem_es.errors import DeadlineExceeded, EngineUnavailable

pytestmark = pytest.mark.engine

DEADLINE_S = 1.0
BOUND_S = 4.0  # loose: the deadline plus scheduling on a busy 2-core machine


def seeded(kemem: Kemem) -> Kemem:
    kemem.init()
    kemem.add("木木周末和祁煜去吃了火锅，点了双份毛肚", **A, refresh=True)
    kemem.add("灯塔画室每周六下午开放", agent_id=A["agent_id"], db="official", refresh=True)
    return kemem


def chat_kemem(kemem: Kemem, **update: Any) -> Kemem:
    """A second Kemem on the same indices: 1 s query deadline, short write timeout."""
    settings = kemem.settings.model_copy(
        update={"query_timeout_s": DEADLINE_S, "es_timeout_s": 2.0, "reinforce": False, **update}
    )
    km = Kemem(settings)
    km.embedder = kemem.embedder
    return km


@contextmanager
def stopped_engine(kemem: Kemem) -> Iterator[None]:
    """SIGSTOP the local node for the duration (SIGCONT afterwards, whatever happens)."""
    if os.environ.get("KEMEM_TEST_ES_URL"):
        pytest.skip("SIGSTOP needs the suite's own local node")
    from kemem_es.engine.local import LocalEngine

    pid = LocalEngine(kemem.settings).pid()
    assert pid is not None, "the local test node's pid file"
    os.kill(pid, signal.SIGSTOP)
    try:
        _until_stopped(pid)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _until_stopped(pid: int, within_s: float = 5.0) -> None:
    """Wait until every thread of ``pid`` is stopped: kill() only queues the signal, and on a
    loaded machine a thread of the node may still be answering a request for a moment."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        if states and all(s in "Tt" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"the node (pid {pid}) did not stop within {within_s} s")


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    out = fn(*args, **kwargs)
    return out, time.monotonic() - t0


def test_hung_engine_sigstop_library_and_server(kemem: Kemem) -> None:
    km = chat_kemem(seeded(kemem))
    c = client(km, server_degrade=True)
    assert km.query("火锅", **A, score_threshold=0).memory_events  # warm
    assert c.post("/query", json={"query": "火锅", **A, "score_threshold": 0}).json()[
        "memory_events"
    ]
    with stopped_engine(kemem):
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            km.query("火锅", **A)
        assert time.monotonic() - t0 < BOUND_S

        resp, took = timed(km.query, "火锅", **A, degrade=True)
        assert took < BOUND_S
        assert resp.memory_events == [] and resp.additional_info.degraded
        assert "deadline" in (resp.additional_info.degraded_reason or "")

        r, took = timed(c.post, "/query", json={"query": "火锅", **A})
        assert took < BOUND_S and r.status_code == 200
        assert r.json()["additional_info"]["degraded"] is True
        assert r.headers["X-Kemem-Degraded"] == "engine_unavailable"

        # A readiness probe answers within the chat deadline, not the 30 s admin timeout.
        r, took = timed(c.get, "/readyz")
        assert r.status_code == 503 and took < BOUND_S, (r.text, took)
        assert "did not answer" in r.json()["reason"]

        # Writes never degrade: a clear 503 (bounded by the write timeout), nothing pretended.
        r, took = timed(c.post, "/v1/memories", json={"text": "新的记忆", **A})
        assert error_of(r, 503)["code"] == "engine_unavailable" and took < 3 * BOUND_S
    # Back to normal once the engine runs again.
    assert km.query("火锅", **A, score_threshold=0).memory_events


def test_stopped_engine_async_and_server(kemem: Kemem) -> None:
    seeded(kemem)
    proxy = Proxy(int(kemem.settings.url.rsplit(":", 1)[1]))
    km = chat_kemem(kemem, es_url=f"http://127.0.0.1:{proxy.port}")
    c = client(km)
    akm = AsyncKemem(km.settings)
    akm.core.embedder = kemem.embedder

    async def ask() -> Any:
        return await akm.query("火锅", **A, score_threshold=0)

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(ask()).memory_events  # warm, through the proxy
        assert c.post("/query", json={"query": "火锅", **A}).status_code == 200
        proxy.close()  # nothing listens any more: connection refused
        t0 = time.monotonic()
        with pytest.raises(EngineUnavailable):
            loop.run_until_complete(ask())
        assert time.monotonic() - t0 < BOUND_S
        r, took = timed(c.post, "/query", json={"query": "火锅", **A})
        assert took < BOUND_S and r.json()["additional_info"]["degraded"] is True
        assert error_of(c.get("/v1/memories", params=A), 503)["code"] == "engine_unavailable"
    finally:
        loop.run_until_complete(akm.aclose())
        loop.close()
        proxy.close()


def test_missing_official_index_still_answers_user_memories(kemem: Kemem) -> None:
    km = seeded(kemem)
    alias = f"{km.settings.index_prefix}-official-events"
    for concrete in km.engine.get_index(alias):
        km.engine.delete_index(concrete)
    resp = km.query("火锅", **A, score_threshold=0)
    assert [e.db for e in resp.memory_events] == ["user"]
    assert "火锅" in resp.memory_events[0].description
    info = resp.additional_info
    assert info.degraded is True and "official" in (info.degraded_reason or "")

    r = client(km).post("/query", json={"query": "火锅", **A, "score_threshold": 0})
    assert r.status_code == 200 and r.headers["X-Kemem-Degraded"] == "index_missing"
    assert r.json()["memory_events"][0]["db"] == "user"


def test_overloaded_server_answers_429_and_still_serves_ops(kemem: Kemem) -> None:
    km = seeded(kemem)
    c = client(km, server_max_inflight=1)

    async def slow(response: Any, ctx: Any) -> Any:  # holds the only slot for a while
        await asyncio.sleep(1.0)
        return response

    c.app.state.kemem.hooks.after_search.append(slow)

    async def later(method: str, url: str, **kw: Any) -> Any:
        await asyncio.sleep(0.3)
        return await c_async(method, url, **kw)

    import httpx

    transport = httpx.ASGITransport(app=c.app, raise_app_exceptions=False)

    async def c_async(method: str, url: str, **kw: Any) -> Any:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as h:
            return await h.request(method, url, **kw)

    async def both() -> list[Any]:
        body = {"query": "火锅", **A, "score_threshold": 0}
        return await asyncio.gather(
            c_async("POST", "/query", json=body),
            later("POST", "/query", json=body),
            later("GET", "/healthz"),
        )

    first, second, health = c.loop.run_until_complete(both())
    assert first.status_code == 200 and first.json()["memory_events"]
    assert error_of(second, 429)["code"] == "overloaded"
    assert second.headers["Retry-After"] == "1"
    assert health.status_code == 200
    assert "kemem_overloaded_requests_total 1.0" in c.get("/metrics").text


@contextmanager
def write_blocked(km: Kemem, alias: str) -> Iterator[None]:
    """The index refuses writes (read-only, as at the disk's flood stage): the engine's
    state, not the input's fault."""
    client = km.engine.client
    name = next(iter(km.engine.get_index(alias)))
    put = client.indices.put_settings
    put(index=name, body={"index.blocks.write": True})
    try:
        yield
    finally:
        put(index=name, body={"index.blocks.write": None})


def test_a_blocked_index_is_an_outage_and_nothing_claims_otherwise(kemem: Kemem) -> None:
    """Before: delete_all / forget answered 0 (or success) with every memory still there, and
    forgetting stripped the whole scope's history anyway; a blocked write was EngineRefused
    (bad input, exit 2); a history entry the engine dropped went unnoticed."""
    from kemem_es.errors import EngineRefused, WriteInterrupted

    kemem.init()
    scope = {"agent_id": "qiyu", "user_id": "u_block"}
    ids = [kemem.add(t, **scope, refresh=True)[0].id for t in ("木木去爬山了", "木木去看海了")]
    prefix = kemem.settings.index_prefix
    with write_blocked(kemem, f"{prefix}-user-events"):
        with pytest.raises(EngineUnavailable, match="0 of 2 were deleted") as err:
            kemem.delete_all(**scope, forget=True)
        assert not isinstance(err.value, EngineRefused)
        with pytest.raises(EngineUnavailable) as err:
            kemem.add("木木去逛街了", **scope)
        assert not isinstance(err.value, EngineRefused)
        record = {"id": "b1", "description": "木木去跑步了", "created_at": "2025-01-01", **scope}
        with pytest.raises(WriteInterrupted) as stopped:
            kemem.index_records([record], "events")
        assert stopped.value.written == 0
    assert kemem.count(**scope) == 2
    for mid in ids:  # forgetting stopped before it stripped anything
        first = kemem.history(mid, **scope)[0]
        assert first.event == "ADD" and first.new_text
    blocked = write_blocked(kemem, f"{prefix}-history")
    with blocked, pytest.raises(EngineUnavailable, match="itself was written"):
        kemem.update(ids[0], "木木去爬了黄山", **scope)
    assert kemem.get(ids[0], **scope).text == "木木去爬了黄山"
