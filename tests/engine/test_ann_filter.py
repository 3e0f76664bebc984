"""The ANN clause drops its copy of the scope filter only when the scope is the whole index."""

from __future__ import annotations

import json

import pytest

from tests.engine import test_query_engine as tq

pytestmark = pytest.mark.engine


def _knn_filters(searches) -> dict[str, bool]:
    """events index → whether its body's knn clause carries a filter (the entity search goes
    in the same msearch)."""
    out = {}
    for index, body, *_ in searches:
        text = json.dumps(body)
        if index.endswith("-events") and '"knn"' in text:
            knn = body["query"]["bool"]["should"][-1]["constant_score"]["filter"]["knn"]
            out[index] = "filter" in knn["vector"]
    return out


def test_whole_index_scope_skips_the_knn_filter_with_the_same_answer(kemem) -> None:
    km = tq.km.__wrapped__(kemem)
    if km.engine.dialect.name != "opensearch":
        pytest.skip("reads the body of OpenSearch's knn clause (Elasticsearch's has another shape)")
    sent: list = []
    msearch = km.engine.msearch

    def spy(searches):
        sent.extend(searches)
        return msearch(searches)

    km.engine.msearch = spy
    got = tq.q(km, "最近总是失眠，晚上睡不着", path="approx")
    flags = _knn_filters(sent)
    # user db: several users share the index → filtered; official db: one agent → not needed
    assert flags == {
        f"{km.settings.index_prefix}-user-events": True,
        f"{km.settings.index_prefix}-official-events": False,
    }
    want = tq.q(km, "最近总是失眠，晚上睡不着", path="exact")
    assert {e.index for e in got.memory_events} <= {e.index for e in want.memory_events}
    for e in got.memory_events:
        match = next(w for w in want.memory_events if w.index == e.index)
        assert e.score == pytest.approx(match.score, abs=1e-4)

    # another agent's official memory: the scope is no longer the whole index
    km.index_records(
        [tq.ev("other-1", "别的角色的设定", "2015-07-01 18:00:00", user=None, agent="another")],
        "events",
        "official",
    )
    km.searcher._counts.clear()
    sent.clear()
    tq.q(km, "最近总是失眠，晚上睡不着", path="approx")
    assert _knn_filters(sent)[f"{km.settings.index_prefix}-official-events"] is True
