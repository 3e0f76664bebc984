"""What the proxy keeps beyond a request, in the sessions index (``store/proxy_records.py``),
with this process's view in front of it:

- :class:`Chains`: response id → (agent, user, session). Written when the upstream answers
  (in the background), kept in memory too (the newest ``MAX_CACHED``) so a chain continues at
  once; read back from the store when not cached (another process answered it, or this one
  restarted). An id is only found within its own agent and user.
- :class:`UsageBook`: token counts per (agent, user). Each request's counts are added in
  memory and written to the store in the background (one writer at a time, a failed write
  retried with the next); ``rows()`` is the stored counts plus what is not written yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from kemem_es.bounded import Bounded
from kemem_es.store.proxy_records import COUNTS, ProxyRecords, proxy_scope

if TYPE_CHECKING:
    from kemem_es.async_kemem import AsyncKemem

log = logging.getLogger("kemem_es.server.proxy")

MAX_CACHED = 10_000  # response ids this process remembers without asking the store
Key = tuple[str, str]  # (agent, user; "" without one)


def records(km: AsyncKemem) -> ProxyRecords:
    """The proxy's records over the Kemem's own session store (one per Kemem)."""
    core: Any = km.core
    found: ProxyRecords | None = core.__dict__.get("_proxy_records")
    if found is None:
        found = core.__dict__["_proxy_records"] = ProxyRecords(core.sessions.store)
    return found


def run(km: AsyncKemem, verb: str, *args: Any) -> Coroutine[Any, Any, Any]:
    """``ProxyRecords.<verb>(*args)`` on the AsyncKemem's engine client: through its bridge,
    the records' lookup included (the first builds the Kemem's sessions, with engine calls)."""
    return km._bridge.run(lambda: getattr(records(km), verb)(*args))


class Chains:
    def __init__(self) -> None:
        self.cached: Bounded[str, tuple[str, str, str]] = Bounded(MAX_CACHED)

    def remember(self, response_id: str, agent: str, user: str | None, session: str) -> None:
        self.cached.put(response_id, (agent, user or "", session))

    async def write(
        self, km: AsyncKemem, response_id: str, agent: str, user: str | None, session: str
    ) -> None:
        scope = proxy_scope(agent, user)
        await run(km, "remember", scope, response_id, session)

    async def session_of(
        self, km: AsyncKemem, response_id: str, agent: str, user: str | None
    ) -> str | None:
        """The session of ``response_id`` if it is this agent's and user's, else None;
        KememError when it is not cached and the store cannot be read."""
        known = self.cached.get(response_id)
        if known is not None:
            return known[2] if known[:2] == (agent, user or "") else None
        scope = proxy_scope(agent, user)
        session = await run(km, "session_of", scope, response_id)
        if session is not None:
            self.remember(response_id, agent, user, session)
        return session


class UsageBook:
    def __init__(self) -> None:
        self.pending: dict[Key, dict[str, int]] = {}
        self.lock = asyncio.Lock()  # one writer; a reader sees no write half done
        self.task: asyncio.Task[bool] | None = None

    def count(self, km: AsyncKemem, key: Key, delta: dict[str, int]) -> None:
        row = self.pending.setdefault(key, dict.fromkeys(COUNTS, 0))
        for name in COUNTS:
            row[name] += max(int(delta.get(name, 0)), 0)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self.flush(km))

    async def flush(self, km: AsyncKemem) -> bool:
        """Write what is pending; False when the store failed (kept for the next try)."""
        async with self.lock:
            while self.pending:
                key = next(iter(self.pending))
                delta = self.pending.pop(key)  # what requests add meanwhile: a new entry
                try:
                    await run(km, "add_usage", proxy_scope(*key), delta)
                except Exception as exc:  # kept; tried again with the next request
                    log.warning("proxy: writing the usage counts failed: %s", type(exc).__name__)
                    back = self.pending.setdefault(key, dict.fromkeys(COUNTS, 0))
                    for name in COUNTS:
                        back[name] += delta[name]
                    return False
        return True

    @staticmethod
    def _shown(
        key: Key, agents: frozenset[str] | None, agent: str | None, user: str | None
    ) -> bool:
        within = agents is None or key[0] in agents
        return within and agent in (None, key[0]) and user in (None, key[1])

    async def rows(
        self, km: AsyncKemem, agents: frozenset[str] | None, agent: str | None, user: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Stored counts plus the pending ones (and why the stored could not be read)."""
        async with self.lock:
            degraded = None
            try:
                stored = await run(km, "usage", agents, agent, user)
            except Exception as exc:
                log.warning("proxy: reading the usage counts failed: %s", type(exc).__name__)
                stored, degraded = [], "the stored counts could not be read: unwritten counts only"
            merged: dict[Key, dict[str, int]] = {
                (r["agent_id"], r["user_id"]): {k: r[k] for k in COUNTS} for r in stored
            }
            for key, delta in self.pending.items():
                if self._shown(key, agents, agent, user):
                    row = merged.setdefault(key, dict.fromkeys(COUNTS, 0))
                    for name in COUNTS:
                        row[name] += delta[name]
        rows = [{"agent_id": a, "user_id": u, **n} for (a, u), n in sorted(merged.items())]
        return rows, degraded
