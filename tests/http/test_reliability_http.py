"""Reliability round 3 (issue 40), item 4: a key that serves some agents does not see the
server-wide traffic (the /metrics counters and the dashboard's live panel are an operator's)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from test_server import Client, bearer, error_of

from kemem_es import AsyncKemem
from kemem_es.config import get_settings
from kemem_es.server import create_app

KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"], "key-root": ["*"]}


def test_a_key_of_some_agents_does_not_see_server_wide_metrics() -> None:
    settings = get_settings(server_api_keys=KEYS)
    c = Client(create_app(AsyncKemem(settings), settings))
    for _ in range(3):  # some traffic of agent_b's key
        c.get("/v1/memories", params={"agent_id": "agent_b"}, headers=bearer("key-b"))
    for key in ("key-a", "key-b"):
        assert error_of(c.get("/metrics", headers=bearer(key)), 403)["code"] == "forbidden"
        live = c.get("/dashboard/api/metrics", headers=bearer(key)).json()
        assert live["hidden"] is True and "queries" not in live and "requests" not in live
    root = c.get("/metrics", headers=bearer("key-root"))
    assert root.status_code == 200 and "kemem_http_requests_total" in root.text
    live = c.get("/dashboard/api/metrics", headers=bearer("key-root")).json()
    assert live["enabled"] is True and live["requests"] >= 3
