"""``/mcp`` on the server: the MCP transport, mounted when its extra is installed and built
on its first request."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send


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
