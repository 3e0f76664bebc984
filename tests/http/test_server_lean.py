"""The server's lean hot path (issue 42): the request log as plain ASGI, the key check and
scope dependencies without a thread-pool hop, and /query's answer written by pydantic in one
step — each giving the same answers, headers and log lines as before."""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from test_server import KEYS, A, bearer, client, error_of, unreachable

from kemem_es.contract.response import (
    AdditionalInfo,
    EntityHit,
    EventHit,
    QueryResponse,
)
from kemem_es.server.auth import authenticate
from kemem_es.server.routes_memories import scope_args
from kemem_es.server.routes_query import DEGRADED_HEADER, contract_json


def fastapi_json(resp: QueryResponse) -> bytes:
    """What ``response_model=QueryResponse`` made of ``resp.to_contract()``: the dict validated
    back into the model, dumped in JSON mode and encoded by Starlette's JSONResponse."""
    from fastapi.responses import JSONResponse
    from pydantic import TypeAdapter

    again = TypeAdapter(QueryResponse).validate_python(resp.to_contract())
    content = again.model_dump(mode="json", by_alias=True, exclude_none=True)
    return bytes(JSONResponse(content).body)


def sample() -> QueryResponse:
    event = EventHit.model_validate(
        {"id": 0, "score": 0.8693, "index": "ev-1", "db": "user",
         "description": "用户养了柯基“豆包”", "updatetime": "2025-03-01 09:00:00",
         "created_at": "2025-03-01T01:00:00Z"}
    )  # fmt: skip
    entity = EntityHit.model_validate(
        {"id": 0, "score": 0.5, "index": {"index": "en-1"}, "description": 'a "quoted" \\ text',
         "entity_name": "豆包", "entity_type": "具体实体",
         "kind": "特殊实体属性", "updatetime": "2025-03-01 09:00:00"}
    )  # fmt: skip
    info = AdditionalInfo(
        timings_ms={"embed": 3.25, "total": 12.001}, query="豆包最近怎么样", tokens=["豆包"],
        base_words=["豆包"], expanded_words=[{"柯基": 1}], mode="fusion",
    )  # fmt: skip
    return QueryResponse(memory_events=[event], memory_entities=[entity], additional_info=info)


def test_query_answer_is_the_json_the_response_model_gave() -> None:
    from fastapi import Response

    for resp in (sample(), QueryResponse(additional_info=sample().additional_info)):
        out = contract_json(resp, Response())
        assert bytes(out.body) == fastapi_json(resp)
        assert json.loads(out.body) == resp.to_contract()
        assert out.media_type == "application/json" and DEGRADED_HEADER not in out.headers


def test_dependencies_need_no_thread_hop() -> None:
    assert inspect.iscoroutinefunction(authenticate)
    assert inspect.iscoroutinefunction(scope_args)


def test_degraded_query_keeps_its_header_and_request_id() -> None:
    c = client(unreachable())
    r = c.post("/query", json={"query": "豆包最近怎么样", **A}, headers={"X-Request-ID": "rid-1"})
    assert r.status_code == 200, r.text
    assert r.headers[DEGRADED_HEADER] == "engine_unavailable"
    assert r.headers["X-Request-ID"] == "rid-1"
    assert r.headers["content-type"] == "application/json"
    assert r.json()["additional_info"]["degraded"] is True


def test_every_answer_has_one_request_id_and_one_log_line(caplog: Any) -> None:
    c = client(unreachable(), server_api_keys=KEYS)
    with caplog.at_level(logging.INFO, logger="kemem_es.server"):
        refused = c.post("/query", json={"query": "秘密", **A})  # no key: 401 at the door
        wrong_type = c.post(
            "/query", content=b"{}", headers={**bearer("key-a"), "content-type": "text/plain"}
        )
        missing = c.get("/nowhere", headers={**bearer("key-a"), "X-Request-ID": "bad id!"})
    error_of(refused, 401)
    error_of(wrong_type, 415)
    error_of(missing, 404)
    ids = [r.headers.get_list("X-Request-ID") for r in (refused, wrong_type, missing)]
    assert all(len(i) == 1 and len(i[0]) == 32 for i in ids), ids  # "bad id!" replaced
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("request ")]
    assert len(lines) == 3, lines
    for r, line in zip((refused, wrong_type, missing), lines, strict=True):
        assert f"status={r.status_code}" in line and r.headers["X-Request-ID"] in line
        assert "path=(unmatched)" in line
    assert "秘密" not in "\n".join(lines) and "key-a" not in "\n".join(lines)


def test_request_metrics_counted_by_route() -> None:
    c = client(unreachable())
    c.post("/query", json={"query": "豆包", **A})
    registry = c.app.state.metrics.registry
    if registry is None:
        pytest.skip("prometheus_client not installed")
    got = registry.get_sample_value(
        "kemem_http_requests_total", {"route": "/query", "method": "POST", "status": "200"}
    )
    assert got == 1.0
