"""Forgetting: when a user's store is full, the weakest memories go.

For each user (agent + user) of the user database:

- **cap**: at ``cap`` memories (20,000) or more, the weakest ``ratio`` (20%) are deleted;
- **inactive**: a user with no query or add for ``inactive_days``, and no memory written in
  that time (an import), is trimmed to ``min_capacity``, weakest first;
- each user is cleaned at most every ``interval_days``.

"Weakest" orders by strength (which recalls and repetitions raise), then recall count, then the
last recall, then the time of the memory, all ascending. The state (last activity, last clean-up)
lives in the engine's ``{prefix}-users`` index, so every process sees the same; every deletion is
recorded in the history with actor ``cleanup`` and its reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import TypeAdapter, ValidationError

from kemem_es.config import Settings
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import activity
from kemem_es.errors import InvalidInput
from kemem_es.memory.strength import parse_instant, state_id, utc_iso
from kemem_es.store.crud import Crud, Stored
from kemem_es.store.layout import (
    HEAVY_FIELDS,
    KINDS,
    UID_FIELD,
    index_alias,
    kind_of_index,
    users_alias,
)
from kemem_es.store.scope import Scope

WEAKEST_FIRST = [
    {"strength": {"order": "asc", "missing": "_first"}},
    {"recall_count": {"order": "asc", "missing": "_first"}},
    {"last_recalled_at": {"order": "asc", "missing": "_first"}},
    {"updatetime": {"order": "asc", "missing": "_first"}},
    {UID_FIELD: {"order": "asc"}},
]
PAGE = 1000


def _setting_value(setting: str, value: object, name: str) -> Any:
    """``value`` validated by the Settings field ``setting`` (its type and bounds)."""
    info = Settings.model_fields[setting]
    try:
        return TypeAdapter(info.rebuild_annotation()).validate_python(value)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise InvalidInput(f"{name}: {problem} (got {value!r})", field=name) from None


@dataclass(frozen=True)
class Policy:
    cap: int = 20_000
    ratio: float = 0.2
    inactive_days: float = 90.0
    min_capacity: int = 1_000
    interval_days: float = 7.0

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Policy:
        """KEMEM_CLEANUP_* settings, with per-call overrides (an unknown one raises)."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise InvalidInput(f"{unknown[0]}: unknown option", field=unknown[0])
        values = {n: getattr(settings, f"cleanup_{n}") for n in names}
        for name, value in overrides.items():
            # An override obeys its setting's bounds: ratio 2 would delete every memory of a
            # user at the cap, not 20 % of them.
            values[name] = _setting_value(f"cleanup_{name}", value, name)
        return cls(**values)


@dataclass
class UserCleanup:
    agent_id: str
    user_id: str
    memories: int
    reason: str  # "cap" | "inactive" | "" (nothing to do) | "recently cleaned"
    to_delete: int = 0
    deleted: int = 0
    preview: list[str] = field(default_factory=list)  # ids of the first memories that go


def plan(
    count: int,
    last_active: datetime | None,
    last_cleanup: datetime | None,
    now: datetime,
    policy: Policy,
) -> tuple[str, int]:
    """(reason, how many to delete) for one user — pure, so the policy is unit-tested."""
    if last_cleanup and now - last_cleanup < timedelta(days=policy.interval_days):
        return "recently cleaned", 0
    if count >= policy.cap:
        return "cap", math.ceil(count * policy.ratio)
    inactive = last_active is None or now - last_active > timedelta(days=policy.inactive_days)
    if inactive and count > policy.min_capacity:
        return "inactive", count - policy.min_capacity
    return "", 0


def _users(engine: Engine, agent_id: str | None, user_id: str | None) -> Iterator[tuple[str, str]]:
    """Every (agent, user) with user memories, via a composite aggregation (paged)."""
    prefix = engine.settings.index_prefix
    indices = ",".join(index_alias(prefix, "user", k) for k in ("events", "entities"))
    filters: list[dict[str, Any]] = [{"term": {"db": "user"}}]
    if agent_id:
        filters.append({"term": {"agent_id": agent_id}})
    if user_id:
        filters.append({"term": {"user_id": user_id}})
    after = None
    while True:
        comp: dict[str, Any] = {
            "size": 500,
            "sources": [
                {"a": {"terms": {"field": "agent_id"}}},
                {"u": {"terms": {"field": "user_id"}}},
            ],
        }
        if after:
            comp["after"] = after
        query = {"bool": {"filter": filters}}
        body = {"size": 0, "query": query, "aggs": {"s": {"composite": comp}}}
        agg = engine.search(indices, body)["aggregations"]["s"]
        for bucket in agg["buckets"]:
            yield bucket["key"]["a"], bucket["key"]["u"]
        after = agg.get("after_key")
        if not agg["buckets"] or not after:
            return


def _last_written(engine: Engine, scope: Scope) -> datetime | None:
    """When the scope's newest memory was written (``indexed_at``): an import or an operator's
    write is not the user's activity, but a user whose memories arrived yesterday is not
    inactive either. Without it, the first clean-up after an import trimmed every imported user
    (none of them has an activity record yet) to ``min_capacity``."""
    prefix = engine.settings.index_prefix
    indices = ",".join(index_alias(prefix, "user", k) for k in ("events", "entities"))
    body = {
        "size": 0,
        "query": {"bool": {"filter": scope.filters()}},
        "aggs": {"newest": {"max": {"field": "indexed_at"}}},
    }
    res = engine.search(indices, body, routing=scope.routing)
    newest = res.get("aggregations", {}).get("newest", {}).get("value_as_string")
    return parse_instant(newest)


def _weakest(engine: Engine, scope: Scope, n: int) -> list[Stored]:
    """The n weakest memories of a scope across events and entities, each with its kind and
    the version it was chosen at (deleted only if still that one)."""
    prefix = engine.settings.index_prefix
    indices = ",".join(index_alias(prefix, "user", k) for k in ("events", "entities"))
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
        hits = engine.search(indices, body, routing=scope.routing)["hits"]["hits"]
        if not hits:
            break
        out += [Stored.listed(kind_of_index(h["_index"]), h) for h in hits]
        after = hits[-1]["sort"]
    return out


def cleanup(
    engine: Engine,
    policy: Policy,
    now: datetime | None = None,
    dry_run: bool = False,
    agent_id: str | None = None,
    user_id: str | None = None,
) -> list[UserCleanup]:
    """Apply the policy to every user (or one agent / one user); returns what was (or, with
    ``dry_run``, would be) deleted per user."""
    now = now or datetime.now(timezone.utc)
    now = now if now.tzinfo else now.astimezone()
    prefix = engine.settings.index_prefix
    crud = Crud(engine)
    reports: list[UserCleanup] = []
    with activity("cleaning up"):
        for idx in ("events", "entities"):
            engine.refresh(index_alias(prefix, "user", idx))
        for agent, user in list(_users(engine, agent_id, user_id)):
            scope = Scope.of(agent_id=agent, user_id=user)
            count = crud.count(scope)
            state = engine.get(users_alias(prefix), state_id(scope))
            src = (state or {}).get("_source", {})
            seen = [parse_instant(src.get("last_active_at")), _last_written(engine, scope)]
            reason, n = plan(
                count,
                max((t for t in seen if t is not None), default=None),
                parse_instant(src.get("last_cleanup_at")),
                now,
                policy,
            )
            rep = UserCleanup(agent, user, count, reason, n)
            reports.append(rep)
            if n <= 0:
                continue
            victims = _weakest(engine, scope, n)
            rep.preview = [v.memory_id for v in victims[:10]]
            if dry_run:
                continue
            rep.deleted = len(crud.delete_sources(scope, victims, "cleanup", reason=reason))
            engine.bulk(
                [
                    {"update": {"_index": users_alias(prefix), "_id": state_id(scope)}},
                    {
                        "doc": {
                            "agent_id": agent,
                            "user_id": user,
                            "last_cleanup_at": utc_iso(now),
                            "last_cleanup_deleted": rep.deleted,
                        },
                        "doc_as_upsert": True,
                    },
                ],
                refresh=True,
            )
        if any(r.deleted for r in reports):
            for kind in KINDS:
                engine.refresh(index_alias(prefix, "user", kind))
    return reports
