"""The background flush coalesces a memory's recalls (memory.strength, ``coalesce_s``): a memory
written less than ``coalesce_s`` ago waits, its recalls summed; an explicit or final flush
writes everything; no recall is lost or counted twice."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from kemem_es.memory import strength
from kemem_es.memory.strength import Reinforcer

NOW = datetime(2025, 6, 1, 12, tzinfo=timezone.utc)
A = ("kemem-user-events", "a", "r")
B = ("kemem-user-events", "b", "r")


class Writes:
    """What the engine was asked to write: one dict per flush, memory → times recalled, and
    the users' activity docs."""

    def __init__(self) -> None:
        self.flushes: list[dict[tuple[str, str, str], int]] = []
        self.activity: list[dict[str, dict]] = []

    def write(self, recalls: dict, active: dict, amount: float, timeout_s: Any = None) -> int:
        self.flushes.append({k: n for k, (n, _) in recalls.items()})
        self.activity.append(dict(active))
        return len(recalls) + len(active)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    t = [1000.0]
    monkeypatch.setattr(strength.time, "monotonic", lambda: t[0])
    return t


def _reinforcer(coalesce_s: float) -> tuple[Reinforcer, Writes]:
    writes = Writes()
    r = Reinforcer(writes, amount=15.0, flush_s=3600, coalesce_s=coalesce_s)  # type: ignore[arg-type]
    r._ensure_thread = lambda: None  # type: ignore[method-assign]  # flushes driven here
    return r, writes


def test_a_memory_written_recently_waits_and_its_recalls_are_summed(clock: list[float]) -> None:
    r, writes = _reinforcer(30.0)
    r.recalled([A, B], NOW)
    assert r.flush_due() == 2  # neither written before: both now
    r.recalled([A], NOW)
    clock[0] += 1
    r.recalled([A], NOW)
    assert r.flush_due() == 0  # A was written 1 s ago: it waits, twice recalled
    clock[0] += 10
    r.recalled([A, B], NOW)
    assert r.flush_due() == 0
    clock[0] += 20  # 31 s after A's and B's write
    assert r.flush_due() == 2
    assert writes.flushes == [{A: 1, B: 1}, {A: 3, B: 1}]


def test_an_explicit_flush_writes_what_waits(clock: list[float]) -> None:
    r, writes = _reinforcer(30.0)
    r.recalled([A], NOW)
    r.flush_due()
    r.recalled([A, A], NOW)
    assert r.flush_due() == 0
    assert r.flush() == 1  # km.flush(), and closing, write everything now
    assert writes.flushes == [{A: 1}, {A: 2}]
    clock[0] += 5
    r.recalled([A], NOW)
    assert r.flush_due() == 0  # written 5 s ago by the explicit flush
    r.close()
    assert writes.flushes[-1] == {A: 1}


def test_without_coalescing_every_flush_writes_every_recall(clock: list[float]) -> None:
    r, writes = _reinforcer(0.0)
    for _ in range(3):
        r.recalled([A], NOW)
        assert r.flush_due() == 1
    assert writes.flushes == [{A: 1}] * 3
    assert r._written == {}  # nothing remembered when nothing waits


def test_old_writes_are_forgotten(clock: list[float]) -> None:
    r, _ = _reinforcer(30.0)
    for i in range(100):
        r.recalled([("kemem-user-events", str(i), "r")], NOW)
        r.flush_due()
        clock[0] += 1
    assert len(r._written) <= 31  # only what was written within coalesce_s is kept


def test_a_users_activity_is_written_once_a_period_the_newest_kept(clock: list[float]) -> None:
    from kemem_es.store.scope import Scope

    r, writes = _reinforcer(30.0)
    user = Scope.of(agent_id="a", user_id="u", db="user")
    r.active(user, NOW)
    assert r.flush_due() == 0  # activity is no memory: nothing counted, but written
    later = NOW.replace(hour=13)
    r.active(user, later)
    clock[0] += 10
    r.flush_due()
    assert [len(a) for a in writes.activity] == [1]  # held: written 10 s ago
    clock[0] += 25
    r.flush_due()
    (doc,) = writes.activity[-1].values()
    assert len(writes.activity) == 2 and doc["last_active_at"].startswith("2025-06-01T13")
