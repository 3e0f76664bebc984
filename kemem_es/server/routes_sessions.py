"""``POST /v1/context`` and ``/v1/sessions``: conversation memory over HTTP (docs/sessions.md).

Scope as in ``/v1/memories``: in the body for POSTs, as query parameters elsewhere; an omitted
``agent_id`` is the configured default agent, and a key serves only its own agents (403), so it
can never read another agent's session.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from kemem_es.async_kemem import AsyncKemem
from kemem_es.contract.context import Appended, ContextResult, DialogueTurn, SessionInfo
from kemem_es.contract.params import MAX_QUERY_CHARS, QueryParams
from kemem_es.server.auth import Access, authenticate

router = APIRouter(tags=["sessions"])

# What the context request says itself; every other field set is a recall option (QueryParams).
OWN = frozenset({"message", "session_id", "max_tokens", "user_id", "agent_id"})


class ContextRequest(QueryParams):
    """The current message, the scope and session, the budget; plus every recall option of
    :class:`QueryParams` (``limit``, ``score_threshold``, ``now``, ``filters``...)."""

    message: str = Field(max_length=MAX_QUERY_CHARS, description="the user's current message")
    agent_id: str | None = None  # type: ignore[assignment]
    session_id: str | None = None
    max_tokens: int | None = Field(None, ge=1, description="default KEMEM_SESSION_MAX_TOKENS")


class EndRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str
    agent_id: str | None = None


class SessionList(BaseModel):
    results: list[SessionInfo]


class MessageList(BaseModel):
    results: list[DialogueTurn]


class Deleted(BaseModel):
    deleted: int


def _km(request: Request) -> AsyncKemem:
    return request.app.state.kemem


def _agent(request: Request, access: Access, agent_id: str | None) -> str:
    return access.agent(agent_id, _km(request).settings.default_agent_id)


@router.post("/v1/context", summary="The memory context of a chat turn, within a token budget")
async def context(
    body: ContextRequest, request: Request, access: Access = Depends(authenticate)
) -> ContextResult:
    agent = _agent(request, access, body.agent_id)
    options: dict[str, Any] = {n: getattr(body, n) for n in body.model_fields_set - OWN}
    return await _km(request).context(
        body.message,
        user_id=body.user_id,
        agent_id=agent,
        session_id=body.session_id,
        max_tokens=body.max_tokens,
        **options,
    )


@router.get("/v1/sessions", summary="A user's sessions, most recently active first")
async def list_sessions(
    request: Request,
    user_id: str = Query(..., description="the user"),
    agent_id: str | None = Query(None, description="the agent (default: the default agent)"),
    limit: int = Query(100, ge=1, le=10_000),
    access: Access = Depends(authenticate),
) -> SessionList:
    agent = _agent(request, access, agent_id)
    found = await _km(request).list_sessions(user_id=user_id, agent_id=agent, limit=limit)
    return SessionList(results=found)


@router.get("/v1/sessions/{session_id}/messages", summary="A session's messages, in order")
async def messages(
    session_id: str,
    request: Request,
    user_id: str = Query(...),
    agent_id: str | None = Query(None),
    limit: int = Query(1000, ge=1, le=10_000),
    access: Access = Depends(authenticate),
) -> MessageList:
    agent = _agent(request, access, agent_id)
    km = _km(request)
    found = await km.session_messages(session_id, user_id=user_id, agent_id=agent, limit=limit)
    return MessageList(results=found)


@router.get("/v1/sessions/{session_id}/messages/{seq}", summary="One message by its number")
async def message(
    session_id: str,
    seq: int,
    request: Request,
    user_id: str = Query(...),
    agent_id: str | None = Query(None),
    access: Access = Depends(authenticate),
) -> DialogueTurn:
    agent = _agent(request, access, agent_id)
    return await _km(request).session_message(session_id, seq, user_id=user_id, agent_id=agent)


@router.post("/v1/sessions/{session_id}/end", summary="End a session: its window is extracted")
async def end(
    session_id: str, body: EndRequest, request: Request, access: Access = Depends(authenticate)
) -> Appended:
    agent = _agent(request, access, body.agent_id)
    return await _km(request).end_session(session_id, user_id=body.user_id, agent_id=agent)


@router.delete("/v1/sessions/{session_id}", summary="Delete a session's messages (with history)")
async def delete(
    session_id: str,
    request: Request,
    user_id: str = Query(...),
    agent_id: str | None = Query(None),
    forget: bool = Query(False, description="history keeps no text of it"),
    access: Access = Depends(authenticate),
) -> Deleted:
    agent = _agent(request, access, agent_id)
    km = _km(request)
    n = await km.delete_session(session_id, user_id=user_id, agent_id=agent, forget=forget)
    return Deleted(deleted=n)
