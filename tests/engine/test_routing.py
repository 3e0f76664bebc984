"""Memories are routed by scope: one shard per scope and index, whatever the shard count.

The pure rule is unit-tested; on the real node, indices of several shards (one node holds
them all) must keep every scope's memories on one shard, answer scoped requests from that
shard alone, refuse writes that forget the route, and migrate indices sharded before routing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from kemem_es.errors import MappingConflict, NotFound
from kemem_es.store.layout import index_alias
from kemem_es.store.migrate import migrate
from kemem_es.store.scope import Scope
from kemem_es.store.templates import index_body
from tests.support import assert_scoped, demo_answers, demo_store, drop_prefix


# -- the rule ------------------------------------------------------------------------------
def test_routing_is_per_scope_stable_and_opaque() -> None:
    a = Scope.of(agent_id="qiyu", user_id="u1")
    assert a.routing == Scope.of(agent_id="qiyu", user_id="u1").routing  # stable
    assert "u1" not in a.routing and "qiyu" not in a.routing  # no ids in URLs or logs
    others = {
        Scope.of(agent_id="qiyu", user_id="u2").routing,
        Scope.of(agent_id="lishen", user_id="u1").routing,
        Scope.of(agent_id="qiyu", db="official").routing,
    }
    assert a.routing not in others and len(others) == 3
    # the separator keeps the parts apart: ("ab", "c") is not ("a", "bc")
    assert (
        Scope.of(agent_id="ab", user_id="c").routing != Scope.of(agent_id="a", user_id="bc").routing
    )


def test_new_indices_require_routing_and_take_the_shard_counts() -> None:
    body = index_body("events", "opensearch", 8, shards=4, replicas=1)
    assert body["mappings"]["_routing"] == {"required": True}
    assert body["mappings"]["_meta"]["kemem_routing"] == "scope"
    assert (body["settings"]["number_of_shards"], body["settings"]["number_of_replicas"]) == (4, 1)


def test_shards_are_planned_by_size() -> None:
    from kemem_es.store.sizing import MAX_SHARDS, SHARD_MEMORIES, plan_shards

    assert plan_shards(0) == plan_shards(SHARD_MEMORIES) == 1
    assert plan_shards(SHARD_MEMORIES + 1) == 2
    assert plan_shards(8 * SHARD_MEMORIES) == 8
    assert plan_shards(10**12) == MAX_SHARDS
    # the size limit wins when shards may hold many memories for latency
    assert plan_shards(10**8, per_shard=10**9) == 9  # 10^8 × 2.6 KB over 30 GiB shards
    with pytest.raises(ValueError):
        plan_shards(-1)


# -- on the engine -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_shard(engine_settings, embedder) -> Iterator[Any]:
    km = demo_store(engine_settings, embedder, "rt")
    yield km
    drop_prefix(km)


@pytest.fixture(scope="module")
def sharded(engine_settings, embedder) -> Iterator[Any]:
    km = demo_store(engine_settings, embedder, "rt", user_shards=4, official_shards=3)
    yield km
    drop_prefix(km)


def _shards_of(km, db: str, kind: str) -> dict[tuple[str, str | None], set[str]]:
    """(agent, user) → the shards its documents are on."""
    alias = index_alias(km.settings.index_prefix, db, kind)
    body = {"size": 1000, "_source": ["agent_id", "user_id"], "explain": True}
    out: dict[tuple[str, str | None], set[str]] = {}
    for hit in km.engine.search(alias, body)["hits"]["hits"]:
        key = (hit["_source"]["agent_id"], hit["_source"].get("user_id"))
        out.setdefault(key, set()).add(hit["_shard"])
    return out


def test_each_scope_lives_on_one_shard(sharded) -> None:
    settings = sharded.engine.get_index(
        index_alias(sharded.settings.index_prefix, "user", "events")
    )
    (spec,) = settings.values()
    assert spec["settings"]["index"]["number_of_shards"] == "4"
    for db in ("user", "official"):
        for kind in ("events", "entities"):
            placed = _shards_of(sharded, db, kind)
            assert placed and all(len(shards) == 1 for shards in placed.values()), (db, kind)
    # the demo's scopes do not all share one shard: routing spreads them
    users = _shards_of(sharded, "user", "events")
    assert len({next(iter(s)) for s in users.values()}) >= 2


def test_sharded_answers_equal_one_shard(one_shard, sharded) -> None:
    """Same memories, order and scores. A routed query reads its scope's shard only, and the
    fused score does not depend on a shard's BM25 statistics (keyword coverage, not BM25)."""
    ref, got = demo_answers(one_shard), demo_answers(sharded)
    assert got == ref
    assert all(a["memory_events"] for a in got)
    assert_scoped(got)  # scope isolation across shards


def test_scoped_requests_read_one_shard(sharded) -> None:
    user = Scope.of(agent_id="qiyu", user_id="u_mumu")
    alias = index_alias(sharded.settings.index_prefix, "user", "events")
    body = {"size": 0, "query": {"bool": {"filter": user.filters()}}}
    resp = sharded.engine.search(alias, body, routing=user.routing)
    assert resp["_shards"]["total"] == 1
    assert resp["hits"]["total"]["value"] == sharded.count(
        user_id="u_mumu", agent_id="qiyu", kind="events"
    )


def test_crud_and_reinforcement_on_shards(sharded) -> None:
    km = sharded
    (added,) = km.add("周末去爬了香山，红叶正好", user_id="u_rt", agent_id="qiyu", refresh=True)
    got = km.get(added.id, user_id="u_rt", agent_id="qiyu")
    assert got.text == "周末去爬了香山，红叶正好"
    with pytest.raises(NotFound):  # another scope, same id: not found on any shard
        km.get(added.id, user_id="u_mumu", agent_id="qiyu")
    km.update(added.id, "周末去爬了香山，红叶正红", user_id="u_rt", agent_id="qiyu", refresh=True)
    assert km.get(added.id, user_id="u_rt", agent_id="qiyu").text.endswith("正红")
    resp = km.query("香山红叶", user_id="u_rt", agent_id="qiyu", score_threshold=0.0,
                    reinforce=True)  # fmt: skip
    assert [e.index for e in resp.memory_events][:1] == [added.id]
    assert km.flush() >= 1
    assert km.get(added.id, user_id="u_rt", agent_id="qiyu").recall_count == 1
    km.delete(added.id, user_id="u_rt", agent_id="qiyu")
    with pytest.raises(NotFound):
        km.get(added.id, user_id="u_rt", agent_id="qiyu")


def test_a_write_without_its_route_is_refused(sharded) -> None:
    alias = index_alias(sharded.settings.index_prefix, "user", "events")
    resp = sharded.engine.bulk([{"index": {"_index": alias, "_id": "x"}}, {"id": "x"}])
    (item,) = resp["items"]
    assert item["index"]["status"] == 400
    assert "routing" in item["index"]["error"]["type"]


def test_sharded_index_from_before_routing_is_refused_then_migrated(kemem) -> None:
    """Three shards, documents placed by id (no routing): init refuses, migrate copies."""
    body = copy.deepcopy(
        index_body("events", kemem.engine.dialect.name, kemem.embedder.dim, shards=3)
    )
    del body["mappings"]["_routing"], body["mappings"]["_meta"]["kemem_routing"]
    prefix = kemem.settings.index_prefix
    alias = index_alias(prefix, "user", "events")
    kemem.engine.create_index(f"{alias}-v2", {**body, "aliases": {alias: {}}})
    vec = [0.5] * kemem.embedder.dim
    t = "2024-01-01T10:00:00"
    lines = []
    for i in range(12):  # the same caller id in several scopes, spread over the shards
        scope = Scope.of(agent_id="qiyu", user_id=f"u{i % 4}")
        doc = {"id": f"m{i // 4}", "uid": scope.doc_id(f"m{i // 4}"), "db": "user",
               "agent_id": "qiyu", "user_id": f"u{i % 4}", "description": f"旧的记忆{i}",
               "created_at": t, "event_time": t, "vector": vec}  # fmt: skip
        lines += [{"index": {"_index": alias, "_id": doc["uid"]}}, doc]
    kemem.engine.bulk(lines, refresh=True)

    with pytest.raises(MappingConflict, match="kemem-es migrate"):
        kemem.init()
    (rep,) = migrate(kemem.engine, kemem.embedder.dim)
    assert (rep.alias, rep.copied, rep.skipped) == (alias, 12, [])
    assert rep.new_index == f"{alias}-v2-routed"
    (new,) = kemem.engine.get_index(alias).values()
    assert new["settings"]["index"]["number_of_shards"] == "3"  # the old count is kept
    for i in range(12):
        got = kemem.get(f"m{i // 4}", user_id=f"u{i % 4}", agent_id="qiyu", kind="events")
        assert got.text == f"旧的记忆{i}"
    assert {r.alias: r.action for r in kemem.init()}[alias] == "exists"
    assert migrate(kemem.engine, kemem.embedder.dim) == []
