"""OpenSearch 2.19 and 3.x must score alike, and `engine status` must say what runs."""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

from kemem_es.config import Settings
from kemem_es.engine import connect
from kemem_es.engine.dialect import OpenSearch
from kemem_es.engine.local import LocalEngine

BODY: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "properties": {
            "k": {"type": "keyword"},
            "t": {"type": "text", "analyzer": "whitespace"},
            "o": {"properties": {"kk": {"type": "keyword"}}},
        }
    },
}


def fake_opensearch(version: str) -> OpenSearch:
    return OpenSearch(version)


def test_3x_indices_keep_the_2x_scoring_settings() -> None:
    body = fake_opensearch("3.5.0").index_body(BODY)
    assert body["settings"]["index.similarity.default.type"] == "LegacyBM25"
    props = body["mappings"]["properties"]
    assert props["k"]["use_similarity"] is True
    assert props["o"]["properties"]["kk"]["use_similarity"] is True
    assert "use_similarity" not in props["t"]
    assert "use_similarity" not in BODY["mappings"]["properties"]["k"]  # the input is unchanged
    # 2.x knows neither setting (and scores that way anyway).
    assert fake_opensearch("2.19.1").index_body(BODY) == BODY


def _legacy_bm25(boost: float, n_docs: int, df: int, dl: float, avgdl: float) -> float:
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    k1, b = 1.2, 0.75
    return boost * idf * (k1 + 1) / (1 + k1 * (1 - b + b * dl / avgdl))


@pytest.mark.engine
def test_keyword_and_text_scores_are_those_of_2x(engine_settings: Settings) -> None:
    engine = connect(engine_settings)
    if engine.dialect.name != "opensearch":
        pytest.skip("OpenSearch only")
    index = f"e-score-{uuid.uuid4().hex[:8]}"
    engine.create_index(index, BODY)
    try:
        engine.bulk(
            [
                {"index": {"_index": index, "_id": "1"}},
                {"k": ["a", "b"], "t": "a b c"},
                {"index": {"_index": index, "_id": "2"}},
                {"k": ["c"], "t": "c d"},
            ],
            refresh=True,
        )

        def score(query: dict) -> float:
            hits = engine.search(index, {"query": query})["hits"]["hits"]
            return float(hits[0]["_score"])

        # keyword: no norms, so every value counts as length 1 (3 values over 2 docs).
        got = score({"term": {"k": {"value": "a", "boost": 2.0}}})
        assert got == pytest.approx(_legacy_bm25(2.0, 2, 1, 1, 1.5), rel=1e-4)
        got = score({"term": {"t": {"value": "a", "boost": 2.5}}})
        assert got == pytest.approx(_legacy_bm25(2.5, 2, 1, 3, 2.5), rel=1e-4)
    finally:
        engine.delete_index(index)


@pytest.mark.engine
def test_status_names_engine_jdk_and_simd(engine_settings: Settings) -> None:
    if engine_settings.es_url:
        pytest.skip("the tests run against a cluster of their own, not the local node")
    local = LocalEngine(engine_settings)
    state = local.state()
    if local.pid() is None or not state:
        pytest.skip("the local node on this port was not started from this home")
    from kemem_es.cli.app import app

    env = {"KEMEM_HOME": str(engine_settings.home), "COLUMNS": "200"}
    env["KEMEM_ENGINE_PORT"] = str(engine_settings.engine_port)
    out = CliRunner().invoke(app, ["engine", "status"], env=env)
    assert out.exit_code == 0, out.output
    assert f"engine OpenSearch {state['release']}" in out.output
    assert f"Java {state['java_version']} at {state['java_home']}" in out.output
    simd_on = state["engine"] != "2.19"  # 3.x is started with the vector module
    assert ("SIMD   on" in out.output) is simd_on
    nodes = state.get("nodes", 1)
    assert f"JVM {state['java_version']} on {nodes} node(s)" in out.output  # from _nodes/jvm
    assert f"(SIMD) on {nodes if simd_on else 0} of {nodes}" in out.output
    if simd_on:
        assert os.path.isfile(state["java"])
        assert local.simd()[0] is True
