"""``POST /query`` and ``POST /query_simple``: the seed service's request, answered with exactly
the v23 contract (``QueryResponse.to_contract()``)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from kemem_es.async_kemem import AsyncKemem
from kemem_es.contract.params import MAX_QUERY_CHARS, QueryParams
from kemem_es.contract.response import (
    AdditionalInfo,
    EntityHit,
    EventHit,
    QueryResponse,
    SimpleResponse,
)
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
    # Optional here, as on every route: the configured default agent when omitted.
    agent_id: str | None = Field(  # type: ignore[assignment]
        None, min_length=1, description="the agent (default: KEMEM_DEFAULT_AGENT_ID)"
    )


class SearchRequest(QueryRequest):
    """``/query``'s request with the Memory API's names: ``threshold`` (the score threshold)
    and ``session_id`` (only that session's memories)."""

    threshold: float | None = Field(None, ge=0, le=1, description="the score threshold")
    session_id: str | None = Field(None, description="only memories of this session")


class SearchHit(BaseModel):
    """One recalled memory, events then entities (what mem0-style chat loops read)."""

    id: str | None
    memory: str
    score: float
    kind: Literal["events", "entities"]


class SearchResponse(BaseModel):
    """The recalled memories as ``results``, and the whole v23 answer beside them."""

    results: list[SearchHit]
    memory_events: list[EventHit]
    memory_entities: list[EntityHit]
    additional_info: AdditionalInfo


async def _run(
    request: Request, response: Response, body: QueryRequest, access: Access
) -> QueryResponse:
    """The query; with degrade on (``KEMEM_SERVER_DEGRADE``, the default) an engine that is
    down or slow gives an empty answer marked degraded (and the header) instead of a 503."""
    km: AsyncKemem = request.app.state.kemem
    agent = access.agent(body.agent_id, km.settings.default_agent_id)
    special = {"query", "user_id", "agent_id", "threshold", "session_id"}
    options: dict[str, Any] = {
        name: getattr(body, name) for name in body.model_fields_set - special
    }
    degrade = request.app.state.settings.server_degrade
    if isinstance(body, SearchRequest):
        resp = await km.search(
            body.query,
            user_id=body.user_id,
            agent_id=agent,
            threshold=body.threshold,
            session_id=body.session_id,
            degrade=degrade,
            **options,
        )
    else:
        resp = await km.query(
            body.query, user_id=body.user_id, agent_id=agent, degrade=degrade, **options
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


# The v23 answer as it always was: Chinese keys (检索耗时, 分词, ...), no null fields.
@router.post(
    "/query",
    summary="Recall memories (the v23 response contract)",
    response_model=QueryResponse,
    response_model_exclude_none=True,
)
async def query(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> Any:
    resp = await _run(request, response, body, access)
    return contract_json(resp, response)


def contract_json(resp: QueryResponse, response: Response) -> Response:
    """The v23 answer as JSON, written by pydantic in one step: the same JSON as returning
    ``resp.to_contract()`` through ``response_model`` (which validates that dict back into a
    QueryResponse, dumps it again and encodes it with ``json.dumps``: ~0.3 ms a query, issue
    42). The degraded header set on ``response`` goes with it."""
    out = Response(
        resp.model_dump_json(by_alias=True, exclude_none=True), media_type="application/json"
    )
    degraded = response.headers.get(DEGRADED_HEADER)
    if degraded is not None:
        out.headers[DEGRADED_HEADER] = degraded
    return out


@router.post("/query_simple", summary="Recall memories: only their texts")
async def query_simple(
    body: QueryRequest, request: Request, response: Response, access: Access = Depends(authenticate)
) -> SimpleResponse:
    return (await _run(request, response, body, access)).simple()


@router.post(
    "/v1/memories/search",
    tags=["memories"],
    summary="Recall memories for a chat turn (the Memory API's search)",
    response_model=SearchResponse,
    response_model_exclude_none=True,
)
async def search(
    body: SearchRequest,
    request: Request,
    response: Response,
    access: Access = Depends(authenticate),
) -> Any:
    resp = await _run(request, response, body, access)
    return {"results": resp.results, **resp.to_contract()}
