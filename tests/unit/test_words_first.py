"""Who nominates fusion's candidates, per model and script (embed.calibrate.candidates): where
the model separates a script's meanings poorly, the memories a search word matches come first
and the vector's own picks only fill the limit after them (bench/results/2026-11-29-en)."""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.embed.calibrate import REFERENCE, apply, calibration, reference, stored_params
from kemem_es.engine.dialect import OpenSearch
from kemem_es.search import events as ev
from kemem_es.search.event_search import EventSearch
from kemem_es.search.modes import BodyArgs, mode_bodies, vector_only_reach, words_first
from kemem_es.search.profile import script_params

# all-MiniLM-L6-v2 as calibrate.measure gives it: strong on English, weak on Chinese
MINILM = {
    "zh": {"unrelated": 0.5005, "paraphrase": 0.6338, "memories": 0.5411, "auc": 0.829},
    "en": {"unrelated": 0.0842, "paraphrase": 0.5616, "memories": 0.2367, "auc": 0.998},
}
P = QueryParams(agent_id="a", user_id="u", limit=10, score_threshold=0.0)
CLAUSES = [{"term": {"keywords": "dog"}}]


def test_the_calibration_says_per_script_whether_the_vector_nominates() -> None:
    m3e = reference()["params"]  # strong on Chinese, weak on English
    assert (m3e["vector_candidates"], m3e["latin_vector_candidates"]) == (True, False)
    defaults = QueryParams(agent_id="a", user_id="u")  # the reference's values are the defaults
    assert (defaults.vector_candidates, defaults.latin_vector_candidates) == (True, False)
    minilm = calibration(MINILM, "minilm", 384)["params"]
    assert (minilm["vector_candidates"], minilm["latin_vector_candidates"]) == (False, True)


def test_a_calibration_stored_before_the_rule_gets_it_from_its_stats() -> None:
    """An index calibrated by an older kemem-es (params without the keys) is not measured
    again and does not take m3e's defaults: MiniLM's English keeps its vector candidates."""
    old = calibration(MINILM, "minilm", 384)
    for key in ("vector_candidates", "latin_vector_candidates"):
        del old["params"][key]
    assert stored_params(old)["latin_vector_candidates"] is True
    got = apply(QueryParams(agent_id="a", user_id="u"), old)
    assert got.latin_vector_candidates is True and got.vector_candidates is False
    # what a calibration stores wins over its stats; none, or no stats: the defaults
    old["params"]["latin_vector_candidates"] = False
    assert stored_params(old)["latin_vector_candidates"] is False
    assert "vector_candidates" not in stored_params({"params": {}, "stats": {"zh": {}}})
    assert stored_params({"stats": REFERENCE})["latin_vector_candidates"] is False


def test_latin_queries_take_the_latin_value_unless_the_caller_chose() -> None:
    latin, profile = script_params(P, ["my dog has been sneezing all week"])
    assert profile == "latin" and latin.vector_candidates is False
    chinese, _ = script_params(P, ["我家狗狗最近老打喷嚏"])
    assert chinese.vector_candidates is True  # Chinese queries never see the latin value
    mine = P.model_copy(update={"vector_candidates": True})
    object.__setattr__(mine, "__pydantic_fields_set__", {*P.model_fields_set, "vector_candidates"})
    kept, _ = script_params(mine, ["my dog has been sneezing all week"])
    assert kept.vector_candidates is True


def _requires(body: dict[str, Any]) -> bool:
    """Whether the body's candidates must match a word (a ``minimum_should_match`` 1)."""
    return '"minimum_should_match": 1' in json.dumps(body["query"])


def _fusion_bodies(params: QueryParams, clauses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    args = BodyArgs(OpenSearch(), "user", params, clauses, [0.1], datetime(2025, 1, 1), False)
    return mode_bodies(args)


def test_words_first_sends_the_words_body_and_the_fill() -> None:
    latin, _ = script_params(P, ["my dog"])
    first, fill = _fusion_bodies(latin, CLAUSES)
    assert _requires(first) and not _requires(fill)
    # the vector's candidates as before: one body, which requires no word
    (plain,) = _fusion_bodies(latin.model_copy(update={"vector_candidates": True}), CLAUSES)
    assert not _requires(plain) and plain == fill
    # no word to nominate: the vector alone
    (alone,) = _fusion_bodies(latin, [])
    assert not _requires(alone) and not words_first(latin, False)


def test_no_fill_where_no_memory_without_a_word_can_clear_the_threshold() -> None:
    latin, _ = script_params(P, ["my dog"])
    reach = vector_only_reach(latin)
    # m3e's latin profile: 0.13 of a vector term at cosine 1, plus time and strength
    assert reach == pytest.approx(0.13 * (1 - 0.45) / 0.18 + 0.05)
    assert reach < 0.5  # so at the default threshold a query sends one body, as before
    (only,) = _fusion_bodies(latin.model_copy(update={"score_threshold": 0.5}), CLAUSES)
    assert _requires(only)
    assert len(_fusion_bodies(latin.model_copy(update={"score_threshold": reach}), CLAUSES)) == 2


def _hit(doc: str, raw: float) -> dict[str, Any]:
    return {"_index": "t-user-events", "_id": doc, "_score": raw, "_source": {"id": doc}}


def _rank(params: QueryParams, responses: list[list[dict[str, Any]]]) -> list[str]:
    searcher = SimpleNamespace(
        engine=SimpleNamespace(settings=SimpleNamespace(index_prefix="t"), dialect=OpenSearch())
    )
    dbs = ["user"] * len(responses)
    answers = [{"hits": {"hits": hits}} for hits in responses]
    out, _ = EventSearch.rank_events(searcher, params, dbs, answers)  # type: ignore[arg-type]
    return [hit["_id"] for _, hit, _, _ in out]


def test_the_fill_ranks_after_every_memory_a_word_matches() -> None:
    latin, _ = script_params(P.model_copy(update={"limit": 3}), ["my dog"])
    off = ev.vec_offset(latin, latin.weights.model_dump())
    words = [_hit("gold", off + 0.30), _hit("other", off + 0.20)]
    fill = [_hit("knn", off + 0.40), _hit("gold", off + 0.30), _hit("knn2", off + 0.10)]
    assert _rank(latin, [words, fill]) == ["gold", "other", "knn"]
    # words that match nothing: the vector's picks, by score
    assert _rank(latin, [[], fill]) == ["knn", "gold", "knn2"]
    # the vector nominating as well (one body): one list by score, as before
    nominating = latin.model_copy(update={"vector_candidates": True})
    assert _rank(nominating, [fill]) == ["knn", "gold", "knn2"]


def test_status_says_where_the_words_come_first() -> None:
    from kemem_es.cli.data import calibration_line

    line = calibration_line(calibration(MINILM, "minilm", 384))
    assert "(kw/vec 0.82/0.13, words first), latin" in line
    assert "words first" not in line.split("latin")[1]
    assert "latin 0.450–0.630 (kw/vec 0.82/0.13, words first)" in calibration_line(reference())


def test_a_caller_who_chose_the_weights_takes_the_default_profile_whole() -> None:
    from kemem_es.contract.params import Weights

    chosen = QueryParams(agent_id="a", user_id="u", weights=Weights())
    kept, profile = script_params(chosen, ["my dog has been sneezing all week"])
    assert profile == "default" and kept.vector_candidates is chosen.vector_candidates is True
