"""Facts that change (issue 36): slots, subjects, supersession decisions, recall order —
pure, no engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.contract.response import EntityHit
from kemem_es.memory.supersede import plan
from kemem_es.prompt import PAST_MARK, _fragment
from kemem_es.search.facts import recall_filters, resolve_past, slot_clauses, slot_order
from kemem_es.text.facts import (
    SELF,
    asks_about_past,
    entity_facts,
    facts_of,
    question_slots,
)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "facts"


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("我住在北京", "居住地"),
        ("我搬到杭州了", "居住地"),
        ("我在腾讯上班", "工作"),
        ("我跳槽去字节了", "工作"),
        ("我脱单了，有男朋友了", "感情状态"),
        ("我不吃辣", "饮食:辣"),
        ("我现在挺能吃辣了", "饮食:辣"),
        ("我养了一只猫", "宠物"),
        ("我对猫毛过敏", "过敏:猫毛"),
    ],
)
def test_slots_come_from_cues(text: str, slot: str) -> None:
    assert slot in facts_of(text).slots


@pytest.mark.parametrize("text", ["我喜欢猫", "我很想去北京旅游", "我周末经常去北京出差"])
def test_no_cue_no_slot(text: str) -> None:
    assert facts_of(text).slots == ()


def test_subject_is_the_person_before_the_cue() -> None:
    assert facts_of("我妈住在青岛").subject == "妈妈"
    assert facts_of("我住在上海").subject == SELF
    assert facts_of("我和男朋友在一起三年了").subject == SELF  # company, not the subject
    assert facts_of("我闺蜜最近在谈恋爱").subject == "闺蜜"


def test_wishes_experiences_and_past_statements_supersede_nothing() -> None:
    assert facts_of("我小时候想当医生").slots == ()
    assert facts_of("我在北京工作过一个暑假").slots == ()
    assert facts_of("我以前住在北京").closed


def test_entity_slot_from_text_then_keyword_then_extractor() -> None:
    assert entity_facts("阿宁", "用户属性", "", "阿宁搬到杭州了").slots == ("居住地",)
    assert entity_facts("阿宁", "用户属性", "居住地", "阿宁在西湖边").slots == ("居住地",)
    assert entity_facts("阿宁", "用户属性", "兴趣", "阿宁喜欢猫").slots == ()
    assert entity_facts("阿宁", "用户属性", "", "阿宁喜欢猫", slot="宠物").slots == ("宠物",)
    # the entity's name and kind are its subject
    a = entity_facts("阿宁", "用户属性", "", "阿宁住在北京")
    b = entity_facts("小雨", "用户属性", "", "小雨住在北京")
    assert a.subject != b.subject


def _held(text: str, when: str, mid: str = "old") -> dict:
    f = facts_of(text)
    return {"id": mid, "description": text, "slots": f.stored, "subject": f.subject,
            "created_at": when}  # fmt: skip


def test_plan_supersedes_older_of_same_slot_only() -> None:
    from datetime import datetime, timezone

    now = datetime(2025, 9, 1, tzinfo=timezone.utc)
    new = facts_of("我搬到杭州了")
    assert plan(new, "我搬到杭州了", now, [_held("我住在北京", "2025-03-01")]) == (["old"], None)
    # a newer current fact wins: the new (older) one is superseded by it
    assert plan(new, "我搬到杭州了", now, [_held("我住在上海", "2025-10-01")]) == ([], "old")
    # a restatement is dedup's, not a change
    assert plan(new, "我搬到杭州了", now, [_held("我搬到杭州了啊", "2025-03-01")]) == ([], None)
    # the same thing said the same way (不爱吃 / 不吃) is no change either
    food = facts_of("我不吃香菜了")
    assert plan(food, "我不吃香菜了", now, [_held("我不爱吃香菜", "2025-03-01")]) == ([], None)


def test_dev_pairs_never_supersede_each_other() -> None:
    """bench/facts/pairs.jsonl: two different facts about one subject (a then b)."""
    from datetime import datetime, timezone

    later = datetime(2025, 9, 1, tzinfo=timezone.utc)
    rows = [json.loads(x) for x in (BENCH / "pairs.jsonl").read_text("utf-8").splitlines()]
    bad = [
        (r["a"], r["b"])
        for r in rows
        if plan(facts_of(r["b"]), r["b"], later, [_held(r["a"], "2025-03-01")])[0]
    ]
    assert len(bad) <= 0.02 * len(rows), bad


def test_questions() -> None:
    assert "居住地" in question_slots("要给我寄东西的话寄到哪个城市")
    assert "饮食:香菜" in question_slots("这碗面要不要给我加香菜")
    assert asks_about_past("我以前住在哪里？") and not asks_about_past("我现在住在哪？")


def test_past_question_lifts_the_current_only_filter() -> None:
    p = QueryParams(agent_id="a", user_id="u")
    assert recall_filters(resolve_past(p, "我现在住在哪"))
    assert recall_filters(resolve_past(p, "我以前住在哪")) == []
    # an explicit option wins over the utterance
    assert recall_filters(resolve_past(p.model_copy(update={"past": False}), "我以前住在哪"))
    assert slot_clauses(p, "我现在住哪") and not slot_clauses(p, "今天天气不错")


def test_newer_of_a_slot_ranks_first_unless_past() -> None:
    old = {"_source": {"subject": SELF, "slots": ["居住地"], "created_at": "2025-03-01"}}
    new = {"_source": {"subject": SELF, "slots": ["居住地"], "created_at": "2025-09-01"}}
    other = {"_source": {"created_at": "2025-01-01"}}
    items = [old, other, new]
    assert slot_order(items, lambda h: h["_source"], past=False) == [new, other, old]
    assert slot_order(items, lambda h: h["_source"], past=True) == [old, other, new]


def test_a_superseded_fact_reads_as_past_in_the_prompt() -> None:
    hit = EntityHit(
        id=0,
        kind="用户属性",
        score=0.9,
        index={"index": "x"},
        description="阿宁住在北京",
        updatetime="2025-03-01",
        superseded_by="y",
    )
    assert _fragment(hit, "阿宁", "祁煜")[1] == f"阿宁-属性：{PAST_MARK}阿宁住在北京"
