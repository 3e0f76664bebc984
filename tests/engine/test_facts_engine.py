"""Facts that change on a real engine: supersession on write (add text, entity records,
import, HTTP), history, default recall vs a past-question, never across scopes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine

A = {"agent_id": "facts-a", "user_id": "u1"}
B = {"agent_id": "facts-a", "user_id": "u2"}


def _rec(desc: str, when: str, mid: str) -> dict:
    return {"id": mid, "entity_name": "阿宁", "entity_type": "客体", "kind": "用户属性",
            "description": desc, "updatetime": when}  # fmt: skip


def test_add_text_supersedes_keeps_history_and_recalls_by_question(kemem) -> None:
    (old,) = kemem.add("我住在北京", **A)
    (other,) = kemem.add("我住在上海", **B)  # another user: never touched
    (new,) = kemem.add("我搬到杭州了", **A, refresh=True)
    assert new.superseded == [old.id]
    got = kemem.get(old.id, **A)
    assert got.superseded_by == new.id and got.superseded_at
    assert kemem.get(other.id, **B).superseded_by is None
    hist = kemem.history(old.id, **A)
    assert any(h.reason == "superseded" and h.matched_id == new.id for h in hist)
    now = kemem.query("我现在住在哪个城市？", **A, reinforce=False, score_threshold=0)
    assert next(h.index for h in now.memory_events) == new.id
    assert old.id not in [h.index for h in now.memory_events]
    past = kemem.query("我以前住在哪里？", **A, reinforce=False, score_threshold=0)
    assert old.id in [h.index for h in past.memory_events][:3]


def test_entity_records_and_import_supersede(kemem) -> None:
    kemem.add(_rec("阿宁住在北京", "2025-03-01", "e-old"), **A, kind="entities")
    (res,) = kemem.add(_rec("阿宁搬到杭州了", "2025-09-01", "e-new"), **A, kind="entities")
    assert res.superseded == ["e-old"]
    recs = [{**_rec("阿宁在一家银行工作", "2025-01-01", "i-old"), **B},
            {**_rec("阿宁跳槽去字节了", "2025-06-01", "i-new"), **B}]  # fmt: skip
    report = kemem.index_records(recs, kind="entities", db="user")
    assert report.superseded == 1
    assert kemem.get("i-old", **B).superseded_by == "i-new"
    assert kemem.get("i-new", **B).superseded_by is None
    # different facts of one subject stay current
    kemem.add(_rec("阿宁喜欢猫", "2025-03-01", "p-a"), **A, kind="entities")
    kemem.add(_rec("阿宁对猫毛过敏", "2025-09-01", "p-b"), **A, kind="entities")
    assert kemem.get("p-a", **A).superseded_by is None


def test_http_add_supersedes(kemem) -> None:
    from test_server import client

    c = client(kemem)
    r1 = c.post("/v1/memories", json={"text": "我不吃辣", **A})
    r2 = c.post("/v1/memories", json={"text": "我现在挺能吃辣了", **A, "refresh": True})
    old_id = r1.json()["results"][0]["id"]
    assert r2.json()["results"][0]["superseded"] == [old_id]
    got = c.get(f"/v1/memories/{old_id}", params=A).json()
    assert got["superseded_by"] == r2.json()["results"][0]["id"]


def test_an_index_from_before_gets_the_fact_fields_in_place(kemem) -> None:
    """An entity index created without the fact fields (an older release) is given them on
    the first write; its memories stay, and supersession works there."""
    from kemem_es.store.layout import FACT_FIELDS, index_alias
    from kemem_es.store.templates import concrete_index, memory_index_body

    eng = kemem.engine
    body = memory_index_body(eng, "user", "entities", kemem.embedder.dim)
    for f in FACT_FIELDS:
        body["mappings"]["properties"].pop(f)
    alias = index_alias(eng.settings.index_prefix, "user", "entities")
    index = concrete_index(eng.settings.index_prefix, "user", "entities")
    eng.create_index(index, {**body, "aliases": {alias: {"is_write_index": True}}})
    kemem.init()  # the other indices; this one "exists"
    kemem.add(_rec("阿宁住在北京", "2025-03-01", "old"), **A, kind="entities")
    (res,) = kemem.add(_rec("阿宁搬到杭州了", "2025-09-01", "new"), **A, kind="entities")
    assert res.superseded == ["old"]
    props = eng.get_index(alias)[index]["mappings"]["properties"]
    assert set(FACT_FIELDS) <= set(props)


def test_entity_records_history_recall_and_never_across_scopes(kemem) -> None:
    """Entity records: the history entry, default recall without the superseded fact, a
    past-question with it, and the same id in another scope untouched."""
    kemem.add(_rec("阿宁住在北京", "2025-03-01", "home"), **A, kind="entities")
    kemem.add(_rec("阿宁住在上海", "2025-03-01", "home"), **B, kind="entities")  # same id
    (res,) = kemem.add(_rec("阿宁搬到杭州了", "2025-09-01", "moved"), **A, kind="entities",
                       refresh=True)  # fmt: skip
    assert res.superseded == ["home"]
    assert kemem.get("home", **A).superseded_by == "moved"
    assert kemem.get("home", **B).superseded_by is None  # never across scopes
    hist = kemem.history("home", **A)
    assert any(h.reason == "superseded" and h.matched_id == "moved" for h in hist)
    q = {**A, "reinforce": False, "entity_threshold": 0, "score_threshold": 0}
    now = [h.index["index"] for h in kemem.query("阿宁现在住在哪个城市", **q).memory_entities]
    assert "moved" in now and "home" not in now
    past = [h.index["index"] for h in kemem.query("阿宁以前住在哪个城市", **q).memory_entities]
    assert "home" in past[:3]


def test_a_time_question_ranks_the_period_first(kemem) -> None:
    """Time-aware questions (text.timeframe): of episodes alike, the one of the period the
    question names comes first; with period_boost 0 the same memories come back."""
    from datetime import datetime, timezone

    trips = [("t24", "我去泰国清迈旅游了一趟，天天逛夜市", "2024-09-21"),
             ("t25", "我去云南大理旅游了，在洱海边骑车", "2025-07-05"),
             ("t26", "我去日本京都旅游了，看了好多寺庙", "2026-05-16")]  # fmt: skip
    recs = [{"id": i, **A, "description": d, "created_at": f"{t}T10:00:00+00:00"}
            for i, d, t in trips]  # fmt: skip
    kemem.index_records(recs, kind="events", db="user")
    kemem.memories.crud.refresh(kemem._scope(A["agent_id"], A["user_id"], "user"), {"events"})
    now = datetime(2026, 11, 28, 15, tzinfo=timezone.utc)
    q = {**A, "reinforce": False, "score_threshold": 0, "now": now, "entity_limit": 0}
    for text, gold in (("我去年去哪儿旅游了", "t25"), ("前年去哪旅游了", "t24")):
        got = [h.index for h in kemem.query(text, **q).memory_events]
        assert got[0] == gold, (text, got)
        off = [h.index for h in kemem.query(text, **q, period_boost=0).memory_events]
        assert sorted(off) == sorted(got)
