"""``POST /query`` and ``POST /query_simple``: the seed service's request, answered with exactly
the v23 contract (``QueryResponse.to_contract()``)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import Field

from kemem_es.async_kemem import AsyncKemem
from kemem_es.contract.params import MAX_QUERY_CHARS, QueryParams
from kemem_es.contract.response import QueryResponse
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.errors import hide_engine

log = logging.getLogger("kemem_es.server")
router = APIRouter(tags=["query"])

DEGRADED_HEADER = "X-Kemem-Degraded"


class QueryRequest(QueryParams):
    """The seed's ``{query, limit, score_threshold}`` plus scope and every query knob of
    :class:`QueryParams` (``context``, ``now``, ``exclude_ids``, ``filters``, ``mode``, ...).
    An unknown field is a 422 naming it."""

    query: str = Field(
        max_length=MAX_QUERY_CHARS,
        description=f"the user's utterance (at most {MAX_QUERY_CHARS:,} characters)",
    )


async def _run(
    request: Request, response: Response, body: QueryRequest, access: Access
) -> QueryResponse:
    """The query; with degrade on (``KEMEM_SERVER_DEGRADE``, the default) an engine that is
    down or slow gives an empty answer marked degraded (and the header) instead of a 503."""
    access.check(body.agent_id)
    km: AsyncKemem = request.app.state.kemem
    options: dict[str, Any] = {
        name: getattr(body, name)
        for name in body.model_fields_set - {"query", "user_id", "agent_id"}
    }
    degrade = request.app.state.settings.server_degrade
    resp = await km.query(
        body.query, user_id=body.user_id, agent_id=body.agent_id, degrade=degrade, **options
    )
    if resp.additional_info.degraded:
        request.app.state.metrics.degraded()
        info = resp.additional_info  # the reason goes to chat clients: not where the engine is
        info.degraded_reason = hide_engine(info.degraded_reason or "", km.settings.url)
        # ``engine_unavailable``: nothing searched; ``index_missing``: answered from the rest
        searched = "search_events" in resp.additional_info.timings_ms
        code = "index_missing" if searched else "engine_unavailable"
        response.headers[DEGRADED_HEADER] = code
        # the reason goes to the caller, not the log: an engine's error text may quote input
        log.warning("query degraded (request %s)", request.state.request_id)
    else:
        request.app.state.metrics.stages(resp.additional_info.timings_ms)
    return resp


@router.post("/query", summary="Recall memories (the v23 response contract)")
async def query(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> dict[str, Any]:
    return (await _run(request, response, body, access)).to_contract()


@router.post("/query_simple", summary="Recall memories: only their texts")
async def query_simple(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> dict[str, Any]:
    return (await _run(request, response, body, access)).simple().model_dump()
