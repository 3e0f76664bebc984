"""Users: who has memories, and each user's activity and clean-up state.

The state lives in the engine's ``{prefix}-users`` index (one document a scope, ``state_id``), so
every process sees the same; the clean-up's questions about a user's memories (how many, the
newest write, the weakest ones) are asked of the memory indices. The decisions (when a user is
inactive, how many go) are memory/cleanup.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.store.crud import Stored
from kemem_es.store.layout import HEAVY_FIELDS, KINDS, UID_FIELD, index_alias, kind_of_index
from kemem_es.store.layout import users_alias as _users_alias
from kemem_es.store.scope import Scope, scope_filters

WEAKEST_FIRST = [
    {"strength": {"order": "asc", "missing": "_first"}},
    {"recall_count": {"order": "asc", "missing": "_first"}},
    {"last_recalled_at": {"order": "asc", "missing": "_first"}},
    {"updatetime": {"order": "asc", "missing": "_first"}},
    {UID_FIELD: {"order": "asc"}},
]
PAGE = 1000
SCOPES_PAGE = 500


def parse_instant(text: str | None) -> datetime | None:
    """A stored instant (ISO 8601, ``Z`` or an offset; naive means UTC), or None."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def utc_iso(t: datetime) -> str:
    """An instant as stored: UTC, milliseconds, ``Z``."""
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def state_id(scope: Scope) -> str:
    """The id of a user's activity / clean-up state document."""
    return scope.doc_id("\x00state")


def activity_lines(prefix: str, active: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Bulk lines that upsert users' activity (``active``: state id → state fields)."""
    users = _users_alias(prefix)
    lines: list[dict[str, Any]] = []
    for sid, doc in active.items():
        lines += [
            {"update": {"_index": users, "_id": sid, "retry_on_conflict": 10}},
            {"doc": doc, "doc_as_upsert": True},
        ]
    return lines


def active_doc(scope: Scope, now: datetime) -> dict[str, Any]:
    """A user's activity state fields: the clean-up treats them as active since ``now``."""
    return {"agent_id": scope.agent_id, "user_id": scope.user_id, "last_active_at": utc_iso(now)}


class Users:
    """The users of one index prefix (user database only: official memories are not
    cleaned up)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prefix = engine.settings.index_prefix
        self._memories = ",".join(index_alias(self.prefix, "user", k) for k in KINDS)

    def refresh_memories(self) -> None:
        for kind in KINDS:
            self.engine.refresh(index_alias(self.prefix, "user", kind))

    def scopes(
        self, agent_id: str | None = None, user_id: str | None = None
    ) -> Iterator[tuple[str, str]]:
        """Every (agent, user) with user memories (or those of one agent / user), via a
        composite aggregation, paged."""
        agent_id, user_id = agent_id or None, user_id or None  # empty: every one
        query = {"bool": {"filter": scope_filters("user", agent_id, user_id)}}
        after = None
        while True:
            comp: dict[str, Any] = {
                "size": SCOPES_PAGE,
                "sources": [
                    {"a": {"terms": {"field": "agent_id"}}},
                    {"u": {"terms": {"field": "user_id"}}},
                ],
            }
            if after:
                comp["after"] = after
            body = {"size": 0, "query": query, "aggs": {"s": {"composite": comp}}}
            agg = self.engine.search(self._memories, body)["aggregations"]["s"]
            for bucket in agg["buckets"]:
                yield bucket["key"]["a"], bucket["key"]["u"]
            after = agg.get("after_key")
            if not agg["buckets"] or not after:
                return

    def state(self, scope: Scope) -> dict[str, Any]:
        """The scope's activity / clean-up state (empty when it has none yet)."""
        doc = self.engine.get(_users_alias(self.prefix), state_id(scope))
        return dict((doc or {}).get("_source", {}))

    def last_written(self, scope: Scope) -> datetime | None:
        """When the scope's newest memory was written (``indexed_at``)."""
        body = {
            "size": 0,
            "query": {"bool": {"filter": scope.filters()}},
            "aggs": {"newest": {"max": {"field": "indexed_at"}}},
        }
        res = self.engine.search(self._memories, body, routing=scope.routing)
        return parse_instant(res.get("aggregations", {}).get("newest", {}).get("value_as_string"))

    def weakest(self, scope: Scope, n: int) -> list[Stored]:
        """The n weakest memories of a scope across events and entities (strength, recall
        count, last recall, time, ascending), each with its kind and the version it was chosen
        at (deleted only if still that one)."""
        out: list[Stored] = []
        after = None
        while len(out) < n:
            body: dict[str, Any] = {
                "size": min(PAGE, n - len(out)),
                "query": {"bool": {"filter": scope.filters()}},
                "sort": WEAKEST_FIRST,
                "_source": {"excludes": HEAVY_FIELDS},
                "track_total_hits": False,
                "seq_no_primary_term": True,
            }
            if after:
                body["search_after"] = after
            hits = self.engine.search(self._memories, body, routing=scope.routing)["hits"]["hits"]
            if not hits:
                break
            out += [Stored.listed(kind_of_index(h["_index"]), h) for h in hits]
            after = hits[-1]["sort"]
        return out

    def record_cleanup(self, scope: Scope, now: datetime, deleted: int) -> None:
        """The scope was cleaned up at ``now``, ``deleted`` memories gone."""
        doc = {
            "agent_id": scope.agent_id,
            "user_id": scope.user_id,
            "last_cleanup_at": utc_iso(now),
            "last_cleanup_deleted": deleted,
        }
        lines: list[dict[str, Any]] = [
            {"update": {"_index": _users_alias(self.prefix), "_id": state_id(scope)}},
            {"doc": doc, "doc_as_upsert": True},
        ]
        self.engine.bulk(lines, refresh=True)
