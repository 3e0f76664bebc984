"""The dashboard's server side, in process (httpx over the ASGI transport) on the real engine:
the page and its assets, the JSON it reads, and API keys (an operator key sees only its
agents; without a key, 401). The browser test is tests/browser/test_dashboard_browser.py."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from dashboard_support import drop, make_kemem  # noqa: E402
from support import opened  # noqa: E402

from kemem_es import AsyncKemem, Kemem  # noqa: E402
from kemem_es.config import Settings  # noqa: E402
from kemem_es.contract.params import QueryParams  # noqa: E402
from kemem_es.server import create_app  # noqa: E402
from kemem_es.server.dashboard.summary import quantile  # noqa: E402

A = {"agent_id": "agent_a", "user_id": "u1"}
B = {"agent_id": "agent_b", "user_id": "u2"}
KEYS = {"key-a": ["agent_a"], "key-root": ["*"]}
XSS = '<script>alert(1)</script><img src=x onerror="window.__xss=1">'


def call(app: Any, method: str, url: str, **kwargs: Any) -> Any:
    """One request, on the app's own event loop (its AsyncKemem's client is bound to it)."""

    async def go() -> Any:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.request(method, url, **kwargs)

    return app.state.test_loop.run_until_complete(go())


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture()
def seeded(engine_settings: Settings, embedder: Any) -> Iterator[Kemem]:
    """Agent A: two user events (one with markup in it), an entity and an official event;
    agent B: one user event."""
    km = make_kemem(engine_settings, embedder)
    km.init()
    km.add("木木养了一只叫豆包的柯基，每天早上带它去公园散步", **A, refresh=True)
    km.add(f"{XSS}木木把一行代码写在了便签上", **A, refresh=True)
    entity = {
        "entity_name": "豆包", "entity_type": "具体实体", "kind": "特殊实体属性",
        "keyword": "豆包", "description": "豆包是木木养的柯基", "updatetime": "2025-03-01",
    }  # fmt: skip
    km.add(entity, **A, kind="entities", refresh=True)
    km.add("祁煜的画室在灯塔旁边", agent_id="agent_a", db="official", refresh=True)
    km.add("小满周末要去杭州西湖划船", **B, refresh=True)
    yield km
    drop(km)


def app_of(km: Kemem, keys: dict[str, list[str]] | None = None) -> Any:
    """The server over an AsyncKemem with ``km``'s settings and model."""
    akm = AsyncKemem(km.settings)
    if "embedder" in km.__dict__:
        akm.core.embedder = km.embedder
    app = create_app(akm, km.settings.model_copy(update={"server_api_keys": keys}))
    app.state.test_loop = asyncio.new_event_loop()
    opened(app.state.test_loop, akm)
    return app


# -- the page -----------------------------------------------------------------------------
def test_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.01, 0.0), (0.1, 50.0), (1.0, 100.0), (float("inf"), 100.0)]
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.25, buckets) == pytest.approx(0.055)  # halfway into (0.01, 0.1]
    assert quantile(0.99, buckets) == pytest.approx(0.982)
    assert quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert quantile(0.99, [(0.1, 1.0), (float("inf"), 10.0)]) == 0.1  # in +Inf: the last bound


def test_the_page_never_puts_an_unaddressable_memory_id_in_a_url() -> None:
    """URL rules resolve an empty id, '.' and '..' away: the delete of memory '.' went to
    DELETE /v1/memories/ (the scope delete). Every memory URL is built by one function, which
    refuses them (run in node where it is installed)."""
    from kemem_es.server import dashboard

    text = (Path(dashboard.__file__).parent / "static/dashboard.js").read_text(encoding="utf-8")
    assert text.count("`/v1/memories/") == 1, "memory URLs are built by memoryUrl only"
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    func = re.search(r"\n  function memoryUrl\(.*?\n  }\n", text, re.S)
    assert func is not None
    ids = ["", ".", "..", "a b/.", "..."]
    calls = f"""
for (const id of {json.dumps(ids)}) {{
  try {{ console.log(memoryUrl(id, "/history?")); }} catch (e) {{ console.log("refused"); }}
}}"""
    script = func.group(0) + calls
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "refused", "refused", "refused", "/v1/memories/a%20b%2F./history?",
        "/v1/memories/.../history?",
    ]  # fmt: skip


@pytest.mark.engine
def test_page_and_assets_need_no_key_and_forbid_inline_script(seeded: Kemem) -> None:
    app = app_of(seeded, KEYS)
    r = call(app, "GET", "/dashboard")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert '<script src="/dashboard/static/dashboard.js" defer></script>' in r.text
    assert "<script>" not in r.text and not re.search(r"\$[a-z_]", r.text)  # all filled in
    assert 'data-keys="on"' in r.text and 'value="0.47"' in r.text  # the server's defaults (w vec)
    js = call(app, "GET", "/dashboard/static/dashboard.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    markup_sinks = r"\.(inner|outer)HTML|insertAdjacentHTML|document\.write|\beval\("
    assert not re.search(markup_sinks, js.text.split('"use strict"', 1)[1])
    assert "sessionStorage" in js.text
    assert call(app, "GET", "/dashboard/static/dashboard.css").status_code == 200
    assert call(app, "GET", "/dashboard/static/..%2Froutes.py").status_code == 404
    assert call(app, "GET", "/dashboard/static/page.html").status_code == 404


@pytest.mark.engine
def test_api_needs_a_key_when_keys_are_configured(seeded: Kemem) -> None:
    app = app_of(seeded, KEYS)
    body = {"query": "豆包最近怎么样", **A}
    for method, url, kw in [
        ("GET", "/dashboard/api/overview", {}),
        ("GET", "/dashboard/api/metrics", {}),
        ("POST", "/dashboard/api/explore", {"json": body}),
    ]:
        r = call(app, method, url, **kw)
        assert r.status_code == 401, (url, r.text)
        assert r.json()["error"]["code"] == "unauthorized"
        r = call(app, method, url, headers=bearer("wrong"), **kw)
        assert r.status_code == 401, url
    r = call(app, "POST", "/dashboard/api/explore", json={**body, **B}, headers=bearer("key-a"))
    assert r.status_code == 403 and r.json()["error"]["field"] == "agent_id"


# -- overview -----------------------------------------------------------------------------
@pytest.mark.engine
def test_overview_counts_only_the_keys_agents(seeded: Kemem) -> None:
    app = app_of(seeded, KEYS)
    r = call(app, "GET", "/dashboard/api/overview", headers=bearer("key-a"))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["server"]["agents"] == ["agent_a"]
    assert out["engine"]["ok"] and out["engine"]["version"] == seeded.engine.version
    st = out["stats"]
    assert st["total"] == 4 and st["by_agent"] == {"agent_a": 4}
    assert st["by_db"] == {"user": 3, "official": 1}
    assert st["by_kind"] == {"events": 3, "entities": 1}
    rows = {
        (s["agent_id"], s["user_id"], s["db"]): (s["events"], s["entities"]) for s in st["scopes"]
    }
    assert rows == {("agent_a", "u1", "user"): (2, 1), ("agent_a", None, "official"): (1, 0)}
    assert sum(b["count"] for b in st["strength"]) == 4 and st["missing"] == []

    everything = call(app, "GET", "/dashboard/api/overview", headers=bearer("key-root")).json()
    assert everything["server"]["agents"] is None
    assert everything["stats"]["by_agent"] == {"agent_a": 4, "agent_b": 1}
    # No keys configured: the server serves anyone, and sees everything.
    assert call(app_of(seeded), "GET", "/dashboard/api/overview").json()["stats"]["total"] == 5


@pytest.mark.engine
def test_overview_lists_recent_cleanups_within_reach(seeded: Kemem) -> None:
    for i in range(4):
        seeded.add(f"小满第{i}次去跑步，配速越来越快", **B, refresh=True, dedup=False)
    done = seeded.cleanup(agent_id="agent_b", cap=5, ratio=0.4)
    deleted = sum(u.deleted for u in done)
    assert deleted == 2
    seeded.engine.refresh(f"{seeded.settings.index_prefix}-history")
    app = app_of(seeded, KEYS)
    root = call(app, "GET", "/dashboard/api/overview", headers=bearer("key-root")).json()
    today = datetime.now(timezone.utc).date().isoformat()
    assert root["stats"]["cleanups"] == [
        {"day": today, "deleted": 2, "users": 1, "reasons": {"cap": 2}}
    ]
    only_a = call(app, "GET", "/dashboard/api/overview", headers=bearer("key-a")).json()
    assert only_a["stats"]["cleanups"] == []


@pytest.mark.engine
def test_overview_on_a_prefix_without_indices(engine_settings: Settings, embedder: Any) -> None:
    km = make_kemem(engine_settings, embedder)
    r = call(app_of(km), "GET", "/dashboard/api/overview")
    assert r.status_code == 200, r.text
    st = r.json()["stats"]
    assert st["total"] == 0 and len(st["missing"]) == 5  # four memory indices + history


def test_overview_when_the_engine_is_down() -> None:
    from kemem_es.config import get_settings

    km = Kemem(get_settings(es_url="http://127.0.0.1:9", dialect="opensearch"))
    r = call(app_of(km), "GET", "/dashboard/api/overview")
    assert r.status_code == 200
    out = r.json()
    assert out["engine"]["ok"] is False and out["engine"]["reason"] and out["stats"] is None


# -- explorer and metrics -------------------------------------------------------------------
@pytest.mark.engine
def test_explore_gives_signals_weights_and_the_chat_prompt(seeded: Kemem) -> None:
    app = app_of(seeded, KEYS)
    now = "2025-06-01T12:00:00"
    body = {
        "query": "豆包最近怎么样", **A, "modes": ["fusion", "rrf"], "score_threshold": 0.2,
        "now": now, "user_name": "木木", "agent_name": "祁煜",
        "weights": {"kw": 0.5, "vec": 0.45, "time": 0.03, "strength": 0.02},
    }  # fmt: skip
    r = call(app, "POST", "/dashboard/api/explore", json=body, headers=bearer("key-a"))
    assert r.status_code == 200, r.text
    fusion, rrf = r.json()["runs"]
    assert fusion["mode"] == "fusion" and rrf["mode"] == "rrf"
    assert fusion["weights"] == body["weights"] and rrf["weights"] is None
    assert fusion["score_threshold"] == 0.2
    top = fusion["response"]["memory_events"][0]
    assert "豆包" in top["description"]
    sig = top["signals"]
    assert set(sig) >= {"kw", "vec", "time", "strength"} and sig["kw"] > 0
    assert all(e.get("signals") is None for e in rrf["response"]["memory_events"])
    info = fusion["response"]["additional_info"]
    assert "豆包" in info["分词"] and info["检索耗时"]["total"] > 0
    # The prompt is exactly what Kemem.prompt gives the chat for the same query.
    resp = seeded.query(
        "豆包最近怎么样", **A, score_threshold=0.2, now=datetime.fromisoformat(now),
        weights=body["weights"], limit=10, user_name="木木", agent_name="祁煜",
    )  # fmt: skip
    expected = seeded.prompt(
        resp, now=datetime.fromisoformat(now), user_name="木木", agent_name="祁煜"
    )
    assert fusion["prompt"] == expected and "豆包" in expected
    bad = {**body, "weights": {"kw": 0.9, "vec": 0.9, "time": 0, "strength": 0}}
    r = call(app, "POST", "/dashboard/api/explore", json=bad, headers=bearer("key-a"))
    assert r.status_code == 422 and "weights" in r.json()["error"]["message"]
    for now in ("0001-01-01T00:00:00", "2025-01-01T00:00:00+20:00"):  # a 500 before
        r = call(app, "POST", "/dashboard/api/explore", json={**body, "now": now},
                 headers=bearer("key-a"))  # fmt: skip
        assert r.status_code == 422 and r.json()["error"]["field"] == "now", r.text
    # An English query without chosen weights runs (and is shown) with the latin profile's.
    english = {"query": "how is the dog doing these days?", **A, "modes": ["fusion"]}
    r = call(app, "POST", "/dashboard/api/explore", json=english, headers=bearer("key-a"))
    (run,) = r.json()["runs"]
    assert run["profile"] == "latin"
    assert run["weights"] == QueryParams(**A).latin_weights.model_dump()
    assert run["response"]["additional_info"]["profile"] == "latin"
    assert fusion["profile"] == "default"  # chosen weights keep the default profile


def test_metrics_summary_counts_queries_and_stage_percentiles() -> None:
    """What the server's own Metrics recorded, summarised (the real /query → /metrics path is
    exercised by the browser test against a real server)."""
    pytest.importorskip("prometheus_client")
    from kemem_es.server.dashboard.summary import summarize
    from kemem_es.server.metrics import Metrics

    m = Metrics()
    empty = summarize(m.registry, 0.0)
    assert empty["enabled"] and empty["queries"] == 0 and empty["stages"] == []
    for ms in (2.0, 4.0, 30.0):
        m.request("/query", "POST", 200, ms / 1000)
        m.stages({"search_events": ms / 2, "tokenise": 0.2, "embed": 1.5, "total": ms})
    m.request("/query_simple", "POST", 503, 0.001)
    m.request("/query", "POST", 422, 0.001)
    m.request("/v1/memories", "GET", 500, 0.001)  # not a query
    m.degraded()
    out = summarize(m.registry, 0.0)
    assert out["queries"] == 5 and out["query_errors"] == 1 and out["query_rejected"] == 1
    assert out["requests"] == 6 and out["degraded"] == 1
    assert [s["stage"] for s in out["stages"]] == ["tokenise", "embed", "search_events", "total"]
    total = out["stages"][-1]
    assert total["count"] == 3 and total["mean_ms"] == pytest.approx(12.0)
    assert 2.5 <= total["p50_ms"] <= 5.0 <= 25.0 <= total["p99_ms"] <= 50.0  # bucket bounds


@pytest.mark.engine
def test_dashboard_over_async_kemem(seeded: Kemem) -> None:
    """The server's core may be an AsyncKemem: the dashboard awaits its verbs (one event loop,
    as under uvicorn: the async engine client is bound to it)."""
    from kemem_es import AsyncKemem

    akm = AsyncKemem(seeded.settings)
    akm.core.embedder = seeded.embedder
    app = create_app(akm, seeded.settings.model_copy(update={"server_api_keys": KEYS}))
    loop = asyncio.new_event_loop()

    async def go() -> tuple[Any, Any]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            overview = await c.get("/dashboard/api/overview", headers=bearer("key-a"))
            body = {"query": "豆包最近怎么样", **A, "score_threshold": 0.2}
            explore = await c.post("/dashboard/api/explore", json=body, headers=bearer("key-a"))
        await akm.aclose()
        return overview, explore

    try:
        overview, explore = loop.run_until_complete(go())
    finally:
        loop.close()
    assert overview.status_code == 200, overview.text
    assert overview.json()["stats"]["by_agent"] == {"agent_a": 4}
    assert explore.status_code == 200, explore.text
    top = explore.json()["runs"][0]["response"]["memory_events"][0]
    assert "豆包" in top["description"] and top["signals"]["kw"] > 0
