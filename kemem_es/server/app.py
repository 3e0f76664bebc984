"""The app factory. Endpoints are ``async def`` on :class:`AsyncKemem` (the async clients;
CPU stages in the loop's thread pool). Past ``server_max_inflight`` requests at once, more are
refused with 429 at the door rather than queued behind a busy engine."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from kemem_es.async_kemem import AsyncKemem
from kemem_es.config import Settings
from kemem_es.errors import EngineUnavailable, KememError
from kemem_es.server import (
    dashboard,
    heap,
    proxy,
    routes_memories,
    routes_ops,
    routes_query,
    routes_sessions,
)
from kemem_es.server.auth import KeyCheck, KeyRing
from kemem_es.server.errors import install_handlers
from kemem_es.server.mcp_mount import LazyMcp, mount_mcp
from kemem_es.server.metrics import Metrics
from kemem_es.server.middleware import (
    BODY_DEADLINE_S,
    BodyLimit,
    HostCheck,
    InflightLimit,
    JsonBodies,
    install_request_log,
)
from kemem_es.server.openapi import install as install_openapi
from kemem_es.server.openapi import operation_id
from kemem_es.server.routes_ops import Health, Readiness
from kemem_es.server.sweep import start_sweeper

__all__ = [
    "BODY_DEADLINE_S",
    "SHUTDOWN_EXTRACTIONS_S",
    "BodyLimit",
    "Health",
    "HostCheck",
    "InflightLimit",
    "JsonBodies",
    "LazyMcp",
    "Readiness",
    "create_app",
    "mount_mcp",
]

log = logging.getLogger("kemem_es.server")


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
        if cfg.server_gc_freeze:
            heap.settle(cfg.server_gc_gen0)
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
    install_request_log(app)
    routes_ops.install(app, km, cfg)

    mount_mcp(app)
    app.include_router(routes_query.router)
    app.include_router(routes_memories.router)
    app.include_router(routes_sessions.router)
    app.include_router(proxy.router)
    app.include_router(dashboard.router)
    return app
