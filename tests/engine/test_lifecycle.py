"""Memories that live: dedup on write, reinforcement, clean-up, hooks (real engine) plus the
pure rules behind them."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from kemem_es.errors import InvalidInput
from kemem_es.memory.cleanup import Policy, plan
from kemem_es.memory.dedup import Match, decide, word_overlap
from kemem_es.memory.extract.base import Extraction
from kemem_es.memory.hooks import HookError, Rejected
from kemem_es.memory.strength import ebbinghaus_gain
from kemem_es.store.layout import index_alias
from kemem_es.store.scope import Scope

A = {"agent_id": "qiyu", "user_id": "u_a"}
B = {"agent_id": "qiyu", "user_id": "u_b"}
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
SESSIONS = Path(__file__).resolve().parents[2] / "bench" / "dialogue_en" / "events.jsonl"


# -- pure rules -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("since", "gain"),
    [
        (timedelta(hours=2), 1),
        (timedelta(days=2), 3),
        (timedelta(days=5), 7),
        (timedelta(days=20), 30),
        (timedelta(days=100), 100),
        (timedelta(days=400), 100),
    ],
)
def test_ebbinghaus_steps(since: timedelta, gain: float) -> None:
    assert ebbinghaus_gain(since) == gain


def test_decide() -> None:
    m = Match("m1", 0.95, {"description": "木木喜欢吃螺蛳粉。"})
    assert decide("木木喜欢吃螺蛳粉", m, 0.9) == "NOOP"  # punctuation aside, the same text
    assert decide("木木特别喜欢吃螺蛳粉", m, 0.9) == "UPDATE"
    assert decide("木木特别喜欢吃螺蛳粉", m, 0.96) == "ADD"
    assert decide("任何话", None, 0.9) == "ADD"


def test_an_event_merges_only_when_it_says_it_in_the_same_words() -> None:
    # A restatement keeps most of the words: it still merges.
    near = Match("m1", 0.96, {"description": "Marco's sister lives in Lisbon."})
    assert decide("Marco told Sol his sister lives in Lisbon.", near, 0.9, 0.6) == "UPDATE"
    # Two episodes the model scores as close (m3e: one user's session summaries sit ~0.95
    # apart) are two memories when they share few words.
    other = Match("m2", 0.97, {"description": "Marco and Sol talked about his new bike."})
    assert decide("Marco cooked dinner for his sister on Friday.", other, 0.9, 0.6) == "ADD"
    assert decide("Marco cooked dinner for his sister on Friday.", other, 0.9) == "UPDATE"
    assert word_overlap("木木喜欢吃螺蛳粉", "木木特别喜欢吃螺蛳粉") == pytest.approx(6 / 7)
    assert word_overlap("Emma works night shifts.", "EMMA works NIGHT shifts!") == 1.0
    assert word_overlap("小满的生日在十一月八号", "小满是天蝎座，生日是11月8日") < 0.3


def test_cleanup_plan() -> None:
    p = Policy(cap=100, ratio=0.2, inactive_days=30, min_capacity=10, interval_days=7)
    active = NOW - timedelta(days=1)
    assert plan(100, active, None, NOW, p) == ("cap", 20)
    assert plan(99, active, None, NOW, p) == ("", 0)
    assert plan(50, NOW - timedelta(days=31), None, NOW, p) == ("inactive", 40)
    assert plan(50, None, None, NOW, p) == ("inactive", 40)
    assert plan(8, None, None, NOW, p) == ("", 0)
    assert plan(500, active, NOW - timedelta(days=3), NOW, p) == ("recently cleaned", 0)
    assert plan(500, active, NOW - timedelta(days=8), NOW, p) == ("cap", 100)


def test_cleanup_overrides_keep_their_settings_bounds() -> None:
    """A per-call override is checked like KEMEM_CLEANUP_*: ratio 2 would plan to delete twice a
    capped user's memories (all of them), not refuse."""
    from kemem_es.config import Settings

    settings = Settings()
    assert Policy.from_settings(settings, ratio=0.5, cap=10).ratio == 0.5
    for bad in ({"ratio": 2}, {"ratio": 0}, {"cap": 0}, {"inactive_days": -1}, {"cap": "x"}):
        with pytest.raises(InvalidInput) as exc:
            Policy.from_settings(settings, **bad)
        assert exc.value.field == next(iter(bad))


# -- dedup on the engine --------------------------------------------------------------------
@pytest.mark.engine
def test_dedup_decisions_and_history(kemem) -> None:
    kemem.init()
    (first,) = kemem.add("木木喜欢吃螺蛳粉", **A, refresh=True)
    assert first.event == "ADD"

    (near,) = kemem.add("木木特别喜欢吃螺蛳粉", **A, refresh=True)
    assert near.event == "UPDATE" and near.id == first.id
    assert near.matched_id == first.id and near.similarity >= 0.9
    assert near.previous == "木木喜欢吃螺蛳粉"
    assert kemem.get(first.id, **A).text == "木木特别喜欢吃螺蛳粉"
    assert kemem.get(first.id, **A).strength == 1  # came back within a day: +1

    (same,) = kemem.add({"description": "木木特别喜欢吃螺蛳粉！", "created_at": "2025-01-01"}, **A)
    assert same.event == "NOOP" and same.id == first.id and same.similarity > 0.95

    (other,) = kemem.add("木木养了一只叫豆包的柯基", **A, refresh=True)
    assert other.event == "ADD" and other.id != first.id
    # Another user's identical fact is theirs: dedup never crosses scopes.
    (theirs,) = kemem.add("木木特别喜欢吃螺蛳粉", **B, refresh=True)
    assert theirs.event == "ADD"

    assert kemem.count(**A) == 2
    entries = kemem.history(first.id, **A)
    assert [e.event for e in entries] == ["ADD", "UPDATE", "NOOP"]
    assert entries[1].reason == "dedup" and entries[1].similarity >= 0.9
    assert entries[1].old_text == "木木喜欢吃螺蛳粉"
    assert entries[2].reason == "duplicate" and entries[2].matched_id == first.id

    (plain,) = kemem.add("木木很喜欢吃螺蛳粉", **A, dedup=False)
    assert plain.event == "ADD"


@pytest.mark.engine
def test_session_summaries_that_the_model_scores_alike_stay_apart(kemem) -> None:
    """m3e-small scores every pair of one user's English session summaries above 0.9 (the
    cosine rule alone merged 25 sessions into one memory); they share few words, so each is
    added, and a restated session still merges."""
    kemem.init()
    rows = [json.loads(line) for line in SESSIONS.read_text(encoding="utf-8").splitlines()]
    sessions = [r for r in rows if r["user_id"] == "u_marco"][:4]
    vectors = kemem.embedder.embed([r["description"] for r in sessions])
    sims = vectors @ vectors.T
    assert (sims[~np.eye(len(sessions), dtype=bool)] >= kemem.settings.dedup_threshold).all()
    scope = {"agent_id": "sol", "user_id": "u_marco"}
    for r in sessions:
        rec = {k: r[k] for k in ("description", "created_at", "event_time") if k in r}
        (res,) = kemem.add(rec, **scope, refresh=True)
        assert res.event == "ADD"
    assert kemem.count(**scope) == len(sessions)
    restated = sessions[0]["description"].replace("talked", "chatted", 1)
    (res,) = kemem.add(restated, **scope, refresh=True)
    assert res.event == "UPDATE" and kemem.count(**scope) == len(sessions)


@pytest.mark.engine
def test_entity_attributes_of_the_same_entity_merge(kemem) -> None:
    kemem.init()
    base = {"entity_name": "豆包", "entity_type": "具体实体", "kind": "特殊实体属性"}
    (a,) = kemem.add(
        {**base, "keyword": "宠物", "description": "豆包是木木养的柯基",
         "updatetime": "2025-01-01"},
        **A, kind="entities", refresh=True,
    )  # fmt: skip
    (b,) = kemem.add(
        {**base, "keyword": "品种", "description": "豆包是木木养的一只柯基犬",
         "updatetime": "2025-03-01"},
        **A, kind="entities", refresh=True,
    )  # fmt: skip
    assert b.event == "UPDATE" and b.id == a.id
    merged = kemem.get(a.id, **A)
    assert merged.text == "豆包是木木养的一只柯基犬" and merged.keyword == "宠物、品种"
    # The same sentence about another entity is another memory.
    (c,) = kemem.add(
        {**base, "entity_name": "年糕", "description": "年糕是木木养的一只柯基犬",
         "updatetime": "2025-03-01"},
        **A, kind="entities",
    )  # fmt: skip
    assert c.event == "ADD"


@pytest.mark.engine
def test_entity_keywords_are_joined_and_a_restatement_adds_a_new_one(kemem) -> None:
    """No keyword is lost to dedup: a merge joins them, and the same words said again with a
    keyword the memory lacks are an UPDATE that adds it (in the history), not a NOOP."""
    kemem.init()
    base = {"entity_name": "木木", "entity_type": "客体", "kind": "用户属性",
            "updatetime": "2025-03-01 10:00:00"}  # fmt: skip

    def add(text: str, keyword: str | None = None):
        rec = {**base, "description": text} | ({"keyword": keyword} if keyword else {})
        return kemem.add(rec, **A, kind="entities", refresh=True)[0]

    a = add("木木喜欢吃螺蛳粉", "饮食")
    b = add("木木特别喜欢吃螺蛳粉", "口味")
    assert (b.event, b.id, b.memory.keyword) == ("UPDATE", a.id, "饮食、口味")
    assert add("木木特别喜欢吃螺蛳粉。").event == "NOOP"
    assert add("木木特别喜欢吃螺蛳粉！", "饮食").event == "NOOP"  # a keyword it has
    d = add("木木特别喜欢吃螺蛳粉！", "美食、口味")
    assert (d.event, d.id, d.memory.keyword) == ("UPDATE", a.id, "饮食、口味、美食")
    assert kemem.get(a.id, **A, kind="entities").keyword == "饮食、口味、美食"
    last = kemem.history(a.id, **A)[-1]
    assert (last.event, last.reason, last.old_text, last.new_text) == (
        "UPDATE", "dedup", "木木特别喜欢吃螺蛳粉", "木木特别喜欢吃螺蛳粉！",
    )  # fmt: skip


@pytest.mark.engine
def test_an_extracted_fact_said_again_with_a_new_keyword_adds_it(kemem) -> None:
    """Extracted facts are "said now": the same words again are a NOOP unless they bring a
    keyword the memory lacks."""
    kemem.init()
    fact = {"entity_name": "木木", "entity_type": "客体", "kind": "用户属性",
            "description": "木木会弹吉他", "updatetime": "2025-03-01 10:00:00"}  # fmt: skip

    class Says:
        keyword = ""

        def extract(self, messages, **kw):
            return Extraction(entities=[{**fact, "keyword": self.keyword}])

    kemem.extractor = says = Says()
    (first,) = kemem.add("我会弹吉他", **A, infer=True, refresh=True)
    assert kemem.add("我会弹吉他", **A, infer=True)[0].event == "NOOP"
    says.keyword = "爱好"
    (again,) = kemem.add("我会弹吉他", **A, infer=True)
    assert (again.event, again.id, again.memory.keyword) == ("UPDATE", first.id, "爱好")


@pytest.mark.engine
@pytest.mark.parametrize("seen_by", ["engine", "recent writes"])
def test_entity_names_are_compared_as_the_tokenizer_sees_them(kemem, seen_by: str) -> None:
    """Linda and linda, ＡＢＣ乐队 and ABC乐队 are one entity each (NFKC, lowercase), whether
    dedup finds the first spelling through the engine's search or this process's writes."""
    kemem.init()
    base = {"entity_type": "具体实体", "kind": "特殊实体属性", "keyword": "职业",
            "updatetime": "2025-03-01 10:00:00"}  # fmt: skip

    def add(name: str, text: str):
        rec = {**base, "entity_name": name, "description": text}
        (res,) = kemem.add(rec, **A, kind="entities", refresh=True)
        if seen_by == "engine":
            kemem.memories.recent.forget(Scope.of(**A))
        return res

    pairs = [
        (("Linda", "Linda在市医院当护士"), ("linda", "Linda在市里的医院当护士")),
        (("ＡＢＣ乐队", "ABC乐队是木木最喜欢的乐队"), ("ABC乐队", "ABC乐队是木木最最喜欢的乐队")),
    ]
    ids = []
    for first, second in pairs:
        a, b = add(*first), add(*second)
        assert (a.event, b.event, b.id) == ("ADD", "UPDATE", a.id), (first, second, b)
        assert b.memory.entity_name == first[0]  # the first spelling stays
        ids.append(a.id)
    # Another entity whose name holds the same word stays apart, either way round.
    assert add("Linda的妈妈", "Linda的妈妈在市医院当护士").event == "ADD"
    c = add("LINDA", "Linda在市里的医院当护士长")
    assert (c.event, c.id) == ("UPDATE", ids[0])
    assert kemem.count(**A, kind="entities") == 3


@pytest.mark.engine
def test_import_dedup_is_an_option(kemem) -> None:
    kemem.init()
    kemem.add("木木喜欢吃螺蛳粉", **A, refresh=True)
    rows = [
        {**A, "description": "木木特别喜欢吃螺蛳粉", "created_at": "2025-02-01"},
        {**A, "description": "木木喜欢吃螺蛳粉", "created_at": "2025-02-02"},
        {**A, "description": "木木周末去爬山了", "created_at": "2025-02-03"},
    ]
    report = kemem.index_records(rows, "events", dedup=True)
    assert (report.indexed, report.merged, report.duplicates) == (1, 1, 1)
    assert kemem.count(**A) == 2
    replay = kemem.index_records(rows, "events")  # exact replay: no dedup
    assert replay.indexed == 2 and replay.unchanged == 1


@pytest.mark.engine
def test_a_dedup_import_run_again_changes_nothing_and_keeps_own_ids(kemem) -> None:
    kemem.init()
    (sea,) = kemem.add({"description": "木木周末去海边看了日出，拍了很多照片",
                        "created_at": "2025-04-01 06:00:00"}, **A, refresh=True)  # fmt: skip
    kemem.add({"description": "木木最近在学做蛋糕", "created_at": "2025-04-03"}, **A, refresh=True)
    rows = [
        {**A, "description": "木木周末去海边看了日出，拍了很多照片", "created_at": "2025-04-05"},
        {**A, "description": "木木周末去海边看了日出，还拍了好多照片", "created_at": "2025-04-06"},
        {**A, "description": "木木养了一只橘猫叫年糕", "created_at": "2025-04-07"},
        {**A, "id": "own-id", "description": "木木最近在学做蛋糕", "created_at": "2025-04-08"},
    ]
    first = kemem.index_records(rows, "events", dedup=True)
    assert (first.indexed, first.merged, first.duplicates) == (2, 1, 1)
    assert kemem.get("own-id", **A).text == "木木最近在学做蛋糕"  # its own id: never folded
    text = kemem.get(sea.id, **A).text
    events = [e.event for e in kemem.history(sea.id, **A)]
    assert events == ["ADD", "UPDATE"]
    for _ in range(2):  # the same file again: no text flips back, no history piles up
        again = kemem.index_records(rows, "events", dedup=True)
        assert (again.written, again.merged, again.unchanged, again.duplicates) == (0, 0, 2, 2)
        assert kemem.get(sea.id, **A).text == text
        assert [e.event for e in kemem.history(sea.id, **A)] == events
    assert kemem.count(**A) == 4


@pytest.mark.engine
def test_near_duplicates_added_back_to_back_or_at_once_merge(kemem) -> None:
    """The engine's search sees a write only after its refresh; dedup also compares with this
    process's recent writes, and one scope's adds take turns (threads and async verbs)."""
    kemem.init()
    said = [
        "木木喜欢吃螺蛳粉",
        "木木特别喜欢吃螺蛳粉",
        "木木很喜欢吃螺蛳粉",
        "木木超级喜欢吃螺蛳粉",
    ]
    assert [kemem.add(t, **A)[0].event for t in said] == ["ADD", "UPDATE", "UPDATE", "UPDATE"]
    with ThreadPoolExecutor(4) as pool:
        events = sorted(r[0].event for r in pool.map(lambda t: kemem.add(t, **B), said))
    assert events == ["ADD", "UPDATE", "UPDATE", "UPDATE"]

    from kemem_es import AsyncKemem

    async def at_once() -> list[str]:
        async with AsyncKemem(kemem.settings) as akm:
            akm.core.embedder = kemem.embedder
            scope = {"agent_id": "qiyu", "user_id": "u_c"}
            results = await asyncio.gather(*(akm.add(t, **scope) for t in said))
        return sorted(r[0].event for r in results)

    assert asyncio.new_event_loop().run_until_complete(at_once()) == [
        "ADD", "UPDATE", "UPDATE", "UPDATE"
    ]  # fmt: skip
    for user in ("u_a", "u_b", "u_c"):
        kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
        assert kemem.count(agent_id="qiyu", user_id=user) == 1, user
    # Distinct facts stay apart; a deleted memory is no candidate any more.
    assert kemem.add("木木不喜欢吃香菜", **A)[0].event == "ADD"
    (gone,) = [m for m in kemem.get_all(**A).results if "螺蛳粉" in m.text]
    kemem.delete(gone.id, **A)
    assert kemem.add("木木超级喜欢吃螺蛳粉", **A)[0].event == "ADD"


@pytest.mark.engine
def test_words_said_again_keep_what_the_memory_gathered(kemem) -> None:
    """The first words of a memory said again after a merge fold in like a dedup UPDATE:
    created_at, metadata and session survive; said again unchanged, they are a NOOP."""
    kemem.init()
    first = kemem.add(
        "木木喜欢吃螺蛳粉", **A, metadata={"mood": "happy"}, session_id="s1", dialogue=False
    )[0]
    merged = kemem.add("木木特别喜欢吃螺蛳粉", **A, metadata={"x": 1})[0]
    assert (merged.event, merged.id) == ("UPDATE", first.id)
    again = kemem.add("木木喜欢吃螺蛳粉", **A)[0]
    assert (again.event, again.id) == ("UPDATE", first.id)
    m = kemem.get(first.id, **A)
    assert m.text == "木木喜欢吃螺蛳粉"
    assert (m.metadata, m.session_id) == ({"mood": "happy", "x": 1}, "s1")
    assert m.created_at == first.memory.created_at
    assert kemem.add("木木喜欢吃螺蛳粉", **A)[0].event == "NOOP"
    assert kemem.add("木木喜欢吃螺蛳粉", **A, session_id="s1", dialogue=False)[0].event == "NOOP"
    assert kemem.history(first.id, **A)[1].matched_id == first.id  # the dedup merge names it


@pytest.mark.engine
def test_a_fact_is_not_dropped_for_a_memory_another_process_deleted(kemem) -> None:
    from kemem_es import Kemem

    kemem.init()
    other = Kemem(kemem.settings)
    other.embedder = kemem.embedder
    try:
        r = kemem.add("木木养了一只猫叫年糕", **A, refresh=True)[0]
        other.delete(r.id, **A)  # no refresh: the engine's search still shows it
        again = kemem.add("木木养了一只猫叫年糕", **A)[0]
        assert again.event == "ADD"
        assert kemem.get(again.id, **A).text == "木木养了一只猫叫年糕"
    finally:
        other.close()


@pytest.mark.engine
def test_a_record_with_its_own_id_is_stored_under_it(kemem) -> None:
    kemem.init()
    kemem.add({"id": "order-1", "description": "用户下单购买了两台笔记本电脑",
               "created_at": "2025-05-01"}, **A, refresh=True)  # fmt: skip
    r = kemem.add({"id": "order-3", "description": "用户下单购买了两台笔记本电脑。",
                   "created_at": "2025-05-03"}, **A)[0]  # fmt: skip
    assert (r.event, r.id) == ("ADD", "order-3")
    assert kemem.get("order-1", **A).text == "用户下单购买了两台笔记本电脑"
    # Without an id of its own, the same record is still folded into its copy.
    same = {"description": "用户下单购买了两台笔记本电脑", "created_at": "2025-05-04"}
    r = kemem.add(same, **A)[0]
    assert r.event == "NOOP" and r.id in ("order-1", "order-3")


@pytest.mark.engine
def test_an_update_that_changes_nothing_is_a_noop(kemem) -> None:
    kemem.init()
    kemem.add({"id": "u1", "description": "木木去看海", "created_at": "2024-07-01",
               "place": "厦门"}, **A, refresh=True)  # fmt: skip
    before = kemem.get("u1", **A)
    r = kemem.update("u1", {"description": "木木去看海", "place": "厦门"}, **A)
    assert r.event == "NOOP"
    assert kemem.get("u1", **A).strength == before.strength
    assert [h.event for h in kemem.history("u1", **A)] == ["ADD", "NOOP"]
    with pytest.raises(InvalidInput, match="created_at") as err:
        kemem.update("u1", {"created_at": None}, **A)
    assert err.value.field == "created_at"
    assert kemem.update("u1", {"place": None}, **A).event == "UPDATE"  # None clears a field
    after = kemem.get("u1", **A)
    assert after.place in (None, "") and str(after.created_at).startswith("2024-07-01")
    # A cleared field stays updatable (it is removed).
    assert kemem.update("u1", "木木去看了海", **A).event == "UPDATE"
    assert kemem.update("u1", {"place": "鼓浪屿"}, **A).memory.place == "鼓浪屿"
    kemem.add({"id": "k1", "entity_name": "木木", "entity_type": "主体", "kind": "用户属性",
               "description": "木木喜欢海", "keyword": "海", "updatetime": "2025-01-01"},
              **A, kind="entities")  # fmt: skip
    assert kemem.update("k1", {"keyword": None}, **A, kind="entities").event == "UPDATE"
    assert kemem.update("k1", "木木非常喜欢海", **A, kind="entities").event == "UPDATE"


@pytest.mark.engine
def test_a_cleared_field_is_absent_and_the_memory_is_still_recalled(kemem) -> None:
    """An update that clears ``place`` or ``scene`` removes the field (it was stored as null,
    and every query that recalled the memory then failed building its hit). Documents stored
    with null by an older version are read as empty."""
    from kemem_es.store.layout import index_alias
    from kemem_es.store.scope import Scope

    kemem.init()
    kemem.add({"id": "c1", "description": "木木和豆包去海边散步", "created_at": "2024-07-01",
               "place": "厦门", "scene": "傍晚"}, **A, refresh=True)  # fmt: skip
    assert kemem.update("c1", {"place": None}, **A).event == "UPDATE"
    assert kemem.update("c1", {"scene": ""}, **A, refresh=True).event == "UPDATE"
    scope = Scope.of(agent_id=A["agent_id"], user_id=A["user_id"])
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    raw = kemem.engine.client.get(index=alias, id=scope.doc_id("c1"), routing=scope.routing)
    assert "place" not in raw["_source"] and "scene" not in raw["_source"]
    # a null stored by an older version's update
    nulls = {"doc": {"place": None, "scene": None}}
    kemem.engine.client.update(
        index=alias, id=scope.doc_id("c1"), routing=scope.routing, body=nulls, refresh=True
    )
    for degrade in (False, True):
        resp = kemem.query("豆包去海边", **A, score_threshold=0, degrade=degrade)
        (hit,) = [e for e in resp.memory_events if e.index == "c1"]
        assert (hit.place, hit.scene) == ("", "")
    assert kemem.update("c1", {"place": "鼓浪屿"}, **A).memory.place == "鼓浪屿"


@pytest.mark.engine
def test_a_hook_cannot_move_a_memory_to_another_user(kemem) -> None:
    kemem.init()

    def move(record, ctx):
        return {**record, "user_id": "u_b"}

    kemem.hooks.before_write.append(move)
    with pytest.raises(InvalidInput, match="moved out of the call's scope") as err:
        kemem.add("木木喜欢吃螺蛳粉", **A)
    assert err.value.field == "user_id"
    kemem.hooks.before_write.clear()
    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    assert kemem.count(**A) == kemem.count(**B) == 0


# -- reinforcement --------------------------------------------------------------------------
@pytest.mark.engine
def test_concurrent_queries_reinforce_exactly(kemem) -> None:
    kemem.init()
    rows = [
        {
            **A,
            "id": f"f{i}",
            "description": f"木木和小雨第{i}次去吃火锅",
            "created_at": "2025-01-01",
        }
        for i in range(6)
    ]
    kemem.index_records(rows, "events")
    kemem.search("火锅", **A, threshold=0, limit=3)  # warm up
    kemem.flush()
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-user-events")
    start = {m.id: (m.strength, m.recall_count) for m in kemem.get_all(**A).results}
    hits: dict[str, int] = {}

    def one(i: int) -> list[str]:
        text = ["火锅", "小雨", "木木吃火锅"][i % 3]
        resp = kemem.search(text, **A, threshold=0, limit=1 + i % 4)
        return [e.index for e in resp.memory_events]

    with ThreadPoolExecutor(8) as pool:
        for ids in pool.map(one, range(800)):
            for mid in ids:
                hits[mid] = hits.get(mid, 0) + 1
    kemem.flush()
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-user-events")
    after = {m.id: (m.strength, m.recall_count) for m in kemem.get_all(**A).results}
    assert sum(hits.values()) >= 800
    for mid, (s0, n0) in start.items():
        n = hits.get(mid, 0)
        assert after[mid] == (s0 + 15 * n, n0 + n), mid


@pytest.mark.engine
def test_a_memory_recalled_again_within_the_period_waits_for_one_write(kemem) -> None:
    """``KEMEM_REINFORCE_COALESCE_S`` reaches the flusher: a memory written a moment ago is held
    by the background flush (its recalls summed), and ``flush()`` writes it, both recalls."""
    kemem.init()
    kemem.index_records(
        [{**A, "id": "x", "description": "吃火锅", "created_at": "2025-01-01"}], "events"
    )
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-user-events")
    assert kemem.reinforcer.coalesce_s == kemem.settings.reinforce_coalesce_s == 60
    s0 = kemem.get("x", **A).strength
    kemem.search("火锅", **A, threshold=0)
    assert kemem.flush() == 1
    for _ in range(2):
        kemem.search("火锅", **A, threshold=0)
    assert kemem.reinforcer.flush_due() == 0  # written < 60 s ago: held (the thread's flush too)
    assert kemem.get("x", **A).recall_count == 1
    assert kemem.flush() == 1  # explicit: now, the two recalls in one write
    got = kemem.get("x", **A)
    assert (got.recall_count, got.strength) == (3, pytest.approx(s0 + 3 * 15))


@pytest.mark.engine
@pytest.mark.parametrize("official_too", [False, True])
def test_a_recall_strengthens_the_users_memories_and_official_ones_only_when_asked(
    kemem, official_too: bool
) -> None:
    """An official memory is shared by every user of the agent: a user's recall leaves its
    strength as its operator gave it unless ``reinforce_official`` (the user's own gain)."""
    kemem.init()
    kemem.settings = kemem.settings.model_copy(update={"reinforce_official": official_too})
    kemem.index_records(
        [{**A, "id": "mine", "description": "木木周末吃火锅", "created_at": "2025-01-01"}],
        "events",
    )
    lore = {"agent_id": A["agent_id"], "id": "lore", "created_at": "2025-01-01",
            "description": "小镇的火锅店开了三十年"}  # fmt: skip
    kemem.index_records([lore], "events", db="official")
    for db in ("user", "official"):
        kemem.engine.refresh(index_alias(kemem.settings.index_prefix, db, "events"))
    got = kemem.search("火锅", **A, threshold=0)
    assert {e.index for e in got.memory_events} == {"mine", "lore"}
    assert kemem.flush() == (2 if official_too else 1)
    assert kemem.get("mine", **A).recall_count == 1
    official = kemem.get("lore", agent_id=A["agent_id"], db="official")
    assert official.recall_count == (1 if official_too else 0)


@pytest.mark.engine
def test_reinforcement_can_be_turned_off(kemem) -> None:
    kemem.init()
    kemem.settings = kemem.settings.model_copy(update={"reinforce": False})
    kemem.index_records(
        [{**A, "id": "x", "description": "吃火锅", "created_at": "2025-01-01"}], "events"
    )
    kemem.search("火锅", **A, threshold=0)
    kemem.flush()
    assert kemem.get("x", **A).recall_count == 0


@pytest.mark.engine
def test_reading_a_whole_store_leaves_its_updates_working(kemem) -> None:
    """On OpenSearch 3.5 one finished scroll over an index that derives its vectors (3.x's
    default) breaks every later read of a whole document there, and with it every scripted
    update: reinforcement, partial updates (k-NN issues 3191, 3458; the README). kemem-es
    pages with search_after, never a scroll: after it has paged through a store (get_all,
    a filtered delete, the clean-up), reinforcement and a partial update still write."""
    kemem.init()
    other = {**A, "user_id": "u_b"}
    # 30 each: with a handful of memories 3.5 does not break (no vector file to close)
    rows = [
        {
            **who,
            "id": f"s{i}",
            "description": f"木木第{i}次去爬山",
            "created_at": "2025-01-01",
            "place": "香山" if i % 10 == 0 else "八达岭",
        }
        for i in range(30)
        for who in (A, other)
    ]
    kemem.index_records(rows, "events")
    alias = f"{kemem.settings.index_prefix}-user-events"
    kemem.engine.client.indices.flush(index=alias)  # on disk, as a store is after a while
    kemem.engine.refresh(alias)

    page = kemem.get_all(**A, limit=7)
    seen = len(page.results)
    while page.next_cursor:
        page = kemem.get_all(**A, limit=7, cursor=page.next_cursor)
        seen += len(page.results)
    assert seen == 30
    assert kemem.delete_all(**other, filters={"place": "香山"}) == 3
    kemem.cleanup(dry_run=True)

    hits = kemem.search("爬山", **A, threshold=0, limit=3).memory_events
    assert kemem.flush() == 3  # three scripted updates, each reading the whole document
    assert all(kemem.get(h.index, **A).recall_count == 1 for h in hits)
    changed = kemem.update("s5", {"place": "香山"}, **A, refresh=True)
    assert changed.event == "UPDATE"
    assert kemem.get("s5", **A).place == "香山"


# -- clean-up -------------------------------------------------------------------------------
@pytest.mark.engine
def test_cleanup_deletes_exactly_the_weakest_fifth_of_that_user(kemem) -> None:
    kemem.init()
    vec = [1.0] + [0.0] * (kemem.embedder.dim - 1)
    rows = [
        {**A, "id": f"a{i:02d}", "description": f"记忆{i}", "created_at": "2025-01-01",
         "strength": float(i), "vector": vec}
        for i in range(50)
    ]  # fmt: skip
    kemem.index_records(rows, "events")
    kemem.index_records([{**r, **B} for r in rows[:30]], "events")
    kemem.index_records([{**r, "agent_id": "lishen"} for r in rows], "events")

    dry = kemem.cleanup(dry_run=True, cap=40, inactive_days=10_000, now=NOW)
    by_user = {(r.agent_id, r.user_id): r for r in dry}
    assert by_user[("qiyu", "u_a")].to_delete == 10 and by_user[("qiyu", "u_a")].deleted == 0
    assert by_user[("qiyu", "u_a")].preview == [f"a{i:02d}" for i in range(10)]
    assert by_user[("qiyu", "u_b")].to_delete == 0
    assert kemem.count(**A) == 50

    done = {
        (r.agent_id, r.user_id): r for r in kemem.cleanup(cap=50, inactive_days=10_000, now=NOW)
    }
    assert done[("qiyu", "u_a")].deleted == 10
    assert done[("lishen", "u_a")].deleted == 10
    left = {m.id for m in kemem.get_all(**A, limit=1000).results}
    assert left == {f"a{i:02d}" for i in range(10, 50)}
    assert kemem.count(**B) == 30
    assert kemem.history("a00", **A)[-1].event == "DELETE"
    assert kemem.history("a00", **A)[-1].actor == "cleanup"
    # Cleaned users are left alone for interval_days.
    again = {
        (r.agent_id, r.user_id): r for r in kemem.cleanup(cap=10, inactive_days=10_000, now=NOW)
    }
    assert again[("qiyu", "u_a")].reason == "recently cleaned"
    assert kemem.count(**A) == 40


@pytest.mark.engine
def test_cleanup_keeps_a_memory_updated_after_it_was_chosen(kemem, monkeypatch) -> None:
    """The clean-up lists the weakest memories, then deletes them: a memory the user restated
    in between (now strength 500) is not deleted for what it was, and no DELETE entry claims
    its old text. ``delete_all`` deletes such a memory as it is now."""
    from kemem_es.store.users import Users

    kemem.init()
    rows = [
        {**A, "id": f"w{i}", "description": f"木木的第{i}条记忆", "created_at": "2025-01-01",
         "strength": 0.0 if i < 2 else 100.0}
        for i in range(10)
    ]  # fmt: skip
    kemem.index_records(rows, "events")
    listed = Users.weakest

    def listed_then_restated(users, scope, n):
        out = listed(users, scope, n)
        kemem.update("w0", {"description": "木木又说了一遍：她最爱外婆家", "strength": 500}, **A)
        return out

    monkeypatch.setattr(Users, "weakest", listed_then_restated)
    (rep,) = kemem.cleanup(**A, cap=8, ratio=0.2, interval_days=0, inactive_days=10_000, now=NOW)
    assert (rep.to_delete, rep.deleted) == (2, 1)
    assert kemem.get("w0", **A).strength == 500
    assert [e.event for e in kemem.history("w0", **A)] == ["ADD", "UPDATE"]
    assert kemem.history("w1", **A)[-1].event == "DELETE"

    from kemem_es.store.crud import Crud

    monkeypatch.setattr(Users, "weakest", listed)
    real_sources = Crud.delete_sources
    raced: list[int] = []

    def restated_before_the_delete(self, scope, rows, *args, **kw):
        if not raced:
            raced.append(1)
            kemem.update("w5", {"description": "木木第五条，改过了"}, **A)
        return real_sources(self, scope, rows, *args, **kw)

    monkeypatch.setattr(Crud, "delete_sources", restated_before_the_delete)
    assert kemem.delete_all(**A) == 9
    (*_, deleted) = kemem.history("w5", **A)
    assert (deleted.event, deleted.old_text) == ("DELETE", "木木第五条，改过了")


# -- hooks ----------------------------------------------------------------------------------
@pytest.mark.engine
def test_hooks_transform_reject_and_rerank(kemem) -> None:
    kemem.init()

    def tag(record: dict, ctx) -> dict:
        record["metadata"] = {**(record.get("metadata") or {}), "via": ctx.db}
        return record

    async def no_secrets(record: dict, ctx) -> dict:
        await asyncio.sleep(0)
        if "密码" in record["description"]:
            raise Rejected("contains a password")
        return record

    kemem.hooks.before_write += [tag, no_secrets]
    (r,) = kemem.add("木木的生日是十一月八号", **A, refresh=True)
    assert kemem.get(r.id, **A).metadata == {"via": "user"}
    with pytest.raises(Rejected, match="contains a password"):
        kemem.add("我的银行卡密码是123456", **A)
    rows = [
        {**A, "id": "p1", "description": "密码是123", "created_at": "2025-01-01"},
        {**A, "id": "p2", "description": "去爬山", "created_at": "2025-01-01"},
    ]
    with pytest.raises(InvalidInput) as exc:
        kemem.index_records(rows, "events")
    assert "record 1: rejected by" in exc.value.problems[0]
    assert kemem.index_records(rows, "events", skip_invalid=True).indexed == 1

    def broken(record: dict, ctx) -> dict:
        raise RuntimeError("boom")

    kemem.hooks.before_write.append(broken)
    before = kemem.count(**A)
    with pytest.raises(HookError, match="broken failed"):
        kemem.add("不会写进去", **A)
    assert kemem.count(**A) == before
    kemem.hooks.before_write.clear()

    def reverse(resp, ctx):
        resp.memory_events.reverse()
        return resp

    normal = [e.index for e in kemem.search("生日", **A, threshold=0).memory_events]
    kemem.hooks.after_search.append(reverse)
    assert [e.index for e in kemem.search("生日", **A, threshold=0).memory_events] == normal[::-1]
    kemem.hooks.after_search[:] = [lambda resp, ctx: None]
    with pytest.raises(HookError, match="must return the response"):
        kemem.search("生日", **A)


@pytest.mark.engine
def test_update_runs_the_before_write_hooks(kemem) -> None:
    """An update is a write: the hooks that refuse or stamp an add see the new version."""
    kemem.init()
    seen = []

    def no_secrets(record: dict, ctx) -> dict:
        seen.append((ctx.kind, record["description"], record.get("place")))
        if "密码" in record["description"]:
            raise Rejected("contains a password")
        record["metadata"] = {**(record.get("metadata") or {}), "checked": record["description"]}
        return record

    (r,) = kemem.add("我今天去了健身房", **A, refresh=True)
    kemem.hooks.before_write.append(no_secrets)
    try:
        with pytest.raises(Rejected, match="no_secrets: contains a password"):
            kemem.update(r.id, "我的银行卡密码是123456", **A)
        stored = kemem.get(r.id, **A)
        assert (stored.text, stored.metadata) == ("我今天去了健身房", {})
        assert [h.event for h in kemem.history(r.id, **A)] == ["ADD"]
        # A partial update: the hook sees the whole new version, and its change is written.
        res = kemem.update(r.id, {"place": "健身房"}, **A)
        assert seen[-1] == ("events", "我今天去了健身房", "健身房")
        assert res.event == "UPDATE" and res.memory.metadata == {"checked": "我今天去了健身房"}
        assert kemem.get(r.id, **A).metadata == {"checked": "我今天去了健身房"}
    finally:
        kemem.hooks.before_write.clear()


@pytest.mark.engine
def test_inactive_users_are_trimmed_to_the_minimum(kemem) -> None:
    kemem.init()
    vec = [1.0] + [0.0] * (kemem.embedder.dim - 1)
    rows = [
        {"id": f"i{i:02d}", "description": f"记忆{i}", "created_at": "2025-01-01",
         "strength": float(i), "vector": vec}
        for i in range(12)
    ]  # fmt: skip
    kemem.index_records([{**r, **A} for r in rows], "events")
    kemem.index_records([{**r, **B} for r in rows], "events")
    # Just imported: no one has been active yet, but memories written today are not inactive.
    reports = kemem.cleanup(cap=1000, inactive_days=30, min_capacity=5)
    assert [(r.reason, r.deleted) for r in reports] == [("", 0), ("", 0)]
    # Forty days on: A was active on day 35, B not since the import.
    later = datetime.now(timezone.utc) + timedelta(days=40)
    kemem.reinforcer.active(Scope.of(**A), later - timedelta(days=5))
    kemem.flush()
    reports = kemem.cleanup(cap=1000, inactive_days=30, min_capacity=5, now=later)
    by_user = {r.user_id: r for r in reports}
    assert (by_user["u_b"].reason, by_user["u_b"].deleted) == ("inactive", 7)
    assert by_user["u_a"].deleted == 0
    assert {m.id for m in kemem.get_all(**B).results} == {f"i{i:02d}" for i in range(7, 12)}
    assert kemem.count(**A) == 12


@pytest.mark.engine
@pytest.mark.es_node_lacks("Painless: it writes a strength past the bound with a script")
def test_strength_stops_at_its_bound_and_a_stored_one_past_it_blocks_nothing(kemem) -> None:
    """Recall reinforcement had no ceiling, but every write validates strength <= MAX_STRENGTH:
    a popular memory became impossible to update, merge into or re-import."""
    from kemem_es.models import MAX_STRENGTH

    kemem.init()
    scope = Scope.of(**A)
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    record = {"id": "hot", "description": "小雨最喜欢吃重庆火锅", "created_at": "2025-06-01"}
    kemem.add({**record, "strength": MAX_STRENGTH - 10}, **A, refresh=True)

    def raw_strength() -> float:
        doc = kemem.engine.get(alias, scope.doc_id("hot"), routing=scope.routing)
        return float(doc["_source"]["strength"])

    kemem.search("小雨又想吃火锅了", **A, threshold=0)
    assert kemem.flush() == 1
    assert raw_strength() == MAX_STRENGTH
    # A store whose older reinforcement went past the bound.
    script = {"source": "ctx._source.strength = params.s", "params": {"s": MAX_STRENGTH + 5}}
    meta = {"_index": alias, "_id": scope.doc_id("hot"), "routing": scope.routing}
    kemem.engine.bulk([{"update": meta}, {"script": script}], refresh=True)
    assert kemem.get("hot", **A).strength == MAX_STRENGTH
    assert kemem.update("hot", {"metadata": {"a": 1}}, **A).event == "UPDATE"
    assert kemem.update("hot", "小雨最喜欢吃重庆老火锅", **A, refresh=True).event == "UPDATE"
    assert raw_strength() == MAX_STRENGTH
    assert kemem.add("小雨特别喜欢吃重庆老火锅", **A, refresh=True)[0].event == "UPDATE"
    exported = kemem.get("hot", **A)
    again = {**record, "description": exported.text, "strength": exported.strength}
    assert kemem.add(again, **A)[0].event in ("UPDATE", "NOOP")
