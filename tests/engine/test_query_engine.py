"""Hybrid query behaviour on the real engine, with small hand-made fixtures."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.embed.calibrate import apply as calibrated
from kemem_es.expand import Expander, Lexicon
from kemem_es.models import EntityRecord, EventRecord

pytestmark = pytest.mark.engine

NOW = datetime(2025, 6, 1, 12, 0, 0)
A, U1, U2 = "qiyu", "u1", "u2"


def ev(id_: str, text: str, when: str, user: str | None = U1, keywords=(), agent: str = A):
    return EventRecord(
        id=id_,
        agent_id=agent,
        user_id=user,
        description=text,
        keywords=list(keywords),
        created_at=when,
    )


EVENTS = [
    ev(
        "kw-only",
        "木木买了一本关于失眠的科普书，放在书架上。",
        "2025-05-01 10:00:00",
        keywords=["失眠", "书"],
    ),
    ev("vec-only", "木木说她这几天夜里翻来覆去，难以入眠。", "2025-05-02 23:00:00"),
    ev("noise-1", "木木和朋友去海边放风筝，风很大。", "2025-05-03 15:00:00", keywords=["风筝"]),
    ev("noise-2", "木木在公司加班做季度报表。", "2025-05-04 20:00:00", keywords=["加班"]),
    ev("old", "木木和室友一起吃了火锅。", "2019-01-05 19:00:00", keywords=["火锅"]),
    ev("new", "木木和室友一起吃了火锅。", "2025-05-20 19:00:00", keywords=["火锅"]),
    ev("other-user", "最近总是失眠，晚上睡不着。", "2025-05-10 23:00:00", user=U2),
]
OFFICIAL = [
    ev(
        "persona-1",
        "祁煜小时候常在海边写生，画过无数次日落。",
        "2015-07-01 18:00:00",
        user=None,
        keywords=["写生", "日落"],
    )
]


def ent(
    id_: str,
    name: str,
    etype: str,
    kind: str,
    keyword: str,
    text: str,
    when: str,
    user: str | None = U1,
) -> EntityRecord:
    return EntityRecord(
        id=id_,
        agent_id=A,
        user_id=user,
        entity_name=name,
        entity_type=etype,
        kind=kind,
        keyword=keyword,
        description=text,
        updatetime=when,
    )


ENTITIES = [
    ent(
        "t4",
        "海边",
        "具体实体",
        "记忆画面",
        "画画",
        "木木记得在海边画画的下午",
        "2025-01-01 10:00:00",
    ),
    ent("t2-old", "木木", "客体", "用户属性", "兴趣", "木木喜欢画画", "2023-01-01 10:00:00"),
    ent(
        "t2-new",
        "木木",
        "客体",
        "用户属性",
        "兴趣",
        "木木最近又开始画画了，用的是水彩",
        "2025-03-01 10:00:00",
    ),
    ent(
        "t1",
        "祁煜",
        "主体",
        "与主体和客体的关系",
        "画画",
        "祁煜是教木木画画的朋友",
        "2024-01-01 10:00:00",
    ),
    ent(
        "t3",
        "画画",
        "泛化实体",
        "特殊实体属性",
        "爱好",
        "祁煜认为画画是和世界对话的方式",
        "2020-01-01 10:00:00",
        user=None,
    ),
    ent(
        "t2-u2", "小雨", "客体", "用户属性", "兴趣", "小雨喜欢画画", "2025-05-01 10:00:00", user=U2
    ),
]


@pytest.fixture()
def km(kemem):
    kemem.init()
    kemem.index_records(EVENTS, "events", "user")
    kemem.index_records(OFFICIAL, "events", "official")
    kemem.index_records([e for e in ENTITIES if e.user_id], "entities", "user")
    kemem.index_records([e for e in ENTITIES if not e.user_id], "entities", "official")
    # A tiny lexicon keeps expectations exact; the shipped one is tested on its own.
    kemem.expander = Expander(Lexicon.from_mapping({"失眠": [("熬夜", 6)]}), kemem.tokenizer)
    return kemem


def ids(resp) -> list[str]:
    return [e.index for e in resp.memory_events]


def q(km, text: str, user: str = U1, **kw):
    kw.setdefault("score_threshold", 0.0)
    kw.setdefault("limit", 10)
    return km.query(text, user_id=user, agent_id=A, now=NOW, **kw)


def test_an_aware_now_decays_from_its_instant(km) -> None:
    """03:00+08:00 is 19:00 UTC the day before: the same decay as that naive (UTC) time."""

    def times(now: str) -> dict[str, float]:
        resp = km.query("火锅", user_id=U1, agent_id=A, now=now, score_threshold=0, explain=True)
        return {e.index: e.signals.time for e in resp.memory_events if e.signals}

    aware = times("2025-06-02T03:00:00+08:00")
    assert aware and aware == times("2025-06-01T19:00:00")
    assert aware != times("2025-06-01T03:00:00")


@pytest.mark.parametrize(
    "now", ["9999-12-31T23:00:00-01:00", "9999-12-31T23:59:59-18:00", "1000-01-01T00:00:00+18:00"]
)
def test_now_at_the_edges_of_the_time_rule_is_answered(km, now: str) -> None:
    """Records take these times, so a query does too: its UTC instant (year 10000 or 999)
    overflowed Python's datetime (a 500) or reached the engine as a year it cannot parse."""
    for degrade in (False, True):
        resp = km.query("火锅", user_id=U1, agent_id=A, now=now, score_threshold=0, degrade=degrade)
        assert {"old", "new"} <= set(ids(resp)) and not resp.additional_info.degraded


def test_keyword_only_and_vector_only_hits_both_surface(km) -> None:
    resp = q(km, "最近总是失眠，晚上睡不着", explain=True)
    got = ids(resp)
    assert "kw-only" in got[:3] and "vec-only" in got[:3]
    by_id = {e.index: e for e in resp.memory_events}
    assert by_id["kw-only"].signals.kw > 0
    assert by_id["vec-only"].signals.kw == 0  # no shared word: it came in on the vector alone
    assert by_id["vec-only"].signals.vec > by_id["noise-2"].signals.vec
    assert got.index("vec-only") < got.index("noise-1")
    w = QueryParams(agent_id=A, user_id=U1).weights.model_dump()
    for e in resp.memory_events:  # the explained signals add up to the answer's score
        fused = sum(w[k] * getattr(e.signals, k) for k in w) + e.signals.anchor
        assert e.score == pytest.approx(min(max(fused, 0.0), 1.0), abs=2e-3)
        assert 0.0 <= e.score <= 1.0
    # the vector term is shown as the score holds it: a close match is above 1, not clamped
    assert max(e.signals.vec for e in resp.memory_events) > 1.0


def test_recent_memory_outranks_an_otherwise_equal_old_one(km) -> None:
    got = ids(q(km, "和室友吃火锅"))
    assert got.index("new") < got.index("old")


def test_threshold_drops_weak_hits(km) -> None:
    everything = q(km, "最近总是失眠，晚上睡不着")
    strict = q(km, "最近总是失眠，晚上睡不着", score_threshold=0.6)
    assert 0 < len(strict.memory_events) < len(everything.memory_events)
    assert all(e.score >= 0.6 for e in strict.memory_events)


def test_users_are_isolated(km) -> None:
    assert "other-user" not in ids(q(km, "最近总是失眠，晚上睡不着"))
    u2 = ids(q(km, "最近总是失眠，晚上睡不着", user=U2))
    assert "other-user" in u2
    assert not {"kw-only", "vec-only", "new"} & set(u2)
    ents = q(km, "画画", user=U2).memory_entities
    assert [e.index["index"] for e in ents if e.db == "user"] == ["t2-u2"]


def test_excluded_ids_never_come_back(km) -> None:
    got = ids(q(km, "最近总是失眠，晚上睡不着", exclude_ids=["kw-only", "vec-only"]))
    assert got and not {"kw-only", "vec-only"} & set(got)


def test_excluded_ids_leave_out_only_the_users_events(km) -> None:
    """exclude_ids name the user's events the prompt already shows (docs/SPEC.md §2): an id is
    unique only within its index, so the agent's official event and the user's entity that
    share one stay."""
    km.index_records(
        [ev("kw-only", "祁煜说失眠的时候可以听海浪声。", "2025-01-01 10:00:00", user=None)],
        "events",
        "official",
    )
    same_id = ent(
        "kw-only", "木木", "客体", "用户属性", "失眠", "木木最近失眠", "2025-05-01 10:00:00"
    )
    km.index_records([same_id], "entities", "user")
    resp = q(km, "最近总是失眠，晚上睡不着", exclude_ids=["kw-only"], entity_threshold=0.0)
    events = {(e.db, e.index) for e in resp.memory_events}
    assert ("user", "kw-only") not in events and ("official", "kw-only") in events
    assert "kw-only" in [e.index["index"] for e in resp.memory_entities]


def test_the_approximate_path_returns_up_to_limit_memories(km) -> None:
    """The ANN is asked for at least as many neighbours as the answer may hold: an utterance
    without search words got at most ``ann_k`` memories, whatever the limit."""
    opts = {"limit": 7, "prefilter": False, "ann_k": 2, "kw_window": 1}  # 6 + 1 in scope
    approx = q(km, "那个", path="approx", **opts)
    assert approx.additional_info.base_words == []
    exact = q(km, "那个", path="exact", **opts)
    assert len(exact.memory_events) > 3  # more than the ANN's 2 + 2 neighbours could hold
    assert set(ids(approx)) == set(ids(exact))


def test_every_answer_times_its_stages_under_documented_names(km) -> None:
    """``检索耗时`` always has ``total`` (a degraded answer had none: ``{}``), and every key is
    a stage name the contract lists (the small-talk skip's ``prefilter`` too)."""
    from kemem_es import Kemem
    from kemem_es.contract.response import STAGES

    down = Kemem(es_url="http://127.0.0.1:9", index_prefix="unreachable")
    degraded = down.query("豆包最近怎么样", user_id=U1, agent_id=A, degrade=True)
    assert degraded.additional_info.degraded
    skipped = q(km, "你好")
    assert skipped.additional_info.skipped == "small_talk"
    for resp in (q(km, "最近总是失眠"), skipped, degraded):
        timings = resp.additional_info.timings_ms
        assert "total" in timings and set(timings) <= set(STAGES), timings


def test_time_order_among_equal_entities_compares_instants(kemem) -> None:
    """Newer first within a tier (docs/SPEC.md §2 step 6) is by the instant: 10:00+08:00 is
    02:00Z, before 05:00Z, though its wall clock reads later; a naive time is UTC."""
    kemem.init()
    when = {
        "older_bj": "2025-05-01T10:00:00+08:00",
        "newer_utc": "2025-05-01T05:00:00+00:00",
        "oldest_naive": "2025-04-30 12:00:00",
    }
    same = [
        ent(i, "木木", "客体", "用户属性", "爱好", "木木喜欢在海边画水彩", t)
        for i, t in when.items()
    ]
    kemem.index_records(same, "entities", "user")
    got = q(kemem, "木木喜欢画水彩吗", entity_threshold=0.0).memory_entities
    assert len({e.score for e in got}) == 1
    assert [e.index["index"] for e in got] == ["newer_utc", "older_bj", "oldest_naive"]


def test_official_memories_reach_every_user_of_the_agent(km) -> None:
    for user in (U1, U2, "someone-new"):
        assert "persona-1" in ids(q(km, "海边写生看日落", user=user))
    other_agent = km.query(
        "海边写生看日落", user_id=U1, agent_id="lishen", now=NOW, score_threshold=0.0
    )
    assert other_agent.memory_events == []


def test_entity_tiers_in_order_with_matched_keywords(km) -> None:
    ents = q(km, "画画", entity_threshold=0.0).memory_entities
    got = [e.index["index"] for e in ents]
    assert got[0] == "t1" and set(got[1:3]) == {"t2-new", "t2-old"} and got[3:] == ["t3", "t4"]
    assert [e.tier for e in ents] == [1, 2, 2, 3, 4]
    assert all("画画" in e.matched_keywords for e in ents)
    assert all(0.0 < e.score <= 1.0 for e in ents)  # scored by evidence, not by tier


def test_entity_limit_and_threshold_are_honoured(km) -> None:
    assert len(q(km, "画画", limit=2, entity_threshold=0.0).memory_entities) == 2
    assert len(q(km, "画画", entity_limit=1, entity_threshold=0.0).memory_entities) == 1
    # an unrelated utterance: nothing clears the default entity threshold
    assert q(km, "公司的季度报表还没做完").memory_entities == []


def test_small_talk_skips_the_search(km) -> None:
    for text in ("你好", "在吗？", "嗯嗯", "哈哈哈哈", "好的", "😀", ""):
        resp = q(km, text)
        assert resp.memory_events == [] and resp.memory_entities == []
        assert resp.additional_info.skipped == "small_talk"
        assert "search_events" not in resp.additional_info.timings_ms
    assert q(km, "你好", prefilter=False).additional_info.skipped is None


def test_context_turns_add_words_and_labels_never_search(km) -> None:
    resp = q(km, "我也是", context="小雨：我最近总是失眠\n祁煜：怎么了")
    info = resp.additional_info
    assert "失眠" in info.context_words
    assert not {"小雨", "祁煜"} & set(info.context_words + info.base_words)
    assert "kw-only" in ids(resp)[:3]


def test_sub_words_meet_in_both_directions(km) -> None:
    # the corpus says 吃了火锅 (jieba: 吃 了 火锅); 吃火锅 as one token still meets it
    assert ids(q(km, "又想吃火锅了", limit=2)) == ["new", "old"]


def test_same_query_same_result(km) -> None:
    a = q(km, "最近总是失眠，晚上睡不着")
    b = q(km, "最近总是失眠，晚上睡不着")
    assert [(e.index, e.score) for e in a.memory_events] == [
        (e.index, e.score) for e in b.memory_events
    ]
    assert a.memory_entities == b.memory_entities


@pytest.mark.parametrize("mode", ["bm25", "vector", "rrf", "two_stage"])
def test_alternative_modes_run(km, mode: str) -> None:
    got = ids(q(km, "最近总是失眠，晚上睡不着", mode=mode))
    assert got
    if mode in ("bm25", "two_stage"):  # keywords choose the candidates
        assert "vec-only" not in got and "kw-only" in got
    # Every mode's threshold holds on its own score (rrf's too: it was ignored there).
    scored = [e.score for e in q(km, "最近总是失眠，晚上睡不着", mode=mode).memory_events]
    cut = min(1.0, max(scored) + 0.01)
    kept = q(km, "最近总是失眠，晚上睡不着", mode=mode, score_threshold=cut).memory_events
    assert all(e.score >= cut for e in kept), (cut, kept)


def test_response_contract_shape(km) -> None:
    body = q(km, "最近总是失眠，晚上睡不着", limit=2).to_contract()
    assert set(body) == {"memory_events", "memory_entities", "additional_info"}
    info = body["additional_info"]
    assert set(info["检索耗时"]) == {
        "tokenise",
        "expand",
        "embed",
        "search_events",
        "search_entities",
        "assemble",
        "total",
    }
    assert all(isinstance(v, float) for v in info["检索耗时"].values())
    assert "失眠" in info["给联想的基词"]
    assert {"熬夜": 6} in info["扩展后联想词"]
    assert info["分词"] and info["query"] == "最近总是失眠，晚上睡不着"
    event = body["memory_events"][0]
    for key in (
        "id",
        "score",
        "index",
        "description",
        "deepinsight",
        "updatetime",
        "keyword",
        "log",
    ):
        assert key in event
    assert event["log"].startswith("[记忆事件]--score=")


def test_approximate_path_unions_ann_and_keyword_candidates(km) -> None:
    resp = q(km, "最近总是失眠，晚上睡不着", path="approx", explain=True)
    got = ids(resp)
    assert "kw-only" in got and "vec-only" in got
    exact = q(km, "最近总是失眠，晚上睡不着", path="exact")
    # Same fused formula on the same candidates: the scores agree with the exact path.
    exact_scores = {e.index: e.score for e in exact.memory_events}
    for e in resp.memory_events:
        assert e.score == pytest.approx(exact_scores[e.index], abs=1e-4)


def test_one_character_base_words_search_but_are_not_expanded(km) -> None:
    lexicon = Lexicon.from_mapping({"吃": [("好吃", 7)], "火锅": [("麻辣", 6)]})
    km.expander = Expander(lexicon, km.tokenizer)
    info = q(km, "想吃，火锅").additional_info
    assert "吃" in info.base_words
    assert {"麻辣": 6} in info.expanded_words
    assert {"好吃": 7} not in info.expanded_words


def test_query_before_init_is_a_clear_error(kemem) -> None:
    from kemem_es.errors import EngineUnavailable

    with pytest.raises(EngineUnavailable, match="init"):
        kemem.query("最近总是失眠", user_id=U1, agent_id=A)


def test_sentence_vectors_are_scored_by_the_engine_as_documented(km) -> None:
    """vector mode: score = ((1 − s)·(1 + cos_whole)/2 + s·max_j (1 + cos_j)/2 − lo) / span, with
    the stored vectors and the query's own (rounded) vectors."""
    import numpy as np

    from kemem_es.search import events as evs
    from kemem_es.store.layout import index_alias

    text = "最近总是失眠，晚上睡不着。周末想去海边放风筝"
    # on the index's scale: measured from the model where the index was made (the int8
    # model's cosines move a little with the CPU's kernels, so not always the constants)
    params = calibrated(
        QueryParams(agent_id=A, user_id=U1, mode="vector", sentence_weight=0.5),
        km.searcher.calibration(),
    )
    whole, _, parts = km.searcher.text.query_vector(text, [], params)
    assert len(parts) == 2
    alias = index_alias(km.engine.settings.index_prefix, "user", "events")
    body = {"query": {"term": {"user_id": U1}}, "_source": ["id", "vector"], "size": 50}
    stored = {
        h["_source"]["id"]: np.asarray(h["_source"]["vector"])
        for h in km.engine.search(alias, body)["hits"]["hits"]
    }
    lo, span = evs.vec_scale(params)

    def expected(doc: str, s: float) -> float:
        """The vector term on the model's scale, before the score's clamp."""
        v = stored[doc]
        best = max((1 + v @ np.asarray(p)) / 2 for p in parts)
        raw = (1 - s) * (1 + v @ np.asarray(whole)) / 2 + s * best
        return (raw - lo) / span

    for s in (0.5, 0.0):
        resp = q(km, text, mode="vector", sentence_weight=s, explain=True)
        assert resp.memory_events
        for e in resp.memory_events:
            if e.db == "user":
                assert e.signals.vec == pytest.approx(expected(e.index, s), abs=2e-3)
                assert e.score == pytest.approx(min(max(e.signals.vec, 0.0), 1.0), abs=2e-3)
    # the kite memory answers the second sentence: its share lifts it (a high ceiling keeps
    # both scores below the clamp at 1)
    opts = {"mode": "vector", "vec_ceil": 0.99}
    with_s = {e.index: e.score for e in q(km, text, **opts).memory_events}
    without = {e.index: e.score for e in q(km, text, sentence_weight=0, **opts).memory_events}
    assert with_s["noise-1"] > without["noise-1"] + 0.02


def test_explained_signals_add_up_with_sentence_vectors(km) -> None:
    resp = q(km, "最近总是失眠，晚上睡不着。周末想去海边放风筝", explain=True)
    w = QueryParams(agent_id=A, user_id=U1).weights.model_dump()
    for e in resp.memory_events:
        fused = sum(w[k] * getattr(e.signals, k) for k in w) + e.signals.anchor
        assert e.score == pytest.approx(min(max(fused, 0.0), 1.0), abs=3e-3)
    # the approximate path rescores its window with the same formula
    approx = q(km, "最近总是失眠，晚上睡不着。周末想去海边放风筝", path="approx")
    exact = {e.index: e.score for e in resp.memory_events}
    for e in approx.memory_events:
        assert e.score == pytest.approx(exact[e.index], abs=1e-4)


def test_a_confident_best_memory_lifts_the_ones_close_to_it_in_meaning(kemem, embedder) -> None:
    """Anchor feedback: the best hit leads clearly, so each other hit of the window gains
    0.2 · max(0, cos − 0.7) / 0.3 of its cosine to it, read off the vector codes the engine
    returns; the best hit stays first and nothing changes without the feedback."""
    kemem.init()
    texts = {
        "birthday": "生日那天和小林去吃了海底捞火锅，她点了一大盘毛肚，还唱了生日歌。",
        "spicy": "上个月和小林一起吃火锅，她被辣得直喝酸梅汤。",
        "meeting": "下午在公司开了三个小时的会，讨论下季度的预算。",
        "library": "周末去图书馆借了两本推理小说。",
    }
    kemem.index_records(
        [ev(k, t, "2025-05-01 10:00:00", user="u_anchor") for k, t in texts.items()],
        "events",
        "user",
    )
    scope = {"user_id": "u_anchor", "agent_id": A, "now": NOW, "score_threshold": 0.0}
    text = "生日那天和小林吃的海底捞火锅，毛肚真好吃"
    on = kemem.query(text, explain=True, **scope).memory_events
    off = kemem.query(text, explain=True, anchor_weight=0.0, **scope).memory_events
    assert on[0].index == off[0].index == "birthday"
    assert off[0].score - off[1].score >= 0.1  # a confident anchor
    vec = dict(zip(texts, embedder.embed(list(texts.values())), strict=True))
    own = {e.index: e.score for e in off}
    for e in on[1:]:
        cos = float(vec[e.index] @ vec["birthday"])
        assert e.signals.anchor == pytest.approx(0.2 * max(0.0, cos - 0.7) / 0.3, abs=3e-3)
        assert e.score == pytest.approx(own[e.index] + e.signals.anchor, abs=1e-3)
    assert {e.index: e.signals.anchor for e in on}["spicy"] > 0.05
    assert all(e.signals.anchor == 0.0 for e in off)


def test_a_confident_best_memory_lifts_the_ones_close_to_it_in_time(kemem) -> None:
    """Temporal contiguity: the night after the breakup shares hardly a word with a question
    about the breakup, but it happened the next morning; the other memories lie months apart.
    With the closeness in meaning off, each hit gains w · 0.5^(gap / h), h being a share of the
    median gap between the best hit and the others, read off the times the engine returns."""
    p = QueryParams(agent_id=A, user_id="u")
    w, share = p.contiguity_weight, p.contiguity_scale
    kemem.init()
    memories = {
        "breakup": ("七夕那天周屿在湖边提了分手，小满把那杯冰美式喝完了。", "2023-08-22 20:00:00"),
        "photos": ("小满一夜没睡，把相册里两个人的照片一张张删掉，天亮了。", "2023-08-23 06:00:00"),
        "run": ("小满参加了一场十公里路跑，跑到第八公里小腿抽筋。", "2022-04-10 09:00:00"),
        "exam": ("考研初试第一天早上，小满在考场外啃着面包。", "2021-12-25 08:00:00"),
        "dog": ("小满第一次带狗去宠物店洗澡美容，回来头上扎了个小辫子。", "2024-06-01 15:00:00"),
        "hotpot": ("毕业前宿舍四个人吃了一顿散伙火锅。", "2021-06-20 19:00:00"),
        "trip": ("小满去了一趟青海湖，第一晚高反头疼得睡不着。", "2024-10-03 22:00:00"),
    }  # fmt: skip
    user = "u_contiguity"
    kemem.index_records(
        [ev(k, text, when, user=user) for k, (text, when) in memories.items()], "events", "user"
    )
    scope = {"user_id": user, "agent_id": A, "now": NOW, "score_threshold": 0.0, "limit": 30}
    text = "七夕那天他在湖边跟我提分手，我把冰美式一口一口喝完了"
    on = kemem.query(text, explain=True, anchor_weight=0.0, **scope).memory_events
    off = kemem.query(text, explain=True, anchor_weight=0.0, contiguity_weight=0.0, **scope)
    off_hits = off.memory_events
    assert on[0].index == off_hits[0].index == "breakup" and len(on) == len(memories)
    assert off_hits[0].score - off_hits[1].score >= 0.1  # a confident anchor

    def days(when: str) -> float:
        return datetime.fromisoformat(when).timestamp() / 86400

    t0 = days(memories["breakup"][1])
    h = share * float(
        np.median([abs(days(t) - t0) for k, (_, t) in memories.items() if k != "breakup"])
    )
    own = {e.index: e.score for e in off_hits}
    for e in on[1:]:
        gap = abs(days(memories[e.index][1]) - t0)
        assert e.signals.anchor == pytest.approx(w * 0.5 ** (gap / h), abs=1e-3)
        assert e.score == pytest.approx(own[e.index] + e.signals.anchor, abs=1e-3)
    assert on[1].index == "photos" and on[1].signals.anchor > 0.9 * w
    assert all(e.signals.anchor == 0.0 for e in off_hits)


def test_a_vague_last_turn_recalls_the_topic_of_earlier_turns(km) -> None:
    # the topic (风筝) is six turns back; the last turn alone names nothing
    context = (
        "木木：周末我去海边放风筝了\n祁煜：风大吗？\n木木：然后就回家了\n"
        "祁煜：累不累？\n木木：还好\n祁煜：下次还去吗？"
    )
    assert ids(q(km, "嗯，跟上次一样", context=context))[0] == "noise-1"
    old = q(km, "嗯，跟上次一样", context=context, context_turns=4, context_decay=0.5)
    assert ids(old)[:1] != ["noise-1"]  # the round-2 defaults never saw the topic
    # the same conversation as a chat app keeps it: a list of messages
    chat = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": ln.split("：", 1)[1]}
        for i, ln in enumerate(context.splitlines())
    ]
    assert ids(q(km, "嗯，跟上次一样", context=chat))[0] == "noise-1"


# -- the README's demo examples at the default threshold ---------------------------------------
@pytest.fixture(scope="module")
def demo(engine_settings, embedder):
    from support import demo_store, drop_prefix

    km = demo_store(engine_settings, embedder, "demo-threshold")
    yield km
    drop_prefix(km)


@pytest.mark.parametrize(
    ("text", "user", "agent", "want"),
    [
        ("胃疼", "u_mumu", "lishen", "ev-u_mumu-lishen-0003"),  # 木木's gastritis, no shared word
        (
            "我那只狗最近好像胖了",
            "u_xiaoman",
            "lishen",
            "ev-u_xiaoman-lishen-0037",
        ),  # 豆包 at the vet
    ],
)
def test_the_readme_examples_clear_the_default_threshold(demo, text, user, agent, want) -> None:
    """What the default threshold (0.5) means, with every knob at its default and today's date:
    the memory the README names is recalled (bench.demo_threshold prints the scores)."""
    got = [e.index for e in demo.query(text, user_id=user, agent_id=agent).memory_events]
    assert want in got


def scored(resp) -> list[tuple[str, float]]:
    return [(e.index, e.score) for e in resp.memory_events]


def test_how_many_entities_are_shown_never_changes_the_events(demo) -> None:
    """``entity_limit`` (``limit`` when unset) is how many entities are shown; the entity
    bridge ranks its own window, so 「我那只狗」 still searches 豆包 when none is shown (it
    recalled nothing then), and limit=1's event is the first of limit=5's."""
    text = "我那只狗最近好像胖了"
    for user, agent in (("u_xiaoman", "lishen"), ("u_mumu", "qiyu")):
        scope = {"user_id": user, "agent_id": agent}
        full = demo.query(text, **scope)
        assert full.additional_info.entity_words
        for shown in (0, 1):
            resp = demo.query(text, **scope, entity_limit=shown)
            assert len(resp.memory_entities) == min(shown, len(full.memory_entities))
            assert resp.additional_info.entity_words == full.additional_info.entity_words
            assert scored(resp) == scored(full)
        one = demo.query(text, **scope, limit=1)
        assert scored(one) == scored(full)[:1]
    hidden = demo.query(text, user_id="u_xiaoman", agent_id="lishen", entity_limit=0)
    assert "ev-u_xiaoman-lishen-0037" in [e.index for e in hidden.memory_events]


@pytest.mark.parametrize(
    ("text", "user", "agent"),
    [("猫", "u_mumu", "lishen"), ("室友失恋了，我们陪她吃了一晚上火锅", "u_chengcheng", "qiyu")],
)
def test_rrf_answers_for_a_smaller_limit_are_the_first_of_a_larger_one(
    demo, text, user, agent
) -> None:
    """rrf fuses lists of one window whatever the limit: a memory past the 20th in one list
    scored 0.49 at limit 3 and 0.81 at limit 20."""
    scope = {"user_id": user, "agent_id": agent, "mode": "rrf", "score_threshold": 0.3}
    big = scored(demo.query(text, **scope, limit=20))
    for k in (1, 3, 5, 10):
        assert scored(demo.query(text, **scope, limit=k)) == big[:k], k


def test_hot_pot_ranks_the_hot_pot_nights_first_and_small_talk_recalls_nothing(demo) -> None:
    """The three hot-pot nights with 小雨 lead (their order is the best sentence's: 「小雨说下次
    吃火锅要等她回来」 is nearest the turn), and small talk recalls nothing."""
    top = demo.query("小雨又想吃火锅了", user_id="u_mumu", agent_id="qiyu").memory_events
    nights = {f"ev-u_mumu-qiyu-{n}" for n in ("0008", "0050", "0058")}
    assert {e.index for e in top[:3]} == nights
    for text in ("你好", "嗯嗯，好的", "哈哈哈哈"):
        assert demo.query(text, user_id="u_mumu", agent_id="qiyu").memory_events == []


def test_one_round_trip_unless_an_entity_bridges_and_then_the_same_answer(demo) -> None:
    """Entities and events go to the engine in one _msearch; an entity that bridges (豆包 for
    "我那只狗") sends the event search again with its name, so the answer is what searching
    the entities first gives."""
    from kemem_es.search.stopwatch import Stopwatch

    now = datetime(2026, 11, 26, 12, 0)
    sent: list[list[tuple[str, str]]] = []
    msearch = demo.engine.msearch

    def spy(searches):
        sent.append([(s[0], json.dumps(s[1], ensure_ascii=False)) for s in searches])
        return msearch(searches)

    demo.engine.msearch = spy
    try:
        quiet = demo.query("胃疼", user_id="u_mumu", agent_id="lishen", now=now)
        assert quiet.additional_info.entity_words == [] and len(sent) == 1
        indices = [i for i, _ in sent[0]]
        assert any("entities" in i for i in indices) and any(i.endswith("-events") for i in indices)
        sent.clear()
        text, scope = "我那只狗最近好像胖了", {"user_id": "u_xiaoman", "agent_id": "lishen"}
        got = demo.query(text, **scope, now=now)
    finally:
        del demo.engine.msearch  # the instance attribute: the class's method again
    assert "豆包" in got.additional_info.entity_words
    assert len(sent) == 2  # the shared round trip, then the events with the bridge word
    assert not any("豆包" in body for i, body in sent[0] if i.endswith("-events"))
    assert all(i.endswith("-events") and "豆包" in body for i, body in sent[1])

    # the order it replaces: entities first, their bridges, then the events
    s = demo.searcher
    params = calibrated(QueryParams(**scope, now=now), s.calibration())  # what query() applies
    vector, _, parts = s.text.query_vector(text, [], params)
    words = s.text.words(text, params, Stopwatch(), [], vector)[3]
    bridges = s.text.bridge_words(params, words, s.search_entities(params, words, vector))
    want, _ = s.search_events(params, [*words, *bridges], vector, now, parts)
    assert want and [(e.index, e.score) for e in got.memory_events] == [
        (str(hit["_source"].get("id", hit["_id"])), round(score, 4)) for _, hit, score, _ in want
    ]


EN = [
    ev(
        "en-vet",
        "Emma took Pickles to the vet for a sneezing cold; the vet prescribed eye drops.",
        "2025-03-02 20:00:00",
        user="u_en",
        keywords=["pickles", "vet", "cold"],
    ),
    ev(
        "en-climb",
        "Emma sprained her ankle at the climbing gym and Marcus drove her to urgent care.",
        "2025-04-11 20:00:00",
        user="u_en",
        keywords=["climbing", "ankle", "marcus"],
    ),
    ev(
        "en-bake",
        "Emma's sourdough loaf finally rose after three failed attempts on a cold windowsill.",
        "2025-05-20 20:00:00",
        user="u_en",
        keywords=["sourdough", "baking"],
    ),
]


def test_an_english_dialogue_runs_on_its_words(kemem) -> None:
    """A query in latin script uses ``latin_weights`` (m3e's English cosines separate little):
    the memory holding the dialogue's words comes first and clears 0.5, a memory sharing
    no word with it cannot; a Chinese query in the same store keeps the default weights."""
    kemem.init()
    kemem.index_records(EN, "events", "user")
    scope = {"user_id": "u_en", "agent_id": A, "now": NOW, "score_threshold": 0.0}
    got = kemem.query(
        "he keeps sneezing again, do you think it's the same cold?",
        context="Nova: how's Pickles doing?",
        **scope,
    )
    assert got.additional_info.profile == "latin"
    assert got.memory_events[0].index == "en-vet" and got.memory_events[0].score >= 0.5
    by_id = {e.index: e.score for e in got.memory_events}
    assert by_id["en-climb"] < 0.5
    assert kemem.query("胃疼", **scope).additional_info.profile == "default"
    chosen = kemem.query(
        "sneezing again", weights={"kw": 0.48, "vec": 0.47, "time": 0.03, "strength": 0.02}, **scope
    )
    assert chosen.additional_info.profile == "default"
    # at the default threshold: a short English question recalls its memory, an unrelated one
    # and small talk recall nothing
    recall = {"user_id": "u_en", "agent_id": A, "now": NOW}
    asked = kemem.query("what did the vet give Pickles for his sneezing?", **recall)
    assert [e.index for e in asked.memory_events][:1] == ["en-vet"]
    assert kemem.query("should I take an umbrella tomorrow?", **recall).memory_events == []
    assert kemem.query("haha yeah", **recall).memory_events == []


def test_english_words_close_together_count_more(kemem) -> None:
    """Term proximity: a long English memory that mentions a question's words far apart gains
    less than one that has them together (each pair of the strongest words within 10 tokens
    adds its part of ``latin_proximity_share`` to the keyword coverage)."""
    kemem.init()
    close = "Sam helped the neighbour pick tomatoes in the garden on Sunday morning."
    reversed_ = "In the garden, tomatoes are what Sam and the neighbour pick on Sundays."
    far = (
        "The neighbour came by early to borrow a ladder, and we ended up talking about his new "
        "job at the bakery downtown for an hour. Later I cooked pasta, called my sister and "
        "watched a film about sailing. Before bed I finally watered the garden, where the basil "
        "is doing well but the tomatoes still look sickly."
    )
    kemem.index_records(
        [
            ev("en-close", close, "2025-05-01 10:00:00", user="u_prox"),
            ev("en-far", far, "2025-05-01 10:00:00", user="u_prox"),
            ev("en-reversed", reversed_, "2025-05-01 10:00:00", user="u_prox"),
        ],
        "events",
        "user",
    )
    # keywords alone (strength is the same for both), so no score reaches the cap of 1 and
    # the gain is read off whole
    scope = {
        "user_id": "u_prox",
        "agent_id": A,
        "now": NOW,
        "score_threshold": 0.0,
        "weights": {"kw": 0.4, "vec": 0.0, "time": 0.0, "strength": 0.6},
    }
    text = "did the neighbour pick tomatoes in the garden?"
    on = {e.index: e.score for e in kemem.query(text, **scope).memory_events}
    off = {e.index: e.score for e in kemem.query(text, proximity_share=0, **scope).memory_events}
    gain = {k: on[k] - off[k] for k in on}
    assert gain["en-close"] == pytest.approx(0.4 * 0.4, abs=1e-3)  # every pair close together
    assert gain["en-reversed"] == pytest.approx(gain["en-close"], abs=1e-3)  # in either order
    assert 0 < gain["en-far"] < gain["en-close"] / 2  # garden·tomatoes only


def test_another_tenants_names_stay_search_words(kemem) -> None:
    """Only the scope's own user and agent names are left out of its search words. Every
    indexed name used to be: a user called 小雨 in one scope took 小雨 (the roommate) out of
    every other scope's queries."""
    kemem.init()

    def said(id_: str, user: str, name: str, text: str) -> EventRecord:
        return EventRecord(
            id=id_,
            agent_id=A,
            user_id=user,
            user_name=name,
            agent_name="祁煜",
            description=text,
            created_at="2025-05-01 10:00:00",
        )

    kemem.index_records(
        [
            said("rain", "u_a", "木木", "木木说室友小雨昨天又没带伞，淋得像落汤鸡。"),
            said("show", "u_a", "木木", "木木周末去看了一场画展，回来很开心。"),
            said("late", "u_b", "小雨", "小雨今天加班到很晚，地铁都停了。"),
        ],
        "events",
        "user",
    )
    scope = {"agent_id": A, "now": NOW, "score_threshold": 0.0}
    mine = kemem.query("小雨最近怎么样了", user_id="u_a", **scope)
    assert "小雨" in mine.additional_info.base_words
    assert mine.memory_events[0].index == "rain"
    assert (
        "木木" not in kemem.query("木木今天好累", user_id="u_a", **scope).additional_info.base_words
    )
    own = kemem.query("小雨今天好累", user_id="u_b", **scope)
    assert "小雨" not in own.additional_info.base_words


def test_english_entities_are_recalled_by_their_words(kemem) -> None:
    """m3e scores an unrelated English chat turn about as close to an English entity as a
    related one, so with the cosine in the evidence unrelated English turns brought entities
    along (entity dev set: 62 % of them; each turn below did, at 0.41-0.51). English entity
    evidence is keyword coverage, plus a bonus when the turn names the entity: the cat comes
    when the turn is about the cat, Linda when a long turn names her."""
    kemem.init()

    def about(id_: str, name: str, etype: str, keyword: str, text: str, user: str | None):
        return EntityRecord(
            id=id_,
            agent_id=A,
            user_id=user,
            user_name="Emma" if user else None,
            agent_name="Nova",
            entity_name=name,
            entity_type=etype,
            kind="特殊实体属性" if etype != "客体" else "用户属性",
            keyword=keyword,
            description=text,
            updatetime="2025-01-01 10:00:00",
        )

    cat = "Pickles is Emma's grey tabby cat; he hides under the bed from the carrier"
    mom = "Linda is Emma's mother; she lives in Columbus, Ohio and is stubborn about accepting help"
    job = "Emma is an ER nurse in Portland; after years of night shifts she took a day-shift role"
    rain = "Nova falls asleep to a recording of rain every night, even in the middle of summer"
    kemem.index_records(
        [
            about("cat", "Pickles", "具体实体", "cat", cat, "u_en"),
            about("mom", "Linda", "具体实体", "mother", mom, "u_en"),
            about("job", "Emma", "客体", "job", job, "u_en"),
        ],
        "entities",
        "user",
    )
    kemem.index_records(
        [about("rain", "Nova", "主体", "sleep", rain, None)], "entities", "official"
    )
    scope = {"user_id": "u_en", "agent_id": A, "now": NOW}
    said = kemem.query("pickles hid under the bed again the second he saw the carrier", **scope)
    assert [e.index["index"] for e in said.memory_entities] == ["cat"]
    # a long turn that names an entity: one word of many, the name bonus carries it
    long_turn = (
        "exhausting. linda refused to sit down all day, kept hauling boxes up three flights "
        "of stairs and snapping at the movers, and now my back is wrecked"
    )
    named = kemem.query(long_turn, context="Nova: how did the move go?", **scope)
    assert [e.index["index"] for e in named.memory_entities] == ["mom"]
    for unrelated in (
        "my jury summons came in the mail AGAIN, is that even legal twice in one year",
        "it's so windy today my recycling bin ended up in the neighbor's yard",
        "to be fair, mondays are rough for everyone",
    ):
        assert kemem.query(unrelated, **scope).memory_entities == [], unrelated
