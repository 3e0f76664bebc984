"""The proxy's routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` and
``GET /v1/usage``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from kemem_es.errors import InvalidInput, KememError
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.errors import ApiError, public_reason
from kemem_es.server.proxy.memory import (
    DEFAULT_SESSION,
    Turn,
    inject_chat,
    inject_instructions,
    recall,
    text_of,
    turn_of,
)
from kemem_es.server.proxy.models import (
    PROXY_ERRORS,
    ChatCompletionRequest,
    ProxyAnswer,
    ResponsesRequest,
    UsageList,
    UsageRow,
)
from kemem_es.server.proxy.state import state
from kemem_es.server.proxy.upstream import forward

router = APIRouter(tags=["proxy"])
RESPONSES_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "not_found: previous_response_id is no response of this agent and user"},
    503: {
        "description": "engine_unavailable: previous_response_id cannot be checked without the "
        "engine; proxy_not_configured: no KEMEM_PROXY_UPSTREAM_URL"
    },
}


@router.post(
    "/v1/chat/completions",
    summary="OpenAI chat completions with memory (the proxy)",
    response_model=ProxyAnswer,
    responses=PROXY_ERRORS,
)
async def chat_completions(
    given: ChatCompletionRequest, request: Request, access: Access = Depends(authenticate)
) -> Response:
    body = given.model_dump(exclude_unset=True)
    turn = turn_of(request, body, access)
    messages = body["messages"]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is not None:
        turn.message = text_of(messages[last].get("content"))
        earlier = [
            {"role": m.get("role"), "content": text_of(m.get("content"))}
            for m in messages[:last]
            if m.get("role") in ("user", "assistant")
        ]
        await recall(request, turn, earlier)
        body["messages"] = inject_chat(request, messages, turn)
    return await forward(request, body, "chat", turn)


async def _chain(request: Request, turn: Turn, previous: str | None) -> None:
    """The session of a Responses request: the one ``previous_response_id`` answered in
    (this agent's and user's only: 404 otherwise), or a new one; ``session_id`` given wins."""
    session: str | None = None
    if previous is not None:
        km = request.app.state.kemem
        lookup = state(request).chains.session_of(km, previous, turn.agent, turn.user)
        try:  # one read by id: the chat's deadline, and a second for the round trip
            session = await asyncio.wait_for(lookup, km.settings.query_timeout_s + 1)
        except InvalidInput:  # an id the store's rule refuses: 422 (the app's handler)
            raise
        except (KememError, asyncio.TimeoutError) as exc:  # whose it is cannot be told
            why = public_reason(exc, km.settings.url) if isinstance(exc, KememError) else "slow"
            raise ApiError(
                503, "engine_unavailable",
                f"previous_response_id: cannot be checked while the engine is unavailable ({why})",
                field="previous_response_id",
            ) from None  # fmt: skip
        if session is None:
            raise ApiError(
                404, "not_found",
                "previous_response_id: no response of this agent and user has that id",
                field="previous_response_id",
            )  # fmt: skip
    if turn.session == DEFAULT_SESSION:  # none given: the chain of responses is the session
        turn.session = session or f"resp-{uuid.uuid4().hex[:16]}"
        turn.info.session_id = turn.session


def _said(given: str | list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A Responses ``input``: the last user message and the turns before it."""
    if isinstance(given, str):
        return given, []
    items = [i for i in given if isinstance(i, dict) and i.get("role") in ("user", "assistant")]
    users = [i for i, item in enumerate(items) if item.get("role") == "user"]
    if not users:
        return "", [{"role": i["role"], "content": text_of(i.get("content"))} for i in items]
    cut = users[-1]
    earlier = [{"role": i["role"], "content": text_of(i.get("content"))} for i in items[:cut]]
    return text_of(items[cut].get("content")), earlier


@router.post(
    "/v1/responses",
    summary="OpenAI Responses with memory (the proxy; previous_response_id keeps the session)",
    response_model=ProxyAnswer,
    responses={**PROXY_ERRORS, **RESPONSES_ERRORS},
)
async def responses(
    given: ResponsesRequest, request: Request, access: Access = Depends(authenticate)
) -> Response:
    body = given.model_dump(exclude_unset=True)
    turn = turn_of(request, body, access)
    await _chain(request, turn, body.get("previous_response_id"))
    turn.message, earlier = _said(body["input"])
    await recall(request, turn, earlier)
    inject_instructions(request, body, turn)
    return await forward(request, body, "responses", turn)


@router.get(
    "/v1/usage",
    summary="The proxy's token usage per agent and user (kept in the store across restarts)",
)
async def proxy_usage(
    request: Request,
    agent_id: str | None = None,
    user_id: str | None = None,
    access: Access = Depends(authenticate),
) -> UsageList:
    if agent_id is not None:
        access.check(agent_id)
    km = request.app.state.kemem
    rows, degraded = await state(request).usage.rows(km, access.agents, agent_id, user_id)
    return UsageList(results=[UsageRow(**r) for r in rows], degraded=degraded)
