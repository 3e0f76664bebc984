"""A local cluster of three nodes (the runner's -numOfNode 3) answers as the single node does.

Runs only when KEMEM_TEST_CLUSTER_PORT is set (CI sets it): the cluster takes ports PORT to
PORT + 2 (transport PORT + 100 up) and its own home, KEMEM_TEST_CLUSTER_HOME or
``<KEMEM_HOME>-cluster``; it is stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from kemem_es.config import Settings

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not os.environ.get("KEMEM_TEST_CLUSTER_PORT"),
        reason="set KEMEM_TEST_CLUSTER_PORT to run the three-node tests",
    ),
]

NODES = 3
NOW = datetime(2025, 6, 1, 12)
QUERIES = [
    ("室友失恋了，我们陪她吃了一晚上火锅", "u_mumu", "qiyu"),
    ("最近总是失眠，晚上睡不着", "u_mumu", "qiyu"),
    ("海边写生看日落", "u_mumu", "lishen"),
    ("下周就是我的生日了，你会送我什么", "u_xiaoman", "lishen"),
    ("加班到十一点，好累啊", "u_chengcheng", "qiyu"),
]


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
    """A Kemem on a fresh prefix with the demo corpus, ``shards`` primaries per index."""
    from kemem_es import Kemem
    from kemem_es.kemem import DEMO_FILES, demo_path

    prefix = f"test-cl-{uuid.uuid4().hex[:8]}"
    # Comparing scores across topologies: recalls must not reinforce between the queries.
    update = {"index_prefix": prefix, "reinforce": False}
    km = Kemem(
        settings.model_copy(update=update | {"user_shards": shards, "official_shards": shards})
    )
    km.embedder = embedder
    km.init()
    for name, kind, db in DEMO_FILES:
        km.index_file(demo_path(name), kind, db)
    km.engine.client.indices.refresh(index=f"{km.settings.index_prefix}-*")
    return km


def _drop(km) -> None:
    prefix = km.settings.index_prefix
    indices = km.engine.client.indices
    indices.delete(index=f"{prefix}-*")
    with contextlib.suppress(Exception):  # none left is fine
        for template in indices.get_index_template(name=f"{prefix}-*")["index_templates"]:
            indices.delete_index_template(name=template["name"])


def _answers(km) -> list[dict[str, list]]:
    out = []
    for text, user, agent in QUERIES:
        resp = km.query(text, user_id=user, agent_id=agent, now=NOW, score_threshold=0.0, limit=8)
        contract = resp.to_contract()
        out.append({k: contract[k] for k in ("memory_events", "memory_entities")})
    return out


@pytest.fixture(scope="module")
def reference(engine_settings: Settings, embedder) -> Iterator[list[dict[str, list]]]:
    """The demo queries' answers on the single test node."""
    km = _indexed(engine_settings, embedder)
    try:
        yield _answers(km)
    finally:
        _drop(km)


def _scoped(answers: list[dict[str, list]]) -> None:
    """Every event belongs to the asking user (or is official) for the asking agent."""
    for (_, user, agent), answer in zip(QUERIES, answers, strict=True):
        for event in answer["memory_events"]:
            assert event["index"].startswith((f"ev-{user}-{agent}-", f"ev-official-{agent}-"))


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
        got = _answers(km)
    finally:
        _drop(km)
    assert got == reference
    _scoped(got)


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
        got = _answers(km)
    finally:
        _drop(km)
    _scoped(got)
    assert got == reference
