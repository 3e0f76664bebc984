"""Query building without an engine: weights, one-character rule, scripts free of user text."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

from kemem_es.contract.params import QueryParams, Weights
from kemem_es.engine.dialect import Elasticsearch, OpenSearch
from kemem_es.search import events as ev
from kemem_es.search.clauses import (
    EVENT_FIELDS,
    SearchWord,
    coverage_clauses,
    coverage_parts,
    keyword_clauses,
    matched_words,
)
from kemem_es.search.entities import BRIDGE_WINDOW, entity_body
from kemem_es.search.fusion import rrf_merge


def boosts(clauses: list[dict]) -> dict[tuple[str, str], float]:
    """(field, word) → boost, for term / match_phrase clauses and grouped terms queries."""
    out = {}
    for c in clauses:
        ((kind, spec),) = c.items()
        if kind == "terms":
            ((field, values),) = [(k, v) for k, v in spec.items() if k != "boost"]
            out.update({(field, v): spec["boost"] for v in values})
            continue
        ((field, body),) = spec.items()
        out[(field, body.get("value", body.get("query")))] = body["boost"]
    return out


def test_base_words_outweigh_expansions_and_levels_order_expansions() -> None:
    words = [SearchWord("火锅"), SearchWord("麻辣", level=7), SearchWord("聚餐", level=3)]
    b = boosts(keyword_clauses(words, EVENT_FIELDS))
    assert b[("keywords_tok", "火锅")] > b[("keywords_tok", "麻辣")] > b[("keywords_tok", "聚餐")]
    assert b[("keywords", "火锅")] > b[("description_tok", "火锅")]  # keywords field weighs more
    assert ("keywords", "麻辣") not in b  # expansions probe only the tokenised fields


def test_expansions_are_grouped_by_level_into_terms_queries() -> None:
    words = [
        SearchWord(w, level=lv, tokens=tuple(w.split()))
        for w, lv in [("a", 7), ("b", 7), ("c", 5), ("d e", 7)]
    ]
    clauses = keyword_clauses(words, {"description_tok": 1.0})
    terms = [c["terms"] for c in clauses if "terms" in c]
    assert sorted(t["description_tok"] for t in terms) == [["a", "b"], ["c"]]
    phrases = [c for c in clauses if "match_phrase" in c]  # multi-token words stay phrases
    assert phrases == [{"match_phrase": {"description_tok": {"query": "d e", "boost": 0.5}}}]


def test_entity_and_event_hits_read_only_the_fields_the_searches_fetch() -> None:
    """The searches fetch a few fields of each hit (SOURCE_FIELDS): an answer assembled from
    them equals one assembled from the whole stored document, for every field the mapping has."""
    from pathlib import Path

    from kemem_es.search import entities as en
    from kemem_es.search.hits import entity_hit, event_hit
    from kemem_es.store.layout import SLOTS_FIELD, SUBJECT_FIELD

    templates = Path(en.__file__).resolve().parents[1] / "index_templates"
    words = [SearchWord("豆包"), SearchWord("柯基")]
    now = datetime(2026, 11, 30, 8, 0)
    for kind, fields in (("entities", en.SOURCE_FIELDS), ("events", ev.SOURCE_FIELDS)):
        mapping = json.loads((templates / f"{kind}.json").read_text())["mappings"]["properties"]
        assert set(fields) <= set(mapping)
        full = {name: f"{name} 豆包 柯基" for name in mapping}
        full.update(kind="用户属性", db="user", entity_type="具体实体", slots=["pet"])
        full.update(updatetime="2026-11-01T10:00:00", created_at="2026-10-01T10:00:00")
        full.update(keywords=["豆包"], superseded_by=None, subject="u")
        fetched = {k: v for k, v in full.items() if k in fields}
        hits = [{"_id": "1", "_source": src} for src in (full, fetched)]
        if kind == "entities":
            one, two = (entity_hit(0, h, 0.5, words) for h in hits)
        else:
            one, two = (event_hit(0, "user", h, 0.5, None, now) for h in hits)
        assert one == two
        # the slot order reads the subject and slots; the time order an entity's updatetime
        # (an event's created_at first: the hit comparison above covers it)
        assert {SLOTS_FIELD, SUBJECT_FIELD, "updatetime"} <= set(fields)
    params = QueryParams(agent_id="a", user_id="u")
    assert entity_body(params, words)["_source"] == en.SOURCE_FIELDS


def test_matched_words_are_read_off_the_stored_tokens() -> None:
    src = {"keyword": "兴趣", "keyword_tok": "兴趣", "description_tok": "木木 喜欢 画画 猫"}
    words = [SearchWord("画画"), SearchWord("兴趣", level=5), SearchWord("猫", single_char=True)]
    got = matched_words(src, words, ["keyword", "keyword_tok", "description_tok"])
    assert got == ["画画", "兴趣"]  # 猫 is one character: never matched in a description


def test_strategy_one_levels_above_seven_never_reach_a_base_word() -> None:
    assert SearchWord("x", level=11).boost < SearchWord("x").boost


def test_one_character_words_never_search_descriptions() -> None:
    fields = {
        f
        for c in keyword_clauses([SearchWord("猫", single_char=True)], EVENT_FIELDS)
        for spec in c.values()
        for f in spec
    }
    assert fields == {"keywords", "keywords_tok"}


def test_multi_token_words_become_phrases() -> None:
    word = SearchWord("圣诞装饰", tokens=("圣诞", "装饰"))
    clauses = keyword_clauses([word], {"description_tok": 1.0})
    assert clauses == [{"match_phrase": {"description_tok": {"query": "圣诞 装饰", "boost": 1.0}}}]


def test_weights_must_sum_to_one() -> None:
    with pytest.raises(ValidationError, match="sum to 1"):
        Weights(kw=0.5, vec=0.5, time=0.5, strength=0.0)


HOSTILE = "'); System.exit(0); //\" + params"


@pytest.mark.parametrize("dialect_cls", [OpenSearch, Elasticsearch])
@pytest.mark.parametrize("mode", ["fusion", "two_stage"])
def test_user_text_only_travels_as_params_or_values(dialect_cls, mode: str) -> None:
    dialect = dialect_cls()
    params = QueryParams(agent_id=HOSTILE, user_id=HOSTILE, exclude_ids=[HOSTILE])
    clauses = keyword_clauses([SearchWord(HOSTILE)], EVENT_FIELDS)
    build = ev.event_body if mode == "fusion" else ev.two_stage_body
    body = build(dialect, "user", params, clauses, [0.1] * 4, datetime(2025, 1, 1), False)
    sources, values = [], []

    def walk(node):
        if isinstance(node, str):
            values.append(node)
        elif isinstance(node, dict):
            for k, v in node.items():
                if k == "source" and isinstance(v, str):
                    sources.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(body)
    assert sources, "the fused query uses scripts"
    assert all(
        s
        in (
            ev.KW_SCRIPT,
            ev.COVERAGE_SCRIPT,
            ev.STRENGTH_SCRIPT,
            "knn_score",
            "(cosineSimilarity(params.qv, params.field) + 1.0) / 2.0",
        )
        for s in sources
    )
    assert HOSTILE in values  # it is there, but only as a query value


def test_scope_filters_every_database() -> None:
    assert ev.scope_filters("user", "a", "u") == [
        {"term": {"db": "user"}},
        {"term": {"agent_id": "a"}},
        {"term": {"user_id": "u"}},
    ]
    official = ev.scope_filters("official", "a", "u")
    assert {"term": {"db": "official"}} in official
    assert not any("user_id" in f["term"] for f in official)


def test_approximate_path_windows_ann_and_keyword_candidates_then_rescores() -> None:
    dialect = OpenSearch()
    params = QueryParams(agent_id="a", user_id="u", ann_k=50, kw_window=30)
    clauses = [{"term": {"keywords": "x"}}]
    body = ev.event_body(dialect, "official", params, clauses, [0.1], datetime(2025, 1, 1), True)
    first = body["query"]["bool"]
    ann = first["should"][-1]["constant_score"]
    assert ann["boost"] == ev.ANN_BOOST and "knn" in ann["filter"]
    assert first["minimum_should_match"] == 1  # only ANN neighbours and keyword matches
    rescore = body["rescore"]
    assert rescore["window_size"] == 80
    assert rescore["query"]["query_weight"] == 0.0  # the fused score alone decides
    fs = rescore["query"]["rescore_query"]["function_score"]
    # coverage is the query's own score, scaled to w_kw and summed with the functions
    assert fs["boost_mode"] == "sum"
    assert fs["query"]["bool"]["boost"] == params.weights.kw
    assert fs["query"]["bool"]["must"][0]["bool"]["should"] == clauses
    assert "min_score" not in body  # min_score would act before rescoring
    exact = ev.candidate_query("user", params, [])
    assert "minimum_should_match" not in exact["bool"]  # every memory in scope is a candidate


def test_word_pairs_score_the_window_but_do_not_choose_it() -> None:
    """Proximity clauses add to the coverage of the memories scored. On the approximate path
    they stay out of the keyword window's choice: over a heavy user's scope they cost more
    than the rest of the request (round 10: 20,000 long English memories, +3.3 ms there)."""
    dialect = OpenSearch()
    params = QueryParams(agent_id="a", user_id="u")
    clauses = [{"term": {"keywords": "x"}}]
    pair = {"constant_score": {"filter": {"intervals": {}}, "boost": 0.4}}
    args = (dialect, "user", params, clauses, [0.1], datetime(2025, 1, 1))
    approx = ev.event_body(*args, True, proximity=[pair])
    assert pair not in approx["query"]["bool"]["should"]
    rescored = approx["rescore"]["query"]["rescore_query"]["function_score"]["query"]
    assert rescored["bool"]["must"][0]["bool"]["should"] == [*clauses, pair]
    exact = ev.event_body(*args, False, proximity=[pair])
    assert exact["query"]["function_score"]["query"]["bool"]["must"][0]["bool"]["should"] == [
        *clauses,
        pair,
    ]
    staged = ev.two_stage_body(*args, False, proximity=[pair])
    assert json.dumps(pair) in json.dumps(staged["query"])


def test_earlier_turns_words_score_the_window_but_choose_it_only_without_utterance_words() -> None:
    """A chat turn's earlier-turn words add to the coverage of every memory scored, on both
    paths. On the approximate path the utterance's own words and the ANN (whose window vector
    holds the earlier turns) choose the window: the earlier turns' common words matched much of
    a 100,000-memory scope, most of a chat turn's extra engine time. An utterance with no word
    of its own ("对啊 就那回") lets them choose it."""
    dialect = OpenSearch()
    params = QueryParams(agent_id="a", user_id="u")
    own = {"dis_max": {"queries": [{"term": {"keywords": "火锅"}}]}}
    earlier = {"dis_max": {"queries": [{"term": {"keywords": "同事"}}]}}
    args = (dialect, "user", params, [own], [0.1], datetime(2025, 1, 1))
    approx = ev.event_body(*args, True, earlier=[earlier])
    window = approx["query"]["bool"]["should"]
    assert own in window and earlier not in window
    rescored = approx["rescore"]["query"]["rescore_query"]["function_score"]["query"]
    assert rescored["bool"]["must"][0]["bool"]["should"] == [own, earlier]
    exact = ev.event_body(*args, False, earlier=[earlier])
    assert exact["query"]["function_score"]["query"]["bool"]["must"][0]["bool"]["should"] == [
        own,
        earlier,
    ]
    vague = ev.event_body(dialect, "user", params, [], [0.1], datetime(2025, 1, 1), True,
                          earlier=[earlier])  # fmt: skip
    assert earlier in vague["query"]["bool"]["should"]


def test_fusion_sends_earlier_turns_words_apart_and_the_other_modes_with_the_rest() -> None:
    words = [
        SearchWord("火锅", weight=1.0),
        SearchWord("同事", level=4, weight=0.5, context=True, earlier=True),
        SearchWord("豆包", level=4, weight=1.0, context=True),  # a bridge: the utterance's
        SearchWord("麻辣烫", level=6, weight=0.0),
    ]
    own, earlier = coverage_parts(words)
    assert len(earlier) == 1 and "同事" in json.dumps(earlier, ensure_ascii=False)
    assert "豆包" in json.dumps(own, ensure_ascii=False)  # a bridge chooses the window
    assert "麻辣烫" in json.dumps(own, ensure_ascii=False)  # so do expansions
    # the same clauses, the same shares: only who chooses the window differs
    assert sorted(map(json.dumps, coverage_clauses(words))) == sorted(
        map(json.dumps, [*own, *earlier])
    )


def test_entity_recall_is_one_search_scored_by_evidence() -> None:
    params = QueryParams(agent_id="a", user_id="u")
    body = entity_body(params, [SearchWord("画画")])
    query = body["query"]["bool"]
    assert query["boost"] == 0.6  # 0.6 × coverage, no script
    candidates = query["filter"][-1]["bool"]["should"]
    scoped = {tuple(c["bool"]["filter"][0]["terms"]["kind"]): c for c in candidates if "bool" in c}
    # candidates: descriptions for tier 2 only, entity names for tier 3 only
    assert "description_tok" in json.dumps(scoped[("用户属性", "用户关系")])
    assert "entity_name" in json.dumps(scoped[("特殊实体属性", "与其它实体的关系")])
    assert query["should"] and "dis_max" in query["should"][0]  # coverage is the evidence
    assert entity_body(params, []) is None
    # the best by evidence: at least the bridge's window, whatever is shown; the searcher
    # shows the best `entity_limit` of them, by tier
    assert body["size"] == BRIDGE_WINDOW > params.limit
    for shown in (0, 1, 30):
        wide = entity_body(params.model_copy(update={"entity_limit": shown}), [SearchWord("画")])
        assert wide["size"] == max(shown, BRIDGE_WINDOW)


def test_an_entity_the_turn_names_gets_a_bonus_and_english_skips_the_cosine() -> None:
    dialect = OpenSearch()
    params = QueryParams(agent_id="a", user_id="u")
    words = [SearchWord("年糕"), SearchWord("猫", level=3)]  # an expansion never names
    should = entity_body(params, words, dialect, [0.1] * 4)["query"]["bool"]["should"]
    named = [c["constant_score"] for c in should if "constant_score" in c]
    assert named == [{"filter": {"terms": {"entity_name_tok": ["年糕"]}}, "boost": 0.1 / 0.6}]
    # English: coverage × 2.5 and the name, no cosine rescore (ANN candidates stay)
    latin = params.model_copy(update={"entity_weights": params.latin_entity_weights})
    body = entity_body(latin, [SearchWord("linda")], dialect, [0.1] * 4)
    assert body["query"]["bool"]["boost"] == 2.5 and "rescore" not in body
    assert any("knn" in c for c in body["query"]["bool"]["filter"][-1]["bool"]["should"])
    off = QueryParams(agent_id="a", user_id="u", entity_weights={"name": 0.0})
    assert not any(
        "constant_score" in c for c in entity_body(off, words)["query"]["bool"]["should"]
    )


def test_entity_candidates_include_nearest_in_meaning() -> None:
    dialect = OpenSearch()
    params = QueryParams(agent_id="a", user_id="u", entity_limit=3)
    body = entity_body(params, [SearchWord("狗")], dialect, [0.1] * 4)
    candidates = body["query"]["bool"]["filter"][-1]["bool"]
    assert any("knn" in c for c in candidates["should"])
    rescore = body["rescore"]["query"]["rescore_query"]["function_score"]
    assert "knn_score" in json.dumps(rescore)  # the vector term, on the best candidates only
    assert body["rescore"]["window_size"] >= 2 * params.entity_limit


def test_rrf_rewards_agreement() -> None:
    bm25 = [("user", {"_id": "a"}), ("user", {"_id": "b"})]
    vec = [("user", {"_id": "b"}), ("user", {"_id": "c"})]
    merged = rrf_merge([bm25, vec], k=60)
    assert merged[0][1]["_id"] == "b"
    assert merged[0][2] <= 1.0


def test_a_failed_search_names_its_reason_even_without_a_root_cause() -> None:
    """OpenSearch can answer 503 "all shards failed" with an empty ``root_cause`` list: the
    error is still an EngineUnavailable with the engine's reason, not an IndexError."""
    from kemem_es.errors import EngineUnavailable
    from kemem_es.search.searcher import raise_engine_error

    empty = {"root_cause": [], "type": "search_phase_execution_exception"}
    with pytest.raises(EngineUnavailable, match="all shards failed"):
        raise_engine_error({"error": {**empty, "reason": "all shards failed"}, "status": 503})
    with pytest.raises(EngineUnavailable, match="search_phase_execution_exception"):
        raise_engine_error({"error": empty, "status": 503})
    cause = {"root_cause": [{"reason": "too many clauses"}], "reason": "all shards failed"}
    with pytest.raises(EngineUnavailable, match="too many clauses"):
        raise_engine_error({"error": cause})
    with pytest.raises(EngineUnavailable, match="an index is missing"):
        raise_engine_error({"error": {"root_cause": [], "type": "index_not_found_exception"}})


def test_a_document_the_engine_failed_to_read_is_not_a_missing_memory() -> None:
    """An mget answers per document. A missing document, or one whose index does not exist, is
    a miss; a document the engine could not read (OpenSearch 3.5 after a scroll over its index:
    ``already_closed_exception``) raises with what to do, instead of reading as NotFound."""
    from kemem_es.engine.errors import found as _found
    from kemem_es.errors import EngineUnavailable

    assert _found({"_index": "i", "_id": "a", "found": True, "_source": {}})
    assert not _found({"_index": "i", "_id": "a", "found": False})
    missing = {"root_cause": [{"type": "index_not_found_exception"}], "reason": "no such index"}
    assert not _found({"_index": "i", "_id": "a", "error": missing})
    closed = {
        "root_cause": [{"type": "already_closed_exception", "reason": "Already closed: x.vec"}],
        "type": "no_shard_available_action_exception",
        "reason": "No shard available",
    }
    with pytest.raises(EngineUnavailable, match=r"Already closed: x\.vec — .*close and reopen"):
        _found({"_index": "i", "_id": "a", "error": closed})
