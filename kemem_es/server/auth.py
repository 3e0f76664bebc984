"""API keys: ``KEMEM_SERVER_API_KEYS`` maps a key to the agent ids it may serve (``"*"``: all).
With keys configured every request but /healthz carries ``Authorization: Bearer <key>``; a key
only reaches its agents' scopes. Keys are compared in constant time and never logged."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from kemem_es.server.errors import ApiError


@dataclass(frozen=True)
class Access:
    """What the caller may touch: ``agents`` None means every agent (no keys, or ``"*"``)."""

    agents: frozenset[str] | None

    def check(self, agent_id: str) -> None:
        if self.agents is not None and agent_id not in self.agents:
            raise ApiError(
                403,
                "forbidden",
                f"this API key may not serve agent_id {agent_id!r}",
                field="agent_id",
            )


OPEN = Access(None)


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


def authenticate(request: Request) -> Access:
    """The FastAPI dependency: the caller's access, or 401."""
    ring: KeyRing = request.app.state.keyring
    return ring.access(request.headers.get("authorization"))
