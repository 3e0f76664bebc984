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
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import TypeAdapter, ValidationError

from kemem_es.config import Settings
from kemem_es.errors import InvalidInput, activity
from kemem_es.memory.consolidate import Outcome
from kemem_es.store.crud import Crud
from kemem_es.store.scope import Scope
from kemem_es.store.users import Users, parse_instant


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
    # consolidation (memory.consolidate): entity descriptions merged by the LLM
    consolidated: int = 0  # memories that took a merged description
    merged: int = 0  # memories merged into another (kept, superseded)
    consolidation: str = ""  # what the pass did, or why it did nothing (no LLM: said here)
    consolidation_errors: list[str] = field(default_factory=list)  # batches that changed nothing


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


def cleanup(
    users: Users,
    crud: Crud,
    policy: Policy,
    now: datetime | None = None,
    dry_run: bool = False,
    agent_id: str | None = None,
    user_id: str | None = None,
    consolidator: Callable[[Users, Scope, bool], Outcome] | None = None,
) -> list[UserCleanup]:
    """Apply the policy to every user (or one agent / one user); returns what was (or, with
    ``dry_run``, would be) deleted per user. ``consolidator``: then the consolidation pass
    for each active user (``memory.consolidate``); an inactive one is left as it is."""
    now = now or datetime.now(timezone.utc)
    now = now if now.tzinfo else now.astimezone()
    reports: list[UserCleanup] = []
    with activity("cleaning up"):
        users.refresh_memories()
        for agent, user in list(users.scopes(agent_id, user_id)):
            scope = Scope.of(agent_id=agent, user_id=user)
            count = crud.count(scope)
            state = users.state(scope)
            # A write (an import) is not the user's activity, but a user whose memories
            # arrived yesterday is not inactive either: without it, the first clean-up after
            # an import trimmed every imported user to ``min_capacity``.
            seen = [parse_instant(state.get("last_active_at")), users.last_written(scope)]
            last_seen = max((t for t in seen if t is not None), default=None)
            active = last_seen is not None and now - last_seen <= timedelta(
                days=policy.inactive_days
            )
            reason, n = plan(
                count,
                last_seen,
                parse_instant(state.get("last_cleanup_at")),
                now,
                policy,
            )
            rep = UserCleanup(agent, user, count, reason, n)
            reports.append(rep)
            if n > 0:
                victims = users.weakest(scope, n)
                rep.preview = [v.memory_id for v in victims[:10]]
                if not dry_run:
                    rep.deleted = len(crud.delete_sources(scope, victims, "cleanup", reason=reason))
                    users.record_cleanup(scope, now, rep.deleted)
            if consolidator is not None and active and reason != "inactive":
                _consolidate(rep, consolidator(users, scope, dry_run))
        if any(r.deleted for r in reports):
            users.refresh_memories()
    return reports


def _consolidate(rep: UserCleanup, out: Outcome) -> None:
    rep.consolidated, rep.merged = out.rewritten, out.superseded
    rep.consolidation, rep.consolidation_errors = out.note, list(out.errors)
