"""The server's ASGI middleware: the body limit and deadline, the Host check of a keyless
server, the in-flight limit, JSON bodies only, and the request log (ids, metrics)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kemem_es.server.errors import error_response, refusal

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


class RequestLog:
    """Every request logged with its route template, status and time, and counted in the
    metrics; an ``X-Request-ID`` on every answer (the caller's, when it is a sane one); an
    unhandled error answered 500 with that id (its traceback goes to the log, at ERROR).

    Plain ASGI, not ``@app.middleware("http")``: Starlette's BaseHTTPMiddleware runs each
    request's app in an anyio task group and streams its answer through a memory channel,
    about 1 ms of the event loop's CPU per request (issue 42); this wraps ``send`` only."""

    def __init__(self, app: ASGIApp, metrics: Callable[[str, str, int, float], None]) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = ""
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                given = value.decode("latin-1")
                break
        rid = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid  # request.state.request_id
        start = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", rid.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:  # no traceback to the caller; the log has it (at ERROR, with the id)
            log.exception("unhandled error (request %s)", rid)
            if status:  # the answer had begun: nothing else can be sent
                raise
            resp = error_response(500, "internal", f"internal error (request id {rid})")
            await resp(scope, receive, send_with_id)
        elapsed = time.perf_counter() - start
        route = scope.get("route")
        template = getattr(route, "path", None) or "(unmatched)"
        self.metrics(template, scope["method"], status, elapsed)
        log.info(
            "request method=%s path=%s status=%d ms=%.1f request_id=%s",
            scope["method"],
            template,
            status,
            elapsed * 1000,
            rid,
        )


def install_request_log(app: FastAPI) -> None:
    """:class:`RequestLog` around everything added so far (the outermost of the app's own
    middleware)."""
    app.add_middleware(RequestLog, metrics=app.state.metrics.request)
