"""A local cluster of three nodes (the runner's -numOfNode 3) answers as the single node does.

Runs only when KEMEM_TEST_CLUSTER_PORT is set (CI sets it): the cluster takes ports PORT to
PORT + 2 (transport PORT + 100 up) and its own home, KEMEM_TEST_CLUSTER_HOME or
``<KEMEM_HOME>-cluster``; it is stopped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kemem_es.config import Settings
from tests.support import assert_scoped, demo_answers, demo_store, drop_prefix

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not os.environ.get("KEMEM_TEST_CLUSTER_PORT"),
        reason="set KEMEM_TEST_CLUSTER_PORT to run the three-node tests",
    ),
]

NODES = 3


@pytest.fixture(scope="module")
def cluster(engine_settings: Settings) -> Iterator[Settings]:
    from kemem_es.engine.local import LocalEngine

    port = int(os.environ["KEMEM_TEST_CLUSTER_PORT"])
    home = os.environ.get("KEMEM_TEST_CLUSTER_HOME") or f"{engine_settings.home}-cluster"
    settings = engine_settings.model_copy(
        update={"home": Path(home), "engine_port": port, "engine_nodes": NODES, "es_url": None}
    )
    local = LocalEngine(settings)
    local.start(timeout_s=300)
    try:
        yield settings.model_copy(update={"es_url": settings.local_url})
    finally:
        local.stop()


def _indexed(settings: Settings, embedder, shards: int = 1):
    """The demo corpus on a fresh prefix, ``shards`` primaries per index."""
    return demo_store(settings, embedder, "cl", user_shards=shards, official_shards=shards)


@pytest.fixture(scope="module")
def reference(engine_settings: Settings, embedder) -> Iterator[list[dict[str, list]]]:
    """The demo queries' answers on the single test node."""
    km = _indexed(engine_settings, embedder)
    try:
        yield demo_answers(km)
    finally:
        drop_prefix(km)


def test_three_nodes_form_one_cluster(cluster: Settings) -> None:
    from kemem_es.engine import connect

    engine = connect(cluster)
    assert engine.health()["number_of_nodes"] == NODES
    assert engine.version.startswith(("3.", "2."))


def test_same_answers_across_nodes(cluster: Settings, embedder, reference) -> None:
    """One shard per index, the four indices spread over the nodes: answers are identical."""
    km = _indexed(cluster, embedder)
    try:
        nodes = {s["node"] for s in km.engine.client.cat.shards(index="test-cl-*", format="json")}
        assert len(nodes) >= 2
        got = demo_answers(km)
    finally:
        drop_prefix(km)
    assert got == reference
    assert_scoped(got)


def test_three_shards_same_answers(cluster: Settings, embedder, reference) -> None:
    """Three shards per index over the three nodes. Every scope is routed to one shard, so a
    query reads one shard per index, on whichever node holds it; the fused score does not use
    a shard's BM25 statistics, so the answers are the single node's exactly."""
    km = _indexed(cluster, embedder, shards=NODES)
    try:
        shards = km.engine.client.cat.shards(index="test-cl-*", format="json")
        assert {s["node"] for s in shards} == {f"Node {i}" for i in range(1, NODES + 1)}
        alias = f"{km.settings.index_prefix}-user-events"
        body = {"size": 1000, "_source": ["agent_id", "user_id"], "explain": True}
        placed: dict[tuple[str, str], set[str]] = {}
        for hit in km.engine.search(alias, body)["hits"]["hits"]:
            key = (hit["_source"]["agent_id"], hit["_source"]["user_id"])
            placed.setdefault(key, set()).add(hit["_shard"])
        assert all(len(s) == 1 for s in placed.values())  # one shard per scope
        got = demo_answers(km)
    finally:
        drop_prefix(km)
    assert_scoped(got)
    assert got == reference
