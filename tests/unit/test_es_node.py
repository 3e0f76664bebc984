"""The Elasticsearch development node and native scoring, without an engine: which node and JDK
are chosen, what ships in the package, the Elasticsearch templates (built-in analyzer), the
strength key's exactness, and that native bodies carry no script at all."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

import kemem_es.engine.local as local
from kemem_es.config import get_settings
from kemem_es.contract.params import QueryParams
from kemem_es.engine.connect import info_from_nodes
from kemem_es.engine.dialect import DIALECTS, detect_dialect
from kemem_es.engine.jdk import ENGINES, MISSING_IN_ES_NODE, Jdk, choose
from kemem_es.errors import EngineSetupError
from kemem_es.search import events as ev
from kemem_es.search.clauses import SearchWord, coverage_clauses
from kemem_es.search.modes import BodyArgs, mode_bodies
from kemem_es.store.documents import strength_key
from kemem_es.store.layout import STRENGTH_KEY_SCALE
from kemem_es.store.templates import index_body


def jdk_of(major: int) -> Jdk:
    return Jdk(java=f"/jdk{major}/bin/java", major=major, version=f"{major}.0.1", source="test")


def test_auto_picks_elasticsearch_9_on_a_jdk_21_else_8_18() -> None:
    assert choose("auto", [jdk_of(25)], "elasticsearch").engine.version == "9.5"
    fallback = choose("auto", [jdk_of(17)], "elasticsearch")
    assert fallback.engine.version == "8.18" and "Elasticsearch 9.5.3" in str(fallback.note)
    assert choose("8.18", [jdk_of(25), jdk_of(17)], "elasticsearch").jdk.major == 17
    assert choose("auto", [jdk_of(25)]).engine.version == "3.5"  # OpenSearch stays the default


def test_a_version_of_the_other_engine_is_refused(tmp_path: Path) -> None:
    eng = local.LocalEngine(
        get_settings(home=tmp_path, engine="elasticsearch", engine_version="3.5")
    )
    with pytest.raises(EngineSetupError, match=r"OpenSearch 3\.5\.0, but the local engine is set"):
        eng.choice()


def test_the_launcher_sources_ship_in_the_package_and_no_jar_does() -> None:
    folder = Path(local.__file__).parent
    for spec in ENGINES.values():
        if spec.product != "elasticsearch":
            continue
        assert spec.launcher is not None
        src = folder / "java" / spec.launcher / "org/elasticsearch/node/KememNode.java"
        assert src.is_file(), src
        pom = (folder / spec.pom).read_text()
        assert f"<version>{spec.release}</version>" in pom and "transport-netty4" in pom
    assert not list(Path(local.__file__).parent.parent.rglob("*.jar"))  # ELv2/SSPL/AGPL


def test_status_says_what_the_node_lacks() -> None:
    lacks = " ".join(MISSING_IN_ES_NODE)
    for module in ("Painless", "analysis-common", "scaled_float", "_delete_by_query"):
        assert module in lacks


def test_version_and_dialect_from_the_nodes_info_when_get_root_is_refused() -> None:
    es = {"_product": "Elasticsearch", "nodes": {"x": {"version": "8.18.8"}}}
    assert detect_dialect(info_from_nodes(es)) == "elasticsearch"
    assert info_from_nodes(es)["version"]["number"] == "8.18.8"
    flavour = {"nodes": {"x": {"version": "9.5.3", "build_flavor": "default"}}}
    assert detect_dialect(info_from_nodes(flavour)) == "elasticsearch"
    opensearch = {"nodes": {"x": {"version": "3.5.0"}}}
    assert detect_dialect(info_from_nodes(opensearch)) == "opensearch"


def test_elasticsearch_indices_use_the_builtin_whitespace_analyzer() -> None:
    for kind in ("events", "entities"):
        es = index_body(kind, "elasticsearch", 512)
        assert "analysis" not in es["settings"]
        text = json.dumps(es["mappings"])
        assert "kemem_ws" not in text and '"analyzer": "whitespace"' in text
        os_body = index_body(kind, "opensearch", 512)  # OpenSearch keeps its analyzer
        assert "kemem_ws" in json.dumps(os_body)
        assert es["mappings"]["properties"]["strength_key"]["type"] == "date"


@pytest.mark.parametrize("k", [1.0, 30.0, 7.5])
@pytest.mark.parametrize("s", [0.01, 1.0, 15.0, 30.0, 1234.5, 1e6])
def test_the_strength_key_gives_s_over_s_plus_k_exactly(s: float, k: float) -> None:
    key = strength_key(s)
    assert key is not None
    pivot = max(round(STRENGTH_KEY_SCALE / k), 1)  # as events.strength_clause sends it
    assert abs(pivot / (pivot + key) - s / (s + k)) < 1e-7
    assert strength_key(0.0) is None and strength_key(None) is None


def _bodies(dialect_name: str, scoring: str) -> str:
    dialect = DIALECTS[dialect_name]("8.18.8" if dialect_name == "elasticsearch" else "3.5.0")
    dialect.scoring = scoring
    words = [SearchWord("火锅", weight=1.0), SearchWord("失恋", weight=0.5)]
    clauses = coverage_clauses(words)
    out = []
    for mode in ("fusion", "two_stage", "bm25", "vector", "rrf"):
        for approx in (False, True):
            params = QueryParams(agent_id="a", user_id="u", mode=mode, now=datetime(2025, 1, 1))
            args = BodyArgs(dialect, "user", params, clauses, [0.1] * 8, params.now, approx)
            out += mode_bodies(args, parts=[[0.2] * 8, [0.3] * 8])
    return json.dumps(out)


@pytest.mark.parametrize("dialect", ["elasticsearch", "opensearch"])
def test_native_bodies_hold_no_script(dialect: str) -> None:
    native = _bodies(dialect, "native")
    assert '"script' not in native  # no script_score, no script (description_tok is a field)
    assert '"knn"' in native and '"distance_feature"' in native
    assert '"script_score"' in _bodies(dialect, "script")


def test_native_vector_clause_scales_to_the_script_term() -> None:
    es, os_ = DIALECTS["elasticsearch"]("8.18.8"), DIALECTS["opensearch"]("3.5.0")
    v = [3.0, 4.0]
    assert es.vector_clause("vector", v, 10, [], 2.0)["knn"]["boost"] == 2.0
    knn = os_.vector_clause("vector", v, 10, [], 2.0)["knn"]["vector"]
    assert knn["boost"] == 1.0  # the inner-product graph scores 1 + cos: twice (1 + cos) / 2
    assert knn["vector"] == pytest.approx([0.6, 0.8])  # unit length, as the cosine has it
    assert ev.saturated(4.0, 4.0) == 0.5
