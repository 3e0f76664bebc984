"""Aggregate views of the store for the dashboard: memory counts per agent / user / database /
kind, the strength distribution, and recent clean-ups (from the history index).

Two round trips: the cluster's health, then one ``msearch`` with a ``size: 0`` aggregation per
memory alias plus one over the history. The caller's reach is applied here, inside the engine
query, so a dashboard for an operator key never sees another agent's numbers. A key's reach is
a set of agents across both databases and all their users, which no single
:class:`~kemem_es.store.scope.Scope` expresses (a user-database scope needs its user), so it is
a terms filter on the scope's agent field, the field ``Scope.filters`` uses.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, Field

from kemem_es.engine import Engine
from kemem_es.engine.errors import deadline
from kemem_es.errors import EngineUnavailable
from kemem_es.store.layout import DATABASES, KINDS, history_alias, index_alias

AGG_SIZE = 500  # agents × users listed at most (the dashboard is not an export)
# Strength is unbounded (recall adds 15 a time); these edges keep the demo's 10-60 readable
# and still show runaway memories.
STRENGTH_EDGES = (0.0, 10.0, 20.0, 30.0, 40.0, 60.0, 100.0, 200.0)
CLEANUP_DAYS = 30


class ScopeCount(BaseModel):
    """One scope's memories: a user of an agent (user db) or an agent's official memories."""

    agent_id: str
    user_id: str | None = None
    db: str
    events: int = 0
    entities: int = 0


class StrengthBucket(BaseModel):
    lo: float
    hi: float | None = Field(description="None: open-ended")
    count: int


class CleanupDay(BaseModel):
    """Clean-up deletions recorded on one (UTC) day."""

    day: str
    deleted: int
    users: int
    reasons: dict[str, int]


class EngineInfo(BaseModel):
    """Which engine answers, and the cluster's health."""

    dialect: str
    version: str
    status: str | None = Field(None, description="green / yellow / red")
    nodes: int | None = None


class MemoryStats(BaseModel):
    engine: EngineInfo
    total: int = 0
    by_db: dict[str, int] = Field(default_factory=dict)
    by_kind: dict[str, int] = Field(default_factory=dict)
    by_agent: dict[str, int] = Field(default_factory=dict)
    scopes: list[ScopeCount] = Field(default_factory=list)
    strength: list[StrengthBucket] = Field(default_factory=list)
    strength_avg: float | None = None
    strength_max: float | None = None
    cleanups: list[CleanupDay] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="indices that do not exist")
    truncated: bool = Field(False, description="more agents or users than AGG_SIZE")


def reach_filters(agents: Collection[str] | None) -> list[dict]:
    """Engine filters for what the caller may see: a set of agents, or (None) everything.
    An empty set matches nothing."""
    if agents is None:
        return []
    return [{"terms": {"agent_id": sorted(agents)}}]


def _memory_body(reach: list[dict]) -> dict[str, Any]:
    ranges = [
        {"from": lo, **({"to": hi} if hi is not None else {})}
        for lo, hi in zip(STRENGTH_EDGES, [*STRENGTH_EDGES[1:], None], strict=True)
    ]
    return {
        "size": 0,
        "track_total_hits": True,
        "query": {"bool": {"filter": reach}},
        "aggs": {
            "agents": {
                "terms": {"field": "agent_id", "size": AGG_SIZE},
                "aggs": {"users": {"terms": {"field": "user_id", "size": AGG_SIZE}}},
            },
            "strength": {"range": {"field": "strength", "ranges": ranges}},
            "strength_stats": {"stats": {"field": "strength"}},
        },
    }


def _cleanup_body(reach: list[dict], now: datetime) -> dict[str, Any]:
    since = (now - timedelta(days=CLEANUP_DAYS)).isoformat()
    return {
        "size": 0,
        "query": {
            "bool": {
                "filter": [
                    *reach,
                    {"term": {"actor": "cleanup"}},
                    {"range": {"at": {"gte": since}}},
                ]
            }
        },
        "aggs": {
            "days": {
                "date_histogram": {
                    "field": "at",
                    "calendar_interval": "day",
                    "min_doc_count": 1,
                    "order": {"_key": "desc"},
                },
                "aggs": {
                    "reasons": {"terms": {"field": "reason", "size": 10}},
                    "users": {"cardinality": {"field": "user_id"}},
                },
            }
        },
    }


def _answered(resp: dict[str, Any], alias: str, missing: list[str]) -> bool:
    """Whether an msearch response holds results; a missing index is noted, not an error."""
    err = resp.get("error")
    if err is None:
        return True
    if "index_not_found" in str(err):
        missing.append(alias)
        return False
    reason = err.get("root_cause", [{}])[0].get("reason") if isinstance(err, dict) else err
    raise EngineUnavailable(f"statistics of {alias} failed: {reason or err}")


def memory_stats(
    engine: Engine, agents: Collection[str] | None = None, now: datetime | None = None
) -> MemoryStats:
    """Engine health, then counts, strength distribution and clean-ups within the caller's
    reach (see module doc). A missing index counts as empty and is listed in ``missing``; other
    engine errors raise. Both round trips share the query deadline: a hung engine is shown as
    such in that time, not after the admin timeout."""
    with deadline(engine.settings.query_timeout_s):
        health = engine.health(engine.read_timeout)
        return _stats(engine, health, agents, now)


def _stats(
    engine: Engine,
    health: dict[str, Any],
    agents: Collection[str] | None,
    now: datetime | None,
) -> MemoryStats:
    """``memory_stats`` once the health is read: one msearch of every alias."""
    info = EngineInfo(
        dialect=engine.dialect.name,
        version=engine.version,
        status=health.get("status"),
        nodes=health.get("number_of_nodes"),
    )
    prefix = engine.settings.index_prefix
    reach = reach_filters(agents)
    now = now or datetime.now(timezone.utc)
    pairs = [(db, kind) for db in DATABASES for kind in KINDS]
    searches = [(index_alias(prefix, db, kind), _memory_body(reach)) for db, kind in pairs]
    searches.append((history_alias(prefix), _cleanup_body(reach, now)))
    responses = engine.msearch(searches)
    out = MemoryStats(engine=info)
    scopes: dict[tuple[str, str | None, str], ScopeCount] = {}
    buckets = [0] * len(STRENGTH_EDGES)
    total_strength, n_strength = 0.0, 0
    max_strength: float | None = None
    for (db, kind), (alias, _), resp in zip(pairs, searches, responses, strict=False):
        if not _answered(resp, alias, out.missing):
            continue
        n = int(resp["hits"]["total"]["value"])
        out.total += n
        out.by_db[db] = out.by_db.get(db, 0) + n
        out.by_kind[kind] = out.by_kind.get(kind, 0) + n
        aggs = resp["aggregations"]
        out.truncated |= aggs["agents"].get("sum_other_doc_count", 0) > 0
        for a in aggs["agents"]["buckets"]:
            agent = str(a["key"])
            out.by_agent[agent] = out.by_agent.get(agent, 0) + int(a["doc_count"])
            users = a["users"]
            out.truncated |= users.get("sum_other_doc_count", 0) > 0
            rows: list[tuple[str | None, int]] = [
                (str(u["key"]), int(u["doc_count"])) for u in users["buckets"]
            ]
            if db == "official":
                rows = [(None, int(a["doc_count"]))]
            for user, count in rows:
                key = (agent, user, db)
                row = scopes.setdefault(key, ScopeCount(agent_id=agent, user_id=user, db=db))
                setattr(row, kind, getattr(row, kind) + count)
        for i, b in enumerate(aggs["strength"]["buckets"]):
            buckets[i] += int(b["doc_count"])
        st = aggs["strength_stats"]
        if st.get("count"):
            n_strength += int(st["count"])
            total_strength += float(st["sum"])
            top = float(st["max"])
            max_strength = top if max_strength is None else max(max_strength, top)
    his = responses[-1]
    if _answered(his, history_alias(prefix), out.missing):
        for d in his["aggregations"]["days"]["buckets"]:
            out.cleanups.append(
                CleanupDay(
                    day=str(d.get("key_as_string", ""))[:10],
                    deleted=int(d["doc_count"]),
                    users=int(d["users"]["value"]),
                    reasons={str(r["key"]): int(r["doc_count"]) for r in d["reasons"]["buckets"]},
                )
            )
    out.scopes = sorted(scopes.values(), key=lambda s: (s.agent_id, s.db, s.user_id or ""))
    his_edges = [*STRENGTH_EDGES[1:], None]
    out.strength = [
        StrengthBucket(lo=lo, hi=hi, count=c)
        for lo, hi, c in zip(STRENGTH_EDGES, his_edges, buckets, strict=True)
    ]
    if n_strength:
        out.strength_avg = round(total_strength / n_strength, 2)
        out.strength_max = max_strength
    return out
