"""The proxy's durable records (docs/proxy.md), kept in the sessions index beside the sessions
they point into, under the same scope rule: a Responses API response id → the session its
conversation is stored in, and the token usage counters of an (agent, user).

- ``doc_type: "response"``: one per response id, its engine ``_id`` derived from the scope and
  the id, so another scope (another agent, another user) simply does not find it.
- ``doc_type: "usage"``: one per (agent, user), the counts in ``result`` (not indexed), written
  over the version read (two servers adding at once: one retries), so nothing is counted twice
  or lost.

The proxy's user may be absent (it forwards without memory then): such records have the scope
of the agent with no user (``Scope("user", agent, None)``), which no memory request can name.
No new field: the template's own (``doc_type``, the scope, ``session_id``, ``at``, ``result``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kemem_es.engine.errors import check_bulk, check_shards
from kemem_es.errors import ConcurrentChange, activity
from kemem_es.store.documents import utc_now
from kemem_es.store.scope import Scope, checked_id
from kemem_es.store.sessions import SessionStore

RESPONSE, USAGE = "response", "usage"
COUNTS = ("requests", "prompt_tokens", "completion_tokens", "memory_tokens")
_SEP = "\x1f"
USAGE_LIST_MAX = 10_000
WRITE_TRIES = 8


def proxy_scope(agent_id: str, user_id: str | None) -> Scope:
    """The scope of a proxied request: its agent and user (None: the agent's no-user scope)."""
    if user_id:
        return Scope.of(agent_id=agent_id, user_id=user_id)
    return Scope("user", checked_id(agent_id, "agent_id"), None)


def response_key(response_id: str) -> str:
    return f"{RESPONSE}{_SEP}{response_id}"


USAGE_KEY = USAGE


class ProxyRecords:
    """Reads and writes of the proxy's records (synchronous: the server runs them through
    the AsyncKemem's bridge)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.engine = store.engine

    def _meta(self, scope: Scope, key: str) -> dict[str, Any]:
        return {"_index": self.store.alias, "_id": scope.doc_id(key), "routing": scope.routing}

    def _doc(self, scope: Scope, key: str, doc_type: str) -> dict[str, Any]:
        return {"doc_type": doc_type, "uid": scope.doc_id(key), **scope.fields(), "at": utc_now()}

    # -- response id → session --------------------------------------------------------------
    def remember(self, scope: Scope, response_id: str, session_id: str) -> None:
        """Record that ``response_id`` answered in ``session_id`` (again: the same record)."""
        self.store.install()
        key = response_key(response_id)
        doc = self._doc(scope, key, RESPONSE) | {"session_id": session_id}
        with activity("recording a response id"):
            check_bulk(self.engine.bulk([{"index": self._meta(scope, key)}, doc]), "a response")

    def session_of(self, scope: Scope, response_id: str) -> str | None:
        """The session ``response_id`` answered in, within ``scope`` only (real time)."""
        (found,) = self.store.get_docs(scope, [response_key(response_id)])
        if found is None or found.source.get("doc_type") != RESPONSE:
            return None
        session = found.source.get("session_id")
        return session if isinstance(session, str) else None

    # -- usage --------------------------------------------------------------------------------
    def add_usage(self, scope: Scope, delta: Mapping[str, int]) -> None:
        """Add ``delta`` to the scope's counters, over the version read (retried when another
        writer got there first)."""
        self.store.install()
        for _ in range(WRITE_TRIES):
            (found,) = self.store.get_docs(scope, [USAGE_KEY])
            old = (found.source.get("result") or {}) if found else {}
            counts = {k: int(old.get(k, 0)) + int(delta.get(k, 0)) for k in COUNTS}
            doc = self._doc(scope, USAGE_KEY, USAGE) | {"result": counts}
            meta = self._meta(scope, USAGE_KEY)
            if found is None:
                lines = [{"create": meta}, doc]
            else:
                versioned = {"if_seq_no": found.seq_no, "if_primary_term": found.primary_term}
                lines = [{"index": meta | versioned}, doc]
            with activity("counting the proxy's usage"):
                resp = self.engine.bulk(lines)
            item = next(iter(resp["items"][0].values()))
            if item.get("status") != 409:
                check_bulk(resp, "counting the proxy's usage")
                return
        raise ConcurrentChange("the proxy's usage counters: too many writers at once")

    def usage(
        self, agents: frozenset[str] | None, agent_id: str | None, user_id: str | None
    ) -> list[dict[str, Any]]:
        """Stored counters as rows (agent_id, user_id, the counts), within ``agents`` (None:
        all), of one agent and/or one user when given (``user_id=""``: the no-user rows)."""
        if not self.engine.index_exists(self.store.alias):
            return []
        filters: list[dict[str, Any]] = [{"term": {"doc_type": USAGE}}, {"term": {"db": "user"}}]
        if agent_id is not None:
            filters.append({"term": {"agent_id": agent_id}})
        if agents is not None:
            filters.append({"terms": {"agent_id": sorted(agents)}})
        if user_id:
            filters.append({"term": {"user_id": user_id}})
        elif user_id == "":
            filters.append({"bool": {"must_not": {"exists": {"field": "user_id"}}}})
        body = {"size": USAGE_LIST_MAX, "query": {"bool": {"filter": filters}}}
        with activity("reading the proxy's usage"):
            self.engine.refresh(self.store.alias, self.engine.read_timeout)
            resp = self.engine.search(self.store.alias, body)
        rows = []
        for hit in check_shards(resp, "reading the proxy's usage")["hits"]["hits"]:
            src = hit["_source"]
            counts = src.get("result") or {}
            rows.append(
                {
                    "agent_id": src.get("agent_id"),
                    "user_id": src.get("user_id") or "",
                    **{k: int(counts.get(k, 0)) for k in COUNTS},
                }
            )
        return rows
