"""API keys: ``KEMEM_SERVER_API_KEYS`` maps a key to the agent ids it may serve (``"*"``: all).
With keys configured every request but the public paths (/healthz, the docs, the dashboard's
page) carries ``Authorization: Bearer <key>``, checked by :class:`KeyCheck` before anything
else, and a key only reaches its agents' scopes. Keys are compared in constant time and never
logged."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from fastapi import Request
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kemem_es.server.access import OPEN, Access
from kemem_es.server.errors import ApiError, refusal


class KeyRing:
    def __init__(self, keys: dict[str, list[str]] | None) -> None:
        """ValueError for an empty or blank key, or one with spaces around it: the first would
        look like a configured key yet guard nothing, the other could never match a token
        (the error does not quote the key)."""
        for key in keys or {}:
            if not key.strip() or key != key.strip():
                raise ValueError(
                    "KEMEM_SERVER_API_KEYS: an API key is empty, blank or has spaces around it"
                )
        self._keys = {
            k: (None if "*" in agents else frozenset(agents)) for k, agents in (keys or {}).items()
        }

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def access(self, authorization: str | None) -> Access:
        if not self.enabled:
            return OPEN
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise ApiError(401, "unauthorized", "missing API key: send Authorization: Bearer <key>")
        found: Access | None = None
        for key, agents in self._keys.items():  # look at every key: no timing hint
            if hmac.compare_digest(key.encode(), token.encode()):
                found = Access(agents)
        if found is None:
            raise ApiError(401, "unauthorized", "unknown API key")
        return found


async def authenticate(request: Request) -> Access:
    """The FastAPI dependency: the caller's access, or 401. ``async`` though it never waits:
    FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop per request for a
    few dictionary lookups (issue 42)."""
    ring: KeyRing = request.app.state.keyring
    return ring.access(request.headers.get("authorization"))


# What answers without a key: the liveness probe, the dashboard's page and its script (they
# hold no data), and the API description (create_app adds its paths). Everything else needs
# one, a route added later included, until it is named here.
PUBLIC_PATHS = frozenset({"/healthz", "/dashboard"})
PUBLIC_PREFIXES = ("/dashboard/static/",)


class KeyCheck:
    """With API keys: 401 for a request without a valid key, decided from its headers before it
    takes an in-flight slot or its body is read. Checked only in the route, a client without a
    key could hold every slot with bodies that never arrive. The routes still resolve
    :func:`authenticate` for the caller's agents."""

    def __init__(self, app: ASGIApp, ring: KeyRing, public: Iterable[str | None] = ()) -> None:
        self.app, self.ring = app, ring
        self.public = PUBLIC_PATHS | {p for p in public if p}

    def needs_key(self, path: str) -> bool:
        """``/dashboard/`` as ``/dashboard``: the router redirects it there."""
        public = (path.rstrip("/") or "/") in self.public or path.startswith(PUBLIC_PREFIXES)
        return not public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.needs_key(scope["path"]):
            try:  # read as authenticate reads it (the first of several)
                self.ring.access(Headers(scope=scope).get("authorization"))
            except ApiError as exc:
                await refusal(exc.status, exc.code, exc.message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["OPEN", "Access", "KeyCheck", "KeyRing", "authenticate"]
