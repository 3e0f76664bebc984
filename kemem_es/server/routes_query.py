"""``POST /query`` and ``POST /query_simple``: the seed service's request, answered with exactly
the v23 contract (``QueryResponse.to_contract()``)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import Field

from kemem_es.engine.client import CLIENT_ERRORS, describe_client_error
from kemem_es.errors import EngineUnavailable
from kemem_es.kemem import Kemem
from kemem_es.search.params import QueryParams
from kemem_es.search.response import AdditionalInfo, QueryResponse
from kemem_es.server.auth import Access, authenticate

log = logging.getLogger("kemem_es.server")
router = APIRouter(tags=["query"])

DEGRADED_HEADER = "X-Kemem-Degraded"


class QueryRequest(QueryParams):
    """The seed's ``{query, limit, score_threshold}`` plus scope and every query knob of
    :class:`QueryParams` (``context``, ``now``, ``exclude_ids``, ``filters``, ``mode``, ...).
    An unknown field is a 422 naming it."""

    query: str = Field(description="the user's utterance")


def _run(request: Request, body: QueryRequest, access: Access) -> tuple[QueryResponse, str | None]:
    """The query, or (when the engine is down and degrade mode is on) an empty answer and why."""
    access.check(body.agent_id)
    km: Kemem = request.app.state.kemem
    options: dict[str, Any] = {
        name: getattr(body, name)
        for name in body.model_fields_set - {"query", "user_id", "agent_id"}
    }
    try:
        try:
            resp = km.query(body.query, user_id=body.user_id, agent_id=body.agent_id, **options)
        except CLIENT_ERRORS as exc:  # e.g. the reinforcer's first write: still the engine
            raise EngineUnavailable(f"search engine: {describe_client_error(exc)}") from exc
    except EngineUnavailable as exc:
        if not request.app.state.settings.server_degrade:
            raise
        reason = str(exc)
        request.app.state.metrics.degraded()
        rid = request.state.request_id  # the reason goes to the caller, not the log: an
        # engine's error text may quote the query
        log.warning("query degraded: engine or indices unavailable (request %s)", rid)
        info = AdditionalInfo(
            timings_ms={}, query=body.query, tokens=[], base_words=[], expanded_words=[],
            mode=body.mode,
        )  # fmt: skip
        return QueryResponse(additional_info=info), reason
    request.app.state.metrics.stages(resp.additional_info.timings_ms)
    return resp, None


@router.post("/query", summary="Recall memories (the v23 response contract)")
def query(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> dict[str, Any]:
    resp, degraded = _run(request, body, access)
    out = resp.to_contract()
    if degraded is not None:
        out["additional_info"]["degraded"] = True
        out["additional_info"]["degraded_reason"] = degraded
        response.headers[DEGRADED_HEADER] = "engine_unavailable"
    return out


@router.post("/query_simple", summary="Recall memories: only their texts")
def query_simple(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> dict[str, Any]:
    resp, degraded = _run(request, body, access)
    if degraded is not None:
        response.headers[DEGRADED_HEADER] = "engine_unavailable"
    return {
        "memory_events": [e.description for e in resp.memory_events],
        "memory_entities": [e.description for e in resp.memory_entities],
    }
