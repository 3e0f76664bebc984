"""``/dashboard``: one server-rendered page plus a small script, and the JSON it reads.

No front-end build: the page is plain HTML and one hand-written script that builds every node
with ``textContent`` (never ``innerHTML`` with data), so memory texts cannot become markup; a
strict Content-Security-Policy (scripts from this server only, no inline script) backs that up.
The page itself holds no data and needs no key; everything it shows comes from the JSON
endpoints below (and the Memory API), which take the same ``Authorization: Bearer`` key as every
other route and see only that key's agents.

The JSON endpoints await the server's shared :class:`~kemem_es.async_kemem.AsyncKemem`.
Explorer queries are an operator looking, not a user recalling: they do not reinforce.
"""

from __future__ import annotations

import html
import time
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kemem_es import __version__
from kemem_es.async_kemem import AsyncKemem
from kemem_es.contract.params import (
    MAX_CONTEXT_CHARS,
    MAX_QUERY_CHARS,
    Mode,
    QueryParams,
    Weights,
)
from kemem_es.errors import KememError, invalid_options
from kemem_es.models import Time
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.dashboard.summary import summarize
from kemem_es.server.errors import ApiError, public_reason
from kemem_es.server.metrics import METRICS_OPERATORS_ONLY

router = APIRouter(prefix="/dashboard", include_in_schema=False)

_STARTED = time.time()
_PACKAGE = "kemem_es.server.dashboard"
STATIC = {
    "dashboard.js": "text/javascript",
    "sessions.js": "text/javascript",
    "usage.js": "text/javascript",
    "dashboard.css": "text/css",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MODES: tuple[str, ...] = ("fusion", "bm25", "vector", "rrf", "two_stage")


@cache
def _asset(name: str) -> str:
    return (resources.files(_PACKAGE) / name).read_text(encoding="utf-8")


def _km(request: Request) -> AsyncKemem:
    return request.app.state.kemem


@router.get("", response_class=HTMLResponse)
def page(request: Request) -> HTMLResponse:
    """The page: static markup with the server's defaults filled in (escaped)."""
    defaults = QueryParams.model_fields
    weights = Weights()
    values = {
        "version": __version__,
        "default_agent": _km(request).settings.default_agent_id,
        "keys": "on" if request.app.state.keyring.enabled else "off",
        "w_kw": weights.kw,
        "w_vec": weights.vec,
        "w_time": weights.time,
        "w_strength": weights.strength,
        "threshold": defaults["score_threshold"].default,
        "limit": defaults["limit"].default,
        "max_query": MAX_QUERY_CHARS,
        "max_context": MAX_CONTEXT_CHARS,
    }
    text = Template(_asset("page.html")).substitute(
        {k: html.escape(str(v), quote=True) for k, v in values.items()}
    )
    return HTMLResponse(text, headers=SECURITY_HEADERS)


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise ApiError(404, "not_found", "no such file")
    return Response(_asset(f"static/{name}"), media_type=STATIC[name], headers=SECURITY_HEADERS)


# -- JSON for the page ---------------------------------------------------------------------
@router.get("/api/overview")
async def overview(request: Request, access: Access = Depends(authenticate)) -> dict[str, Any]:
    """Memory statistics within the key's agents, engine health, the server's version."""
    km = _km(request)
    try:
        stats = await km.stats(agents=access.agents)
    except KememError as exc:  # an engine that cannot be reached is a state to show, not a 503
        reason = public_reason(exc, km.settings.url)
        engine: dict[str, Any] = {"ok": False, "reason": reason}
        data = None
    else:
        data = stats.model_dump()
        engine = {"ok": True, **data.pop("engine")}
    return {
        "server": {
            "version": __version__,
            "index_prefix": km.settings.index_prefix,
            "agents": None if access.agents is None else sorted(access.agents),
        },
        "engine": engine,
        "stats": data,
    }


@router.get("/api/metrics")
async def metrics(request: Request, access: Access = Depends(authenticate)) -> dict[str, Any]:
    """The server's request and per-stage counters (cumulative; the page derives rates); to
    an operator key only (see ``metrics.METRICS_OPERATORS_ONLY``)."""
    if access.agents is not None:
        return {"enabled": False, "hidden": True, "reason": METRICS_OPERATORS_ONLY}
    return summarize(request.app.state.metrics.read_registry(), _STARTED)


class ExploreRequest(BaseModel):
    """One utterance, run in one or two modes with the explain option on."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)  # as /query's
    user_id: str = Field(min_length=1)
    agent_id: str = Field(min_length=1)
    context: str = Field("", max_length=MAX_CONTEXT_CHARS)
    modes: list[Mode] = Field(default=["fusion"], min_length=1, max_length=2)  # copied per request
    weights: Weights | None = None
    score_threshold: float | None = Field(None, ge=0, le=1)
    now: Time | None = None  # as in /query (the records' time rule)
    limit: int = Field(10, ge=1, le=50)
    user_name: str | None = Field(None, max_length=64)
    agent_name: str | None = Field(None, max_length=64)


def mode_weights(mode: str, weights: Weights) -> dict[str, float] | None:
    """What a mode's score is a weighted sum of (None: rrf ranks, it does not add signals).
    Mirrors the searcher's choice per mode."""
    if mode == "bm25":
        return {"kw": 1.0}
    if mode == "vector":
        return {"vec": 1.0}
    if mode == "rrf":
        return None
    return weights.model_dump()


@router.post("/api/explore")
async def explore(
    body: ExploreRequest, request: Request, access: Access = Depends(authenticate)
) -> dict[str, Any]:
    """Each mode's full answer with per-hit signals, the weights and threshold it used, and the
    prompt text exactly as ``Kemem.prompt`` renders it for the chat. They run like the chat's
    queries but do not reinforce what they return (nor mark the user active)."""
    access.check(body.agent_id)
    km = _km(request)
    options: dict[str, Any] = {"context": body.context, "limit": body.limit, "explain": True}
    if body.weights is not None:
        options["weights"] = body.weights
    if body.score_threshold is not None:
        options["score_threshold"] = body.score_threshold
    if body.now is not None:
        options["now"] = body.now
    for name in ("user_name", "agent_name"):
        if getattr(body, name):
            options[name] = getattr(body, name)
    try:
        used = QueryParams(user_id=body.user_id, agent_id=body.agent_id, **options)
    except ValidationError as exc:  # what /query answers with 422 is a 422 here too
        raise invalid_options(exc) from None
    runs = []
    for mode in dict.fromkeys(body.modes):  # the same mode twice is one run
        resp = await km.query(
            body.query, user_id=body.user_id, agent_id=body.agent_id, mode=mode,
            reinforce=False, **options,
        )  # fmt: skip
        prompt = km.prompt(resp, now=body.now, user_name=body.user_name, agent_name=body.agent_name)
        # a latin-script query runs with latin_weights unless the caller chose weights
        latin = resp.additional_info.profile == "latin"
        runs.append(
            {
                "mode": mode,
                "profile": resp.additional_info.profile,
                "weights": mode_weights(mode, used.latin_weights if latin else used.weights),
                "score_threshold": used.score_threshold,
                "response": resp.to_contract(),
                "prompt": prompt,
            }
        )
    return {"runs": runs}
