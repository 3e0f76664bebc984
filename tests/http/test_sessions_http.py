"""Sessions over HTTP: ``POST /v1/context`` and ``/v1/sessions`` with API keys (a key cannot
read another agent's session), errors in the server's JSON shape (docs/sessions.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from test_server import bearer, client, error_of

from kemem_es import Kemem

DATA = Path(__file__).resolve().parents[2] / "bench" / "session_fallback" / "dialogue_30.jsonl"
KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"]}
A = {"agent_id": "agent_a", "user_id": "u1"}


def turns(n: int) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines()][:n]
    return [{"role": r["role"], "content": r["content"]} for r in rows]


@pytest.mark.engine
def test_context_and_sessions_over_http_with_keys(kemem: Kemem) -> None:
    kemem.init()
    c = client(kemem, server_api_keys=KEYS)
    ka, kb = bearer("key-a"), bearer("key-b")
    said = turns(6)
    body = {"messages": said[:4], **A, "session_id": "s1", "user_name": "木木"}
    r = c.post("/v1/memories", json=body, headers=ka)
    assert r.status_code == 200, r.text
    assert r.json()["results"] == []  # appended to the session; extraction comes in batches

    ctx = c.post(
        "/v1/context",
        json={
            "message": said[4]["content"],
            **A,
            "session_id": "s1",
            "max_tokens": 200,
            "score_threshold": 0.0,
        },
        headers=ka,
    )
    assert ctx.status_code == 200, ctx.text
    got = ctx.json()
    assert got["tokens"]["total"] <= 200 and got["budget"] == 200
    assert [t["content"] for t in got["dialogue"]] == [t["content"] for t in said[:5]]
    assert got["text"].splitlines()[-1].endswith(said[4]["content"])

    listed = c.get("/v1/sessions", params=A, headers=ka)
    assert [s["session_id"] for s in listed.json()["results"]] == ["s1"]
    msgs = c.get("/v1/sessions/s1/messages", params=A, headers=ka).json()["results"]
    assert [m["seq"] for m in msgs] == [0, 1, 2, 3]
    one = c.get("/v1/sessions/s1/messages/2", params=A, headers=ka)
    assert one.json()["content"] == said[2]["content"]
    missing = c.get("/v1/sessions/s1/messages/99", params=A, headers=ka)
    assert error_of(missing, 404)["code"]

    # key-b serves agent_b only: agent_a's session is out of its reach, whatever the route
    for method, path, kw in [
        ("GET", "/v1/sessions", {"params": A}),
        ("GET", "/v1/sessions/s1/messages", {"params": A}),
        ("GET", "/v1/sessions/s1/messages/0", {"params": A}),
        ("POST", "/v1/context", {"json": {"message": "x", **A, "session_id": "s1"}}),
        ("POST", "/v1/sessions/s1/end", {"json": A}),
        ("DELETE", "/v1/sessions/s1", {"params": A}),
    ]:
        r = c.request(method, path, headers=kb, **kw)
        assert error_of(r, 403)["field"] == "agent_id", (method, path)
    # its own agent, the same user and session id: a different session (nothing there)
    other = {**A, "agent_id": "agent_b"}
    assert c.get("/v1/sessions/s1/messages", params=other, headers=kb).json()["results"] == []
    assert error_of(c.get("/v1/sessions", params=A), 401)["code"]  # no key at all

    bad = c.post(
        "/v1/context", json={"message": said[4]["content"], **A, "max_tokens": 2}, headers=ka
    )
    assert error_of(bad, 422)["field"] == "max_tokens"

    ended = c.post("/v1/sessions/s1/end", json=A, headers=ka)
    assert ended.status_code == 200 and ended.json()["batches"][0]["reason"] == "end"
    gone = c.delete("/v1/sessions/s1", params=A, headers=ka)
    assert gone.status_code == 200 and gone.json() == {"deleted": 4}
    assert c.get("/v1/sessions/s1/messages", params=A, headers=ka).json()["results"] == []


@pytest.mark.engine
def test_the_server_ends_idle_sessions_on_its_own(kemem: Kemem) -> None:
    """The server's sweep (KEMEM_SESSION_SWEEP_S): a session idle past KEMEM_SESSION_IDLE_S is
    ended while the server runs — its window handed to extraction (here the no-LLM fallback)."""
    import asyncio
    from datetime import datetime, timedelta, timezone

    from kemem_es import AsyncKemem
    from kemem_es.server.app import create_app
    from kemem_es.store.sessions import SessionStore, batch_key

    kemem.init()
    settings = kemem.settings.model_copy(update={"session_sweep_s": 0.2})
    akm = AsyncKemem(settings)
    akm.core.embedder = kemem.embedder
    scope = kemem._scope("agent_a", "u1", "user")
    long_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    said = turns(4)
    kemem.sessions.manager.append(scope, "old", said, {"user_name": "木木"}, now=long_ago)
    store = SessionStore(kemem.engine)
    app = create_app(akm, settings, close=True)

    def window_from() -> int:
        state = store.state(scope, "old")
        return int(state.source["window_from"]) if state else -1

    async def serve() -> int:
        async with app.router.lifespan_context(app):
            for _ in range(600):  # the first sweep runs at start; wait for it
                if await asyncio.to_thread(window_from) == 4:
                    break
                await asyncio.sleep(0.1)
            return await asyncio.to_thread(window_from)

    assert asyncio.run(serve()) == 4
    (batch,) = store.get_docs(scope, [batch_key("old", 0)])  # drained at the server's close
    assert batch is not None and batch.source["reason"] == "idle"
    assert batch.source["status"] == "done"
