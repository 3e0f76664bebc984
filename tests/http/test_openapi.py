"""The HTTP API as a client generator reads it (docs/openapi.json, committed): typed answers,
the real error body for every status, method-like operation ids; and the behaviour that the
description promises (agent_id's default, ISO 8601 twins of the contract's times)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from kemem_es import Kemem
from kemem_es.server.openapi import current_schema, dumps

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMITTED = os.path.join(REPO, "docs", "openapi.json")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _ops(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(p, m, op) for p, ops in schema["paths"].items() for m, op in ops.items()]


def test_committed_openapi_json_is_current() -> None:
    """Regenerate after a deliberate API change:
    ``python -m kemem_es.server.openapi > docs/openapi.json``."""
    if os.environ.get("KEMEM_UPDATE_OPENAPI"):
        with open(COMMITTED, "w", encoding="utf-8") as f:
            f.write(dumps(current_schema()))
    with open(COMMITTED, encoding="utf-8") as f:
        committed = f.read()
    assert dumps(current_schema()) == committed, (
        "docs/openapi.json is stale: python -m kemem_es.server.openapi > docs/openapi.json"
    )


def test_every_operation_is_typed_and_named_like_a_method() -> None:
    schema = current_schema()
    ids = [op["operationId"] for _, _, op in _ops(schema)]
    assert len(ids) == len(set(ids))
    for name in ("search", "getMemory", "addMemories", "listMemories", "query", "updateMemory"):
        assert name in ids
    for path, method, op in _ops(schema):
        assert re.fullmatch(r"[a-z][A-Za-z0-9]*", op["operationId"]), (path, method)
        ok = op["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in ok, f"{method} {path}: its 200 answer is untyped: {ok}"


def test_every_error_status_is_the_real_error_body() -> None:
    schema = current_schema()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    body = schema["components"]["schemas"]["ErrorBody"]
    assert body["properties"]["error"]["$ref"].endswith("/ErrorDetail")
    detail = schema["components"]["schemas"]["ErrorDetail"]["properties"]
    assert {"code", "message", "field", "problems"} <= set(detail)
    for path, method, op in _ops(schema):
        statuses = {int(s) for s in op["responses"]}
        if path != "/healthz":
            assert {401, 429, 500} <= statuses or path == "/readyz", (path, statuses)
        if method in ("post", "patch"):
            assert {415, 422} <= statuses, (path, statuses)
        for status, answer in op["responses"].items():
            if int(status) < 400 or path == "/readyz":
                continue
            ref = answer["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorBody"), (path, status)
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_the_v23_answer_is_typed_with_its_chinese_keys() -> None:
    schemas = current_schema()["components"]["schemas"]
    info = schemas["AdditionalInfo"]["properties"]
    assert {"检索耗时", "分词", "给联想的基词", "扩展后联想词", "degraded"} <= set(info)
    event = schemas["EventHit"]["properties"]
    assert {"updatetime", "updatetime_iso", "created_at_iso", "log"} <= set(event)
    query = schemas["QueryRequest"]
    assert "agent_id" not in query.get("required", [])


@pytest.mark.engine
def test_query_defaults_agent_id_and_gives_iso_twins(kemem: Kemem) -> None:
    from test_server import client

    kemem.init()
    agent = kemem.settings.default_agent_id
    kemem.index_records(
        [{"agent_id": agent, "user_id": "u1", "id": "ev-1",
          "description": "木木带豆包去公园散步", "created_at": "2025-03-01T09:00:00+08:00"}],
        "events",
    )  # fmt: skip
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-*")
    c = client(kemem)
    body = {"query": "豆包去公园", "user_id": "u1", "score_threshold": 0.0}
    r = c.post("/query", json=body)
    assert r.status_code == 200, r.text
    hit = r.json()["memory_events"][0]
    assert hit["created_at"] == "2025-03-01 09:00:00"
    assert hit["created_at_iso"] == "2025-03-01T09:00:00+08:00"
    assert ISO.match(hit["updatetime_iso"])
    assert "signals" not in hit  # the contract has no null fields
    search = {"query": "豆包去公园", "user_id": "u1", "threshold": 0.0}
    found = c.post("/v1/memories/search", json=search).json()
    assert found["results"][0]["id"] == "ev-1" and found["results"][0]["kind"] == "events"
    assert found["memory_events"][0]["index"] == "ev-1"
    bad = c.post("/v1/memories/search", json={**search, "limit": 0})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
