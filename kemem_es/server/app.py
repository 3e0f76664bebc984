"""The app factory. Endpoints are ``async def`` on :class:`AsyncKemem` (the async clients;
CPU stages in the loop's thread pool). Past ``server_max_inflight`` requests at once, more are
refused with 429 at the door rather than queued behind a busy engine."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.middleware.base import RequestResponseEndpoint
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kemem_es.async_kemem import AsyncKemem
from kemem_es.config import Settings
from kemem_es.errors import EngineUnavailable, KememError
from kemem_es.server import dashboard, proxy, routes_memories, routes_query, routes_sessions
from kemem_es.server.auth import Access, KeyCheck, KeyRing, authenticate
from kemem_es.server.errors import error_response, install_handlers, public_reason, refusal
from kemem_es.server.metrics import METRICS_OPERATORS_ONLY, Metrics
from kemem_es.server.openapi import install as install_openapi
from kemem_es.server.openapi import operation_id
from kemem_es.server.sweep import start_sweeper

log = logging.getLogger("kemem_es.server")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


# The whole request body must arrive within this long: a stalled one gets 408 and gives back
# its in-flight slot (uvicorn has no such deadline; the socket could hold the slot for hours).
BODY_DEADLINE_S = 15.0


class _TooLarge(Exception):
    pass


class BodyLimit:
    """413 for a body over ``max_bytes`` (by Content-Length, or counted as it comes); 408 for
    one not all there within ``deadline_s``; then the route gets the body read here."""

    def __init__(self, app: ASGIApp, max_bytes: int, deadline_s: float = BODY_DEADLINE_S) -> None:
        self.app, self.max_bytes, self.deadline_s = app, max_bytes, deadline_s

    async def _read(self, receive: Receive) -> bytes | None:
        """The body, or None when the client went away first."""
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int) -> None:
        """413, 408 or 400 (gone) with the connection closed: the rest of the body is unread."""
        if status == 413:
            resp = refusal(413, "too_large", f"request body over {self.max_bytes} bytes")
        elif status == 408:
            msg = f"the request body did not arrive within {self.deadline_s:g} s"
            resp = refusal(408, "body_timeout", msg)
        else:
            resp = refusal(400, "incomplete_body", "the client left before its body came")
        await resp(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(scope, receive, send, 413)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.deadline_s)
        except _TooLarge:
            await self._refuse(scope, receive, send, 413)
            return
        except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
            await self._refuse(scope, receive, send, 408)
            return
        if body is None:
            await self._refuse(scope, receive, send, 400)
            return
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)


class HostCheck:
    """Without API keys: 400 for a Host header that names neither localhost, an IP address nor
    an allowed name. A web page can point its own DNS name at 127.0.0.1 (DNS rebinding) and
    then call a loopback server as its own origin: the browser still sends the page's name,
    never an address. ``"*"`` among ``allowed`` turns the check off."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = {"localhost", *(name.lower().rstrip(".") for name in allowed)}

    def serves(self, host: str) -> bool:
        if "*" in self.allowed:
            return True
        name = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return name.lower().rstrip(".") in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        host = dict(scope["headers"]).get(b"host") if scope["type"] == "http" else None
        if host is None or self.serves(host.decode("latin-1")):
            await self.app(scope, receive, send)
            return
        msg = (
            "without API keys this server answers only for localhost and IP addresses, not the "
            "name in the Host header (KEMEM_SERVER_ALLOWED_HOSTS adds names)"
        )
        await error_response(400, "invalid_host", msg, "Host")(scope, receive, send)


class InflightLimit:
    """429 (with Retry-After) for a request beyond ``limit`` in flight; /healthz, /readyz and
    /metrics are always answered, so an overloaded server can still be observed."""

    OPS = ("/healthz", "/readyz", "/metrics")

    def __init__(self, app: ASGIApp, limit: int, on_reject: Callable[[], None]) -> None:
        self.app, self.limit, self.on_reject = app, limit, on_reject
        self.inflight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.OPS:
            await self.app(scope, receive, send)
            return
        if self.inflight >= self.limit:
            self.on_reject()
            msg = f"over {self.limit} requests in flight: retry shortly"
            resp = error_response(429, "overloaded", msg)
            resp.headers["Retry-After"] = "1"
            await resp(scope, receive, send)
            return
        self.inflight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


class JsonBodies:
    """415 for a POST, PUT or PATCH without ``Content-Type: application/json`` (every body this
    server takes is JSON). A web page may send any other type, or none, to another origin
    without a CORS preflight, and FastAPI before 0.132 read a body without one as JSON: a
    keyless loopback server would act on it. Checked here, not left to the framework."""

    METHODS = frozenset({"POST", "PUT", "PATCH"})

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in self.METHODS:
            ctype = Headers(scope=scope).get("content-type", "")
            if ctype.split(";", 1)[0].strip().lower() != "application/json":
                msg = "send the body as JSON, with Content-Type: application/json"
                resp = refusal(415, "unsupported_media_type", msg, "Content-Type")
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """``ready`` with the engine's dialect and version, or ``unavailable`` (503) and why."""

    status: Literal["ready", "unavailable"]
    engine: str | None = None
    version: str | None = None
    reason: str | None = None


class LazyMcp:
    """MCP over streamable HTTP at ``/mcp`` (stateless, JSON answers; kemem_es.mcp_server),
    built on its first request: the SDK takes seconds to import, which a server's start should
    not pay for a transport most deployments never call. Behind the same middleware as every
    route: the key check (its agents bound the tools), the Host check of a keyless server, the
    limits. The SDK's own Host/Origin check is off: it knows only loopback names, the server's
    checks know the configured ones."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.handler: ASGIApp | None = None
        self.lock = asyncio.Lock()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        import importlib

        await asyncio.to_thread(importlib.import_module, "kemem_es.mcp_server")
        from mcp.server.transport_security import TransportSecuritySettings

        from kemem_es.mcp_server import http_mcp

        server = http_mcp(self.app)
        sub = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        ready = asyncio.Event()

        async def run() -> None:  # the transport's task group, entered and left in one task
            async with server.session_manager.run():
                ready.set()
                await self.stop.wait()

        self.task = asyncio.create_task(run())
        await ready.wait()
        self.handler = sub.routes[0].app  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.handler is None:
            async with self.lock:
                if self.handler is None:
                    await self._start()
        assert self.handler is not None
        await self.handler(scope, receive, send)

    async def close(self) -> None:
        if self.task is not None:
            self.stop.set()
            await self.task


def mount_mcp(app: FastAPI) -> None:
    """``/mcp`` when the ``mcp`` extra is installed (see :class:`LazyMcp`)."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        return
    from starlette.routing import Route

    app.state.mcp = LazyMcp(app)
    app.router.routes.append(
        Route("/mcp", endpoint=app.state.mcp, methods=["GET", "POST", "DELETE"])
    )


# At shutdown, background extractions (LLM calls) still running get this long to finish; then
# they are given up (their raw turns are stored), so the server exits before an orchestrator's
# kill (the reinforcement flush that follows has its own deadline, SHUTDOWN_FLUSH_S).
SHUTDOWN_EXTRACTIONS_S = 15.0


def create_app(
    kemem: AsyncKemem | None = None, settings: Settings | None = None, close: bool | None = None
) -> FastAPI:
    """The server over ``kemem`` (built from ``settings`` / KEMEM_* when not given). The
    server's own settings (keys, degrade, limits) come from ``settings``, else the Kemem's.
    ``close``: close the AsyncKemem at shutdown (default: when the app built it)."""
    own = kemem is None if close is None else close
    km = kemem if kemem is not None else AsyncKemem(settings)
    cfg = settings or km.settings

    @asynccontextmanager
    async def lifespan(this: FastAPI) -> AsyncIterator[None]:
        await warm()
        sweeper = start_sweeper(km, cfg.session.sweep_s)  # idle sessions end (server/sweep.py)
        yield
        await sweeper.close()
        mcp = getattr(this.state, "mcp", None)
        if mcp is not None:
            await mcp.close()
        await proxy.close_proxy(this)
        if own:
            await km.aclose(extraction_timeout_s=SHUTDOWN_EXTRACTIONS_S)

    async def warm() -> None:
        try:  # model, jieba, names and the connection now, not in the first requests
            await km.warm_up()
        except EngineUnavailable as exc:  # may come later: /query degrades until it does
            log.warning("engine not ready at start: %s", type(exc).__name__)
        except KememError as exc:  # a setting (a text file, the model): no query can work
            app.state.unusable = str(exc).split("\n")[0][:300]
            log.error("cannot answer queries: %s", app.state.unusable)
        except Exception as exc:  # not the engine's fault: say what it is
            app.state.unusable = f"warm-up failed: {type(exc).__name__}"
            log.error("warm-up failed: %s: %s", type(exc).__name__, exc)

    app = FastAPI(
        title="kemem-es",
        summary="Long-term memory for Chinese companion chat: recall (/query) and the Memory API",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
    )
    install_openapi(app)
    app.state.kemem = km
    app.state.settings = cfg
    app.state.keyring = KeyRing(cfg.server_api_keys)
    app.state.metrics = Metrics()
    app.state.metrics.count_extraction_failures(lambda: km.extraction_failures)
    install_handlers(app)
    # Inside the request log, so every refusal is logged and carries a request id. From the
    # outside in: Host (no keys) or key, Content-Type, in-flight slots, the body. What the
    # headers alone refuse never takes a slot; a slot is held while the body comes, at most
    # BODY_DEADLINE_S.
    app.add_middleware(BodyLimit, max_bytes=cfg.server_max_body_bytes)
    app.add_middleware(
        InflightLimit, limit=cfg.server_max_inflight, on_reject=app.state.metrics.overloaded
    )
    app.add_middleware(JsonBodies)
    if app.state.keyring.enabled:
        docs = (app.docs_url, app.redoc_url, app.openapi_url, app.swagger_ui_oauth2_redirect_url)
        app.add_middleware(KeyCheck, ring=app.state.keyring, public=docs)
    else:  # a key is what a rebinding page cannot send
        app.add_middleware(HostCheck, allowed=cfg.server_allowed_hosts)

    @app.middleware("http")
    async def request_log(request: Request, call_next: RequestResponseEndpoint) -> Response:
        given = request.headers.get("x-request-id", "")
        rid = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        request.state.request_id = rid
        start = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception:  # no traceback to the caller; the log has it (at ERROR, with the id)
            log.exception("unhandled error (request %s)", rid)
            response = error_response(500, "internal", f"internal error (request id {rid})")
        elapsed = time.perf_counter() - start
        route = request.scope.get("route")
        template = getattr(route, "path", None) or "(unmatched)"
        response.headers["X-Request-ID"] = rid
        app.state.metrics.request(template, request.method, response.status_code, elapsed)
        log.info(
            "request method=%s path=%s status=%d ms=%.1f request_id=%s",
            request.method,
            template,
            response.status_code,
            elapsed * 1000,
            rid,
        )
        return response

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

    mount_mcp(app)
    app.include_router(routes_query.router)
    app.include_router(routes_memories.router)
    app.include_router(routes_sessions.router)
    app.include_router(proxy.router)
    app.include_router(dashboard.router)
    return app
