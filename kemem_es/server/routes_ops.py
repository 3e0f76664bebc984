"""The operations endpoints: ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from kemem_es.async_kemem import AsyncKemem
from kemem_es.config import Settings
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.errors import error_response, public_reason
from kemem_es.server.metrics import METRICS_OPERATORS_ONLY, Metrics


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """``ready`` with the engine's dialect and version, or ``unavailable`` (503) and why."""

    status: Literal["ready", "unavailable"]
    engine: str | None = None
    version: str | None = None
    reason: str | None = None


def install(app: FastAPI, km: AsyncKemem, cfg: Settings) -> None:
    """``/healthz`` (the process), ``/readyz`` (the engine and the indices, within the chat
    deadline), ``/metrics`` (Prometheus, for a key of all agents)."""

    # HEAD too (load balancers and uptime checks probe with it), kept out of the schema: one
    # operation per path there, not two with the same id.
    @app.get("/healthz", tags=["ops"], summary="The process is up (no auth, no engine call)")
    @app.head("/healthz", include_in_schema=False)
    def healthz() -> Health:
        return Health(status="ok")

    @app.get(
        "/readyz",
        tags=["ops"],
        summary="The engine answers and the indices exist",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "not ready: reason says why"}},
    )
    @app.head("/readyz", include_in_schema=False)
    async def readyz(request: Request, _: Access = Depends(authenticate)) -> Response:
        unusable = getattr(app.state, "unusable", None)
        if unusable:  # a start-up failure no engine can cure (a bad KEMEM_* file)
            return JSONResponse({"status": "unavailable", "reason": unusable}, 503)
        try:  # within the chat deadline: a probe waits a second or so, not the 30 s admin one
            state = await asyncio.wait_for(km.readiness(), timeout=cfg.query_timeout_s)
        except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
            reason = f"the engine did not answer within {cfg.query_timeout_s:g} s"
            return JSONResponse({"status": "unavailable", "reason": reason}, 503)
        except Exception as exc:  # any failure to reach the engine is "not ready"
            reason = public_reason(exc, km.settings.url)
            return JSONResponse({"status": "unavailable", "reason": reason}, 503)
        if state["missing"]:
            reason = f"indices missing: {', '.join(state['missing'])} (run `kemem-es init`)"
            return JSONResponse({"status": "unavailable", "reason": reason}, 503)
        ready = {"status": "ready", "engine": state["engine"], "version": state["version"]}
        return JSONResponse(ready)

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics", include_in_schema=False)
    def metrics(request: Request, access: Access = Depends(authenticate)) -> Response:
        m: Metrics = app.state.metrics
        if access.agents is not None:  # server-wide numbers: not for a key of some agents
            return error_response(403, "forbidden", METRICS_OPERATORS_ONLY)
        if not m.enabled:
            return error_response(404, "not_found", "metrics need prometheus_client installed")
        data, ctype = m.render()
        return Response(data, media_type=ctype)
