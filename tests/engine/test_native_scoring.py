"""Native scoring (no script on the query path) gives script scoring's answers: the demo corpus,
the demo queries, fusion on both paths, every mode; ids, order and unrounded scores within 1e-5.

Runs on the engine under test when it has Painless (the OpenSearch node): there both scorings
can run side by side. The Elasticsearch node from Maven Central has no Painless; there
scripts/engine_check.py compares its (native) answers with OpenSearch's (script) ones."""

from __future__ import annotations

from typing import Any

import pytest

from kemem_es.contract.params import QueryParams
from tests.support import DEMO_NOW, DEMO_QUERIES, demo_store, drop_prefix

pytestmark = pytest.mark.engine
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def demo(engine_settings, embedder):
    km = demo_store(engine_settings, embedder, "native")
    if not km.engine.painless:
        drop_prefix(km)
        pytest.skip("the engine has no Painless: script scoring cannot run (engine_check.py)")
    yield km
    drop_prefix(km)


def raw_answers(km: Any, scoring: str, mode: str, path: str) -> list[list[tuple[str, float]]]:
    """Each demo query's ranked events and entities as (id, unrounded score)."""
    searcher = km.searcher
    searcher.engine.dialect.scoring = scoring
    out: list[list[tuple[str, float]]] = []
    rank_events, score_entities = searcher.rank_events, searcher.score_entities

    def ranked(*a: Any, **kw: Any) -> Any:
        got = rank_events(*a, **kw)
        out.append([(h["_id"], s) for _, h, s, _ in got[0]])
        return got

    def entities(*a: Any, **kw: Any) -> Any:
        got = score_entities(*a, **kw)
        out.append([(h["_id"], s) for h, s in got])
        return got

    searcher.rank_events, searcher.score_entities = ranked, entities
    try:
        for text, user, agent in DEMO_QUERIES:
            params = QueryParams(user_id=user, agent_id=agent, now=DEMO_NOW, limit=8,
                                 score_threshold=0.0, mode=mode, path=path)  # fmt: skip
            searcher.query(text, params)
    finally:
        del searcher.rank_events, searcher.score_entities
        searcher.engine.dialect.scoring = "script"
    return out


@pytest.mark.parametrize("path", ["exact", "approx"])
@pytest.mark.parametrize("mode", ["fusion", "two_stage", "vector", "bm25"])
def test_native_scores_equal_script_scores_on_the_demo(demo, mode: str, path: str) -> None:
    script = raw_answers(demo, "script", mode, path)
    native = raw_answers(demo, "native", mode, path)
    assert sum(len(a) for a in script) > 0
    for s, n in zip(script, native, strict=True):
        assert [i for i, _ in n] == [i for i, _ in s]
        for (_, a), (_, b) in zip(s, n, strict=True):
            assert abs(a - b) <= TOLERANCE
