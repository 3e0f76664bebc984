"""The OpenAI-compatible proxy of `kemem-es serve`, called by the official `openai` Python
client (and the official npm package, tests/node/) against a loopback upstream stub
(tests/proxy_stub.py) and the real engine: memories injected into what the upstream receives,
streams relayed chunk by chunk, each turn stored once, degraded without the engine, upstream
errors passed through, a key kept to its agents."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from proxy_stub import ANSWER, Upstream, memory_store, proxy_env, serve_upstream  # noqa: E402
from support import HangingProxy, serve_process  # noqa: E402

from kemem_es import Kemem  # noqa: E402

KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"], "key-root": ["*"]}
SECRET = "sk-upstream-secret-0123456789"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def store(engine_settings: Any, embedder: Any) -> Iterator[Kemem]:
    with memory_store(engine_settings, embedder) as km:
        yield km


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with serve_upstream() as up:
        yield up


def _env(store: Kemem, up: Upstream, **extra: str) -> dict[str, str]:
    return proxy_env(store, up, KEYS, KEMEM_PROXY_UPSTREAM_KEY=SECRET, **extra)


@pytest.fixture(scope="module")
def proxy(store: Kemem, upstream: Upstream) -> Iterator[str]:
    with serve_process(_env(store, upstream), up_within_s=240) as url:
        yield url


@pytest.fixture()
def up(upstream: Upstream) -> Upstream:
    upstream.reset()
    return upstream


def client(url: str, key: str = "key-a", session: str | None = None, **headers: str) -> Any:
    """The three-line switch: base_url, the kemem key, the memory scope as default headers."""
    scope = {"X-Kemem-User-Id": "u1", "X-Kemem-Agent-Id": "agent_a", **headers}
    if session:
        scope["X-Kemem-Session-Id"] = session
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, default_headers=scope, max_retries=0)


def _system(req: dict[str, Any]) -> str:
    return "\n".join(
        m["content"] for m in req["body"]["messages"] if m["role"] in ("system", "developer")
    )


def _stored(store: Kemem, session: str, n: int, agent: str = "agent_a") -> list[Any]:
    """The session's messages once ``n`` are there (the turn is stored after the answer)."""
    deadline = time.monotonic() + 20
    while True:
        got = store.session_messages(session, user_id="u1", agent_id=agent)
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_chat_completion_gets_memories_and_stores_the_turn_once(
    proxy: str, up: Upstream, store: Kemem
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    c = client(proxy, session=session)
    resp = c.chat.completions.create(
        model="stub-model",
        messages=[
            {"role": "system", "content": "你是小狸，木木的朋友。"},
            {"role": "user", "content": "豆包最近怎么样？"},
        ],
    )
    assert resp.choices[0].message.content == "".join(ANSWER)
    req = up.last()
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"  # never the kemem key
    system = _system(req)
    assert system.startswith("你是小狸") and "豆包" in system.split("你是小狸，木木的朋友。")[1]
    assert "memory_config" not in req["body"] and "memory_context" not in req["body"]
    info = resp.to_dict()["memory_info"]
    assert info["injected"] and info["agent_id"] == "agent_a" and info["session_id"] == session
    assert any("豆包" in m["memory"] for m in info["memories"])
    turns = _stored(store, session, 2)
    assert [(t.role, t.content) for t in turns] == [
        ("user", "豆包最近怎么样？"), ("assistant", "".join(ANSWER))
    ]  # fmt: skip
    time.sleep(1)
    assert len(store.session_messages(session, user_id="u1", agent_id="agent_a")) == 2


def test_a_stream_is_relayed_chunk_by_chunk(proxy: str, up: Upstream, store: Kemem) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    up.hold = True  # the stub sends one chunk, then waits until we have it
    stream = client(proxy, session=session).chat.completions.create(
        model="stub-model",
        messages=[{"role": "user", "content": "豆包最近怎么样？"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = iter(stream)
    first = next(chunks)
    assert first.choices[0].delta.content == ANSWER[0]
    assert not up.finished.is_set()  # the first chunk came before the stub finished
    up.gate.set()
    rest = [ch.choices[0].delta.content or "" for ch in chunks if ch.choices]
    assert ANSWER[0] + "".join(rest) == "".join(ANSWER)
    info = json.loads(stream.response.headers["x-kemem-memory-info"])
    assert info["injected"] and "豆包" in _system(up.last())
    turns = _stored(store, session, 2)
    assert [t.content for t in turns] == ["豆包最近怎么样？", "".join(ANSWER)]
    time.sleep(1)  # stored once
    assert len(store.session_messages(session, user_id="u1", agent_id="agent_a")) == 2


def test_a_client_that_leaves_mid_stream_stores_nothing(
    proxy: str, up: Upstream, store: Kemem
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    counted = _usage_row(proxy)
    up.hold = True
    with httpx.stream(
        "POST",
        f"{proxy}/v1/chat/completions",
        headers={
            "Authorization": "Bearer key-a",
            "X-Kemem-User-Id": "u1",
            "X-Kemem-Session-Id": session,
        },
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "在吗"}]},
        timeout=30,
    ) as r:
        assert r.status_code == 200
        next(r.iter_raw())  # the first chunk, then the client goes away
    up.gate.set()
    time.sleep(2)
    assert store.session_messages(session, user_id="u1", agent_id="agent_a") == []
    assert _usage_row(proxy) == counted  # nor counted: the answer never reached the client


def _usage_row(url: str) -> dict[str, int] | None:
    """Agent A's usage row for u1 (None before its first request)."""
    rows = httpx.get(f"{url}/v1/usage", headers={"Authorization": "Bearer key-a"}).json()
    return next((r for r in rows["results"] if r["user_id"] == "u1"), None)


def test_responses_keep_the_session_of_previous_response_id(
    proxy: str, up: Upstream, store: Kemem
) -> None:
    c = client(proxy)
    first = c.responses.create(model="stub-model", input="豆包最近怎么样？",
                               instructions="你是小狸。")  # fmt: skip
    assert first.output_text == "".join(ANSWER)
    assert "豆包" in up.last()["body"]["instructions"]
    session = first.to_dict()["memory_info"]["session_id"]
    up.hold = True
    stream = c.responses.create(
        model="stub-model", input="它喜欢去哪儿玩？", previous_response_id=first.id, stream=True
    )
    events = iter(stream)
    kinds = [next(events).type, next(events).type]
    assert kinds == ["response.created", "response.output_text.delta"]
    assert not up.finished.is_set()
    up.gate.set()
    rest = [e.type for e in events]
    assert rest[-1] == "response.completed"
    assert up.last()["body"]["previous_response_id"] == first.id
    info = json.loads(stream.response.headers["x-kemem-memory-info"])
    assert info["session_id"] == session
    turns = _stored(store, session, 4)
    assert [t.content for t in turns][::2] == ["豆包最近怎么样？", "它喜欢去哪儿玩？"]


def test_upstream_errors_pass_through_without_the_key(proxy: str, up: Upstream) -> None:
    c = client(proxy)
    for status, exc in ((429, openai.RateLimitError), (500, openai.InternalServerError)):
        up.fail = (status, {"error": {"message": "slow down", "type": "rate_limit"}})
        with pytest.raises(exc) as caught:
            c.chat.completions.create(model="m", messages=[{"role": "user", "content": "在吗"}])
        with pytest.raises(exc) as also:  # the Responses API's the same
            c.responses.create(model="m", input="在吗", stream=True)
        for err in (caught.value, also.value):
            assert err.status_code == status
            assert SECRET not in err.response.text and "***" in err.response.text


def test_a_key_cannot_inject_or_store_into_another_agent(
    proxy: str, up: Upstream, store: Kemem
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    c = client(proxy, session=session, **{"X-Kemem-Agent-Id": "agent_b"})
    with pytest.raises(openai.PermissionDeniedError):
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "豆包呢"}])
    with pytest.raises(openai.PermissionDeniedError):  # in the body, as extra_body sends it
        client(proxy, key="key-b").chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "豆包呢"}],
            extra_body={"memory_context": {"user_id": "u1", "agent_id": "agent_a"}},
        )
    assert up.requests == []  # nothing was forwarded
    time.sleep(1)
    assert store.session_messages(session, user_id="u1", agent_id="agent_b") == []
    # key B on its own agent: nothing of agent A's is injected
    client(proxy, key="key-b", **{"X-Kemem-Agent-Id": "agent_b"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "豆包最近怎么样？"}]
    )
    assert "柯基" not in json.dumps(up.last()["body"], ensure_ascii=False)


def test_usage_per_agent_and_user(proxy: str, up: Upstream) -> None:
    client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "豆包最近怎么样？"}]
    )
    row = _usage_row(proxy)
    assert row is not None and row["agent_id"] == "agent_a"
    assert row["prompt_tokens"] >= 50 and row["completion_tokens"] >= 7
    assert row["memory_tokens"] > 0
    other = httpx.get(f"{proxy}/v1/usage", headers={"Authorization": "Bearer key-b"}).json()
    assert all(r["agent_id"] == "agent_b" for r in other["results"])
    metrics = httpx.get(f"{proxy}/metrics", headers={"Authorization": "Bearer key-root"}).text
    assert 'kemem_proxy_tokens_total{agent="agent_a",kind="prompt",user="u1"}' in metrics


def test_engine_down_still_answers_degraded(store: Kemem, upstream: Upstream) -> None:
    """The engine stops answering once the server is up: the chat goes on without memories."""
    upstream.reset()
    with HangingProxy(store.settings.url) as hanging:
        env = {**_env(store, upstream), "KEMEM_ES_URL": hanging.url,
               "KEMEM_QUERY_TIMEOUT_S": "1"}  # fmt: skip
        with serve_process(env, up_within_s=240) as url:
            hanging.hang()
            start = time.monotonic()
            resp = client(url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "豆包最近怎么样？"}]
            )
            took = time.monotonic() - start
            first = client(url).responses.create(model="m", input="豆包最近怎么样？")
            # a chain this process answered goes on without the engine (kept in memory too)
            second = client(url).responses.create(
                model="m", input="它呢？", previous_response_id=first.id
            )
            # one it did not: whose it is cannot be checked, so it is not forwarded
            with pytest.raises(openai.APIStatusError) as caught:
                client(url).responses.create(model="m", input="在吗", previous_response_id="r-x")
    assert caught.value.status_code == 503
    assert caught.value.response.json()["error"]["field"] == "previous_response_id"
    for answer in (first, second):
        assert answer.output_text == "".join(ANSWER)
        assert answer.to_dict()["memory_info"]["degraded"]
    session = first.to_dict()["memory_info"]["session_id"]
    assert second.to_dict()["memory_info"]["session_id"] == session
    assert resp.choices[0].message.content == "".join(ANSWER)
    info = resp.to_dict()["memory_info"]
    assert info["degraded"] and not info["injected"], info
    assert hanging.url.split("//")[1] not in info["degraded"]
    assert "豆包" not in _system(upstream.requests[0])
    assert took < 15


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_official_openai_npm_package_through_the_proxy(proxy: str, up: Upstream) -> None:
    """tests/node/proxy_client.mjs with the npm ``openai`` package (scripts/ci_drop.sh installs
    it); skipped when it is not installed, except in CI (CI=true) or with KEMEM_REQUIRE_NODE=1."""
    node_dir = os.path.join(REPO, "tests", "node")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "openai")):
        if os.environ.get("KEMEM_REQUIRE_NODE") or os.environ.get("CI") == "true":
            pytest.fail("tests/node/node_modules/openai missing: run scripts/ci_drop.sh")
        pytest.skip("npm install in tests/node first (scripts/ci_drop.sh)")
    out = subprocess.run(
        ["node", "proxy_client.mjs", f"{proxy}/v1", "key-a"],
        cwd=node_dir, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["plain"] == "".join(ANSWER) and result["streamed"] == "".join(ANSWER)
    assert result["chunks"] >= 3 and result["memory_info"]["injected"]
    assert sum("豆包" in _system(r) for r in up.requests) == 2


def test_memory_fields_are_validated_like_the_api(proxy: str, up: Upstream) -> None:
    auth = {"Authorization": "Bearer key-a", "X-Kemem-User-Id": "u1"}
    base = {"model": "m", "messages": [{"role": "user", "content": "在吗"}]}
    for extra, field in (
        ({"memory_config": {"memory_depth": 0}}, "memory_config.memory_depth"),
        ({"memory_config": {"nope": 1}}, "memory_config.nope"),
        ({"memory_context": {"user_id": ""}}, "memory_context.user_id"),
    ):
        r = httpx.post(f"{proxy}/v1/chat/completions", headers=auth, json={**base, **extra})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field
    assert up.requests == []
