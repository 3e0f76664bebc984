"""``/v1/memories``: the Memory API over HTTP.

Scope: in the JSON body for ``POST /v1/memories`` (add), as query parameters (``user_id``,
``agent_id``, ``db``) everywhere else. An omitted ``agent_id`` is the configured default agent.
``filters`` on ``GET``/``DELETE /v1/memories`` is the Memory API's filter object as a JSON string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Header, Query, Request
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator

from kemem_es.async_kemem import AsyncKemem
from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.errors import ApiError
from kemem_es.store.history import LIMIT as HISTORY_LIMIT
from kemem_es.store.history import LIMIT_MAX as HISTORY_LIMIT_MAX

router = APIRouter(prefix="/v1/memories", tags=["memories"])

MAX_LIST = 1000
MAX_FILTER_DEPTH = 64  # JSON levels: far beyond any real filter, far below the recursion limit
_BOOL = TypeAdapter(bool)

UserId = Query(None, description="the user (required for the user database)")
AgentId = Query(None, description="the agent (default: KEMEM_DEFAULT_AGENT_ID)")
Db = Query("user", description="user or official")
KindQ = Query(None, description="events or entities (default: both / look in both)")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str


class AddRequest(BaseModel):
    """Exactly one of ``text``, ``messages`` or ``record``, plus the scope."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    messages: list[Message] | None = None
    record: dict[str, Any] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    db: Literal["user", "official"] = "user"
    kind: Literal["events", "entities"] = "events"
    session_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool | Literal["background"] = False
    refresh: bool = False
    dedup: bool = True
    user_name: str | None = None
    agent_name: str | None = None
    scene_change: bool = False
    dialogue: bool = True

    @model_validator(mode="after")
    def _one_input(self) -> AddRequest:
        given = [n for n in ("text", "messages", "record") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of text, messages or record")
        return self


class AddResponse(BaseModel):
    results: list[AddResult]


class DeleteAllResponse(BaseModel):
    deleted: int


class HistoryResponse(BaseModel):
    results: list[HistoryEntry]


def _km(request: Request) -> AsyncKemem:
    return request.app.state.kemem


def _agent(request: Request, access: Access, agent_id: str | None) -> str:
    """The call's agent (the default when omitted), checked against the key."""
    return access.agent(agent_id, _km(request).settings.default_agent_id)


@dataclass(frozen=True)
class ScopeArgs:
    """The scope of a request from its query parameters, already checked against its key."""

    user_id: str | None
    agent_id: str
    db: Literal["user", "official"]

    def kw(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "agent_id": self.agent_id, "db": self.db}


async def scope_args(  # async: no thread-pool hop (see authenticate)
    request: Request,
    user_id: str | None = UserId,
    agent_id: str | None = AgentId,
    db: Literal["user", "official"] = Db,
    access: Access = Depends(authenticate),
) -> ScopeArgs:
    return ScopeArgs(user_id, _agent(request, access, agent_id), db)


Scoped = Depends(scope_args)


def _depth(value: Any) -> int:
    """How deeply JSON containers nest in ``value`` (iterative: no recursion to overflow)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def _filters(raw: str | None) -> dict[str, Any] | None:
    """The ``filters`` parameter as an object; 422 naming it for what is not one, including
    JSON nested so deeply that parsing or compiling it would exhaust the recursion limit."""
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ApiError(422, "invalid_input", "filters: nested too deeply", "filters") from None
    except ValueError:
        raise ApiError(422, "invalid_input", "filters: not valid JSON", field="filters") from None
    if not isinstance(value, dict):
        raise ApiError(422, "invalid_input", "filters: must be a JSON object", field="filters")
    if _depth(value) > MAX_FILTER_DEPTH:
        raise ApiError(422, "invalid_input", "filters: nested too deeply", field="filters")
    return value


@router.post(
    "", operation_id="addMemories", summary="Add a memory (text, chat messages or a record)"
)
async def add(
    body: AddRequest, request: Request, access: Access = Depends(authenticate)
) -> AddResponse:
    agent = _agent(request, access, body.agent_id)
    data: Any = body.text
    if body.messages is not None:
        data = [m.model_dump() for m in body.messages]
    elif body.record is not None:
        data = body.record
    results = await _km(request).add(
        data,
        user_id=body.user_id,
        agent_id=agent,
        session_id=body.session_id,
        metadata=body.metadata,
        kind=body.kind,
        db=body.db,
        infer=body.infer,
        refresh=body.refresh,
        dedup=body.dedup,
        user_name=body.user_name,
        agent_name=body.agent_name,
        scene_change=body.scene_change,
        dialogue=body.dialogue,
    )
    return AddResponse(results=results)


@router.get("", summary="List a scope's memories, newest first (paged)")
async def list_memories(
    request: Request,
    scope: ScopeArgs = Scoped,
    kind: Literal["events", "entities"] | None = KindQ,
    filters: str | None = Query(None, description='JSON filter object, e.g. {"place": "家"}'),
    limit: int = Query(100, ge=1, le=MAX_LIST),
    cursor: str | None = Query(None, description="next_cursor of the previous page"),
) -> MemoryPage:
    return await _km(request).get_all(
        **scope.kw(),
        filters=_filters(filters),
        kind=kind,
        limit=limit,
        cursor=cursor,
    )


@router.delete(
    "",
    operation_id="deleteAllMemories",
    summary="Delete every memory of a scope (needs confirm=true)",
)
async def delete_all(
    request: Request,
    scope: ScopeArgs = Scoped,
    kind: Literal["events", "entities"] | None = KindQ,
    filters: str | None = Query(None, description="JSON filter object"),
    forget: bool = Query(False, description="also strip this scope's history of its texts"),
    confirm: bool = Query(False, description="true: really delete (else 400 with the count)"),
    x_confirm_delete: str | None = Header(
        None, description="the same as confirm (the same values: true, 1, yes, on...)"
    ),
) -> DeleteAllResponse:
    km, flt = _km(request), _filters(filters)
    confirmed = confirm or _header_bool(x_confirm_delete, "X-Confirm-Delete")
    if not confirmed:
        n = await km.count(**scope.kw(), filters=flt, kind=kind)
        raise ApiError(
            400,
            "confirmation_required",
            f"this would delete {n} memories; repeat with confirm=true "
            "(or the header X-Confirm-Delete: true)",
            field="confirm",
            extra={"would_delete": n},
        )
    n = await km.delete_all(**scope.kw(), filters=flt, kind=kind, forget=forget)
    return DeleteAllResponse(deleted=n)


def _header_bool(raw: str | None, name: str) -> bool:
    """A yes/no header read like a boolean query parameter, so ``confirm=1`` and
    ``X-Confirm-Delete: 1`` mean the same; 422 naming the header for anything else."""
    if raw is None:
        return False
    try:
        return _BOOL.validate_python(raw.strip())
    except ValidationError:
        raise ApiError(
            422, "invalid_input", f"{name}: not a boolean (true/false, 1/0, yes/no)", name
        ) from None


@router.get("/{memory_id}", summary="One memory by id")
async def get_memory(
    memory_id: str,
    request: Request,
    scope: ScopeArgs = Scoped,
    kind: Literal["events", "entities"] | None = KindQ,
) -> Memory:
    return await _km(request).get(memory_id, **scope.kw(), kind=kind)


@router.patch("/{memory_id}", summary="Change some fields of a memory (partial update)")
async def update_memory(
    memory_id: str,
    request: Request,
    changes: dict[str, Any] = Body(
        ...,
        description='the fields to change, e.g. {"description": "…", "place": "家"} '
        '("text" is the description)',
    ),
    scope: ScopeArgs = Scoped,
    kind: Literal["events", "entities"] | None = KindQ,
    refresh: bool = Query(False),
) -> AddResult:
    if "text" in changes:
        if "description" in changes:
            raise ApiError(422, "invalid_input", "text: give text or description", field="text")
        changes = {("description" if k == "text" else k): v for k, v in changes.items()}
    return await _km(request).update(memory_id, changes, **scope.kw(), kind=kind, refresh=refresh)


@router.delete("/{memory_id}", summary="Delete one memory (recorded in its history)")
async def delete_memory(
    memory_id: str,
    request: Request,
    scope: ScopeArgs = Scoped,
    kind: Literal["events", "entities"] | None = KindQ,
    refresh: bool = Query(False),
) -> Memory:
    return await _km(request).delete(memory_id, **scope.kw(), kind=kind, refresh=refresh)


@router.get(
    "/{memory_id}/history",
    operation_id="getMemoryHistory",
    summary="Every recorded change of a memory, oldest first",
)
async def history(
    memory_id: str,
    request: Request,
    scope: ScopeArgs = Scoped,
    limit: int = Query(
        HISTORY_LIMIT, ge=1, le=HISTORY_LIMIT_MAX, description="at most this many, the newest"
    ),
) -> HistoryResponse:
    entries = await _km(request).history(memory_id, **scope.kw(), limit=limit)
    return HistoryResponse(results=entries)
