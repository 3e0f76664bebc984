"""Dedup's view of this process's own recent writes, and the per-key turns (no engine)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kemem_es.memory.dedup import Match, RecentWrites, closer
from kemem_es.models import EntityRecord, EventRecord
from kemem_es.runtime import KeyedLock
from kemem_es.store.scope import Scope

A = Scope.of(agent_id="qiyu", user_id="u_a")
B = Scope.of(agent_id="qiyu", user_id="u_b")
EVENT = EventRecord(
    agent_id="qiyu", user_id="u_a", description="木木喜欢吃螺蛳粉", created_at="2025-01-01"
)


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_nearest_recent_write_of_the_same_scope_and_kind() -> None:
    recent = RecentWrites(ttl_s=30)
    recent.remember(A, "events", "m1", {"description": "一"}, unit(1, 0, 0))
    recent.remember(A, "events", "m2", {"description": "二"}, unit(1, 1, 0))
    recent.remember(B, "events", "m3", {"description": "三"}, unit(1, 0, 0))
    recent.remember(A, "entities", "m4", {"description": "四"}, unit(1, 0, 0))
    match = recent.nearest(A, "events", EVENT, unit(1, 0.1, 0))
    assert match is not None and match.memory_id == "m1"
    assert abs(match.similarity - float(unit(1, 0.1, 0) @ unit(1, 0, 0))) < 1e-6
    assert recent.nearest(B, "entities", EVENT, unit(1, 0, 0)) is None


def test_entities_are_compared_with_the_same_entity_and_kind_only() -> None:
    recent = RecentWrites(ttl_s=30)
    src = {"entity_name": "豆包", "kind": "特殊实体属性", "description": "豆包是柯基"}
    recent.remember(A, "entities", "e1", src, unit(1, 0))
    recent.remember(A, "entities", "e2", {**src, "entity_name": "年糕"}, unit(1, 0))
    other = EntityRecord(
        agent_id="qiyu", user_id="u_a", entity_name="年糕", entity_type="具体实体",
        kind="特殊实体属性", description="年糕是柯基", updatetime="2025-01-01",
    )  # fmt: skip
    match = recent.nearest(A, "entities", other, unit(1, 0))
    assert match is not None and match.memory_id == "e2"


def test_writes_expire_are_forgotten_and_stay_bounded() -> None:
    recent = RecentWrites(ttl_s=0.05, max_entries=2)
    recent.remember(A, "events", "m1", {}, unit(1, 0))
    recent.remember(A, "events", "m2", {}, unit(0, 1))
    recent.remember(A, "events", "m3", {}, unit(1, 1))  # over the bound: not held
    assert recent.nearest(A, "events", EVENT, unit(1, 1)).memory_id in ("m1", "m2")
    recent.forget(A, "events", "m1")
    assert recent.nearest(A, "events", EVENT, unit(1, 0)).memory_id == "m2"
    time.sleep(0.06)
    assert recent.nearest(A, "events", EVENT, unit(1, 0)) is None
    recent.remember(A, "events", "m4", {}, unit(1, 0))  # room again after expiry
    recent.forget(A)
    assert recent.nearest(A, "events", EVENT, unit(1, 0)) is None
    assert RecentWrites(ttl_s=0).nearest(A, "events", EVENT, unit(1, 0)) is None


def test_an_update_without_a_new_vector_refreshes_a_held_source_only() -> None:
    recent = RecentWrites(ttl_s=30)
    recent.remember(A, "events", "m1", {"description": "旧"}, unit(1, 0))
    recent.remember(A, "events", "m1", {"description": "新"}, None)
    recent.remember(A, "events", "m9", {"description": "无"}, None)
    assert recent.nearest(A, "events", EVENT, unit(1, 0)).source == {"description": "新"}


def test_closer_prefers_the_fresher_version_of_the_same_memory() -> None:
    old = Match("m1", 0.95, {"description": "旧"})
    new = Match("m1", 0.91, {"description": "新"})
    other = Match("m2", 0.97, {})
    assert closer(old, new) is new
    assert closer(None, new) is new and closer(old, None) is old
    assert closer(other, new) is other and closer(Match("m3", 0.5, {}), new) is new


def test_a_keyed_lock_lets_one_holder_in_per_key() -> None:
    lock, inside, most = KeyedLock(), {"a": 0, "b": 0}, {"a": 0, "b": 0}
    guard = threading.Lock()

    def work(key: str) -> None:
        with lock.hold(key):
            with guard:
                inside[key] += 1
                most[key] = max(most[key], inside[key])
            time.sleep(0.005)
            with guard:
                inside[key] -= 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, ["a", "b"] * 16))
    assert most == {"a": 1, "b": 1}


def test_a_keyed_lock_does_not_hang_an_event_loop() -> None:
    """Two async verbs on one loop (greenlets of the bridge) wanting the same key: the second
    waits while the first awaits, and both finish."""
    from kemem_es.runtime import Bridge, await_here

    lock, order = KeyedLock(), []

    def verb(name: str) -> str:
        with lock.hold("k"):
            order.append(f"{name} in")
            await_here(asyncio.sleep(0.01))  # an engine call, awaited on the loop
            order.append(f"{name} out")
        return name

    async def main() -> list[str]:
        bridge = Bridge()
        return await asyncio.gather(bridge.run(verb, "x"), bridge.run(verb, "y"))

    assert asyncio.run(asyncio.wait_for(main(), 5)) == ["x", "y"]
    assert order in (["x in", "x out", "y in", "y out"], ["y in", "y out", "x in", "x out"])


def test_a_cancelled_async_verb_gives_its_key_back() -> None:
    """A request cancelled while it holds a scope's turn (client gone, a timeout) must not
    leave that scope's later adds waiting forever."""
    from kemem_es.runtime import Bridge, await_here

    lock = KeyedLock()

    def slow() -> None:
        with lock.hold("k"):
            await_here(asyncio.sleep(10))

    def quick() -> str:
        with lock.hold("k"):
            return "in"

    async def main() -> str:
        bridge = Bridge()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(bridge.run(slow), 0.05)
        return await asyncio.wait_for(bridge.run(quick), 2)

    assert asyncio.run(main()) == "in"


class _FailingSearch:
    """An engine whose duplicate search answers one failed item, as a multi-search can."""

    class settings:  # the Settings attribute the search reads
        index_prefix = "t"

    def __init__(self, item: dict) -> None:
        self.item = item

    class dialect:  # the dialect pieces the search body uses
        native = False  # the script-scored body

        @staticmethod
        def ann_query(field, vector, k, filters):
            return {"match_all": {}}

        @staticmethod
        def vector_function(field, vector, weight):
            return {"weight": weight}

    def msearch(self, searches):
        return [self.item for _ in searches]


def test_a_failed_duplicate_search_fails_the_write_instead_of_finding_none() -> None:
    """Before, an item error read as "no similar memory": the fact was added, a duplicate."""
    from kemem_es.errors import EngineRefused, EngineUnavailable
    from kemem_es.memory.dedup import nearest
    from kemem_es.store.nearest import Neighbours

    vec = unit(1.0, 0.0)
    cases = [
        ({"status": 503, "error": {"type": "search_phase_execution_exception"}}, EngineUnavailable),
        ({"status": 400, "error": {"type": "parsing_exception"}}, EngineRefused),
        ({"status": 404, "error": {"type": "index_not_found_exception"}}, EngineUnavailable),
    ]
    for item, error in cases:
        with pytest.raises(error, match="looking for duplicates"):
            nearest(Neighbours(_FailingSearch(item)), [(A, EVENT, vec)], "events")  # type: ignore[arg-type]
