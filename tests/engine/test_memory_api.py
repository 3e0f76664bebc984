"""The Memory API on the real engine: every verb, history, filters, paging, scope deletes."""

from __future__ import annotations

import pytest

from kemem_es.errors import ExtractionError, InvalidInput, NotFound

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_a"}
B = {"agent_id": "qiyu", "user_id": "u_b"}


def _event(i: int, **extra: object) -> dict:
    return {
        "id": f"m{i}",
        "description": f"第{i}件事：木木在画廊加班到很晚",
        "created_at": f"2025-01-{(i % 28) + 1:02d} 10:00:00",
        **extra,
    }


def test_add_text_and_messages_then_get(kemem) -> None:
    kemem.init()
    (r,) = kemem.add("木木养了一只叫豆包的柯基", **A, refresh=True)
    assert r.event == "ADD" and r.id.startswith("t")
    got = kemem.get(r.id, **A)
    assert got.text == "木木养了一只叫豆包的柯基"
    assert got.kind == "events" and got.db == "user" and got.user_id == "u_a"
    assert got.created_at  # now, with its offset

    msgs = [
        {"role": "user", "content": "我今天去看了牙医"},
        {"role": "assistant", "content": "疼不疼？"},
    ]
    (m,) = kemem.add(
        msgs, **A, session_id="s1", metadata={"mood": "ok"}, refresh=True, dialogue=False
    )
    stored = kemem.get(m.id, **A)
    assert stored.text == "用户：我今天去看了牙医\nAI：疼不疼？"  # each turn names its speaker
    assert stored.session_id == "s1" and stored.metadata == {"mood": "ok"}

    # The same text again is a no-op, recorded as such.
    (again,) = kemem.add("木木养了一只叫豆包的柯基", **A)
    assert again.event == "NOOP" and again.id == r.id
    assert [h.event for h in kemem.history(r.id, **A)] == ["ADD", "NOOP"]


def test_add_an_entity_record_and_refuse_a_foreign_scope(kemem) -> None:
    kemem.init()
    entity = {
        "entity_name": "豆包",
        "entity_type": "具体实体",
        "kind": "特殊实体属性",
        "keyword": "宠物",
        "description": "豆包是木木养的柯基",
        "updatetime": "2025-03-01 09:00:00",
    }
    (r,) = kemem.add(entity, **A, kind="entities", refresh=True)
    assert kemem.get(r.id, **A).entity_name == "豆包"
    with pytest.raises(InvalidInput, match="user_id: the record says 'u_b'"):
        kemem.add({**entity, "user_id": "u_b"}, **A, kind="entities")
    with pytest.raises(InvalidInput, match="entity needs a record"):
        kemem.add("豆包是柯基", **A, kind="entities")


def test_update_is_partial_and_history_keeps_every_version(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1, strength=40, place="画廊")}], "events")
    before = kemem.get("m1", **A)
    res = kemem.update("m1", "木木在画廊加班到凌晨两点", **A, refresh=True)
    assert res.event == "UPDATE" and res.previous == before.text
    after = kemem.get("m1", **A)
    assert after.text == "木木在画廊加班到凌晨两点"
    assert after.place == "画廊"  # survived
    assert after.strength == 41  # 40, +1 for a change within a day (Ebbinghaus)
    assert after.created_at == before.created_at
    assert after.updatetime != before.updatetime
    # The new text is searchable (tokens and vector were rebuilt).
    resp = kemem.search("凌晨两点还在加班", **A, threshold=0, limit=3)
    assert resp.memory_events[0].index == "m1"
    kemem.flush()  # the recall's +15 is written now, not in the middle of what follows

    kemem.update("m1", {"place": "家", "strength": 5}, **A)
    assert (kemem.get("m1", **A).place, kemem.get("m1", **A).strength) == ("家", 5)
    with pytest.raises(InvalidInput, match="id and scope cannot change"):
        kemem.update("m1", {"user_id": "u_b"}, **A)
    with pytest.raises(InvalidInput, match="created_at"):
        kemem.update("m1", {"created_at": 20250601}, **A)
    for bad in (5, b"\xe7\x94\xbb"):  # neither a text nor fields: refused, not a TypeError
        with pytest.raises(InvalidInput) as exc:
            kemem.update("m1", bad, **A)
        assert exc.value.field == "data"
    with pytest.raises(InvalidInput, match="no visible text"):
        kemem.update("m1", "\u200b", **A)

    kemem.delete("m1", **A, refresh=True)
    with pytest.raises(NotFound):
        kemem.get("m1", **A)
    events = kemem.history("m1", **A)
    assert [h.event for h in events] == ["ADD", "UPDATE", "UPDATE", "DELETE"]
    assert events[1].old_text == before.text and events[1].new_text == "木木在画廊加班到凌晨两点"
    assert events[3].old_text == "木木在画廊加班到凌晨两点"
    assert all(h.actor for h in events)


def test_paging_through_1000_memories_is_stable_and_complete(kemem) -> None:
    kemem.init()
    vec = [1.0] + [0.0] * (kemem.embedder.dim - 1)  # supplied: no embedding cost
    rows = [{**A, **_event(i), "vector": vec} for i in range(1000)]
    assert kemem.index_records(rows, "events").indexed == 1000
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = kemem.get_all(**A, limit=128, cursor=cursor)
        seen += [m.id for m in page.results]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == 1000 and len(set(seen)) == 1000
    assert pages == 8
    times = [m.updatetime for m in kemem.get_all(**A, limit=1000).results]
    assert times == sorted(times, reverse=True)
    with pytest.raises(InvalidInput, match="cursor"):
        kemem.get_all(**A, cursor="not-a-cursor")


@pytest.fixture()
def filtered(kemem):
    kemem.init()
    rows = [
        {
            **A,
            **_event(
                1,
                session_id="s1",
                place="画廊",
                strength=10,
                metadata={
                    "mood": "happy",
                    "n": 3,
                    "tags": ["art", "work"],
                    "day": "2025-06-01",
                    "vip": True,
                },
            ),
        },
        {
            **A,
            **_event(
                2,
                session_id="s2",
                place="家",
                strength=50,
                metadata={"mood": "sad", "n": 7, "day": "2025-07-01", "vip": False},
            ),
        },
        {**A, **_event(3, session_id="s1", strength=90)},
    ]
    kemem.index_records(rows, "events")
    return kemem


CASES = [
    ({"session_id": "s1"}, {"m1", "m3"}),
    ({"session_id": {"eq": "s2"}}, {"m2"}),
    ({"session_id": {"ne": "s1"}}, {"m2"}),
    ({"place": {"in": ["画廊", "家"]}}, {"m1", "m2"}),
    ({"place": {"nin": ["画廊"]}}, {"m2", "m3"}),
    ({"strength": {"gt": 10}}, {"m2", "m3"}),
    ({"strength": {"gte": 10, "lt": 90}}, {"m1", "m2"}),
    ({"strength": {"lte": 10}}, {"m1"}),
    ({"created_at": {"gte": "2025-01-03", "lt": "2025-01-04"}}, {"m2"}),
    ({"place": {"exists": True}}, {"m1", "m2"}),
    ({"place": {"exists": False}}, {"m3"}),
    ({"metadata.mood": "happy"}, {"m1"}),
    ({"metadata.mood": {"ne": "happy"}}, {"m2", "m3"}),
    ({"metadata.mood": {"in": ["sad", "angry"]}}, {"m2"}),
    ({"metadata.mood": {"nin": ["sad"]}}, {"m1", "m3"}),
    ({"metadata.tags": "work"}, {"m1"}),
    ({"metadata.n": {"gt": 3}}, {"m2"}),
    ({"metadata.n": {"gte": 3, "lte": 7}}, {"m1", "m2"}),
    ({"metadata.n": {"lt": 7}}, {"m1"}),
    ({"metadata.n": {"lte": 2}}, set()),
    ({"metadata.day": {"gte": "2025-06-15"}}, {"m2"}),
    ({"metadata.vip": True}, {"m1"}),
    ({"metadata.n": {"exists": True}}, {"m1", "m2"}),
    ({"metadata.n": {"exists": False}}, {"m3"}),
    ({"metadata.mood": "nobody-feels-this"}, set()),
    ({"or": [{"session_id": "s2"}, {"strength": {"gte": 90}}]}, {"m2", "m3"}),
    ({"and": [{"session_id": "s1"}, {"metadata.mood": "happy"}]}, {"m1"}),
    ({"not": {"session_id": "s1"}}, {"m2"}),
]


@pytest.mark.parametrize(("filters", "expected"), CASES)
def test_filters_match_exactly(filtered, filters: dict, expected: set) -> None:
    page = filtered.get_all(**A, filters=filters)
    assert {m.id for m in page.results} == expected
    assert filtered.count(**A, filters=filters) == len(expected)


def test_filters_apply_to_search_and_delete_all(filtered) -> None:
    resp = filtered.search("画廊加班", **A, threshold=0, filters={"session_id": "s2"})
    assert [e.index for e in resp.memory_events] == ["m2"]
    assert filtered.delete_all(**A, filters={"metadata.mood": "happy"}) == 1
    assert {m.id for m in filtered.get_all(**A).results} == {"m2", "m3"}


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"place": {"like": "画"}}, "unknown operator 'like'"),
        ({"strength": {"gt": "high"}}, "expects a number"),
        ({"place": {"in": "画廊"}}, "expects a non-empty list"),
        ({"or": {}}, "non-empty list"),
        # NaN compares with nothing, yet the engine matched every memory with it
        ({"strength": {"gte": float("nan")}}, "expects a finite number"),
        ({"metadata.n": {"gt": float("inf")}}, "expects a finite number"),
        ({"metadata.n": {"in": [float("nan")]}}, "expects a finite number"),
        # the client could not encode them: reported as the engine being unavailable
        ({"recall_count": {"gt": 99999999999999999999}}, "signed 64-bit range"),
        ({"metadata.n": {"gt": -(2**64)}}, "signed 64-bit range"),
        ({"metadata.a.b": "x"}, "no dots"),  # metadata keys are flat: it matched nothing
    ],
)
def test_bad_filters_are_named(filtered, filters: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        filtered.get_all(**A, filters=filters)


def test_dates_the_engine_reads_are_written_and_the_rest_refused_first(kemem) -> None:
    """Metadata text in any date shape the records accept is stored (the engine's format read
    neither "2025-06-01 12:00" nor a space before an offset: the bulk write failed); text that
    only looks like a date stays text; an offset beyond ±18:00 is refused before anything."""
    kemem.init()
    meta = {"at": "2025-06-01 12:00", "tz": "2025-06-01 12:00:00+08:00", "code": "2025-02-30"}
    far = _event(2, created_at="2025-06-01T12:00:00+18:00")
    kemem.index_records([{**A, **_event(1, metadata=meta)}, {**A, **far}], "events")
    assert kemem.get("m1", **A).metadata == meta
    assert kemem.count(**A, filters={"metadata.at": {"gte": "2025-06-01 11:59"}}) == 1
    assert kemem.count(**A, filters={"metadata.tz": {"lt": "2025-06-01T04:01:00Z"}}) == 1
    assert kemem.count(**A, filters={"metadata.code": "2025-02-30"}) == 1
    with pytest.raises(InvalidInput, match="beyond ±18:00"):
        kemem.index_records(
            [{**A, **_event(3)}, {**A, **_event(4, updatetime="2025-06-01T12:00:00+20:00")}],
            "events",
        )
    with pytest.raises(InvalidInput, match="day is out of range"):
        kemem.get_all(**A, filters={"created_at": {"gte": "2025-02-30"}})
    assert kemem.count(**A) == 2  # m3 was not written either


def test_delete_all_removes_exactly_one_users_memories(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(i)} for i in range(5)], "events")
    kemem.index_records([{**B, **_event(i)} for i in range(3)], "events")
    other_agent = {"agent_id": "lishen", "user_id": "u_a"}
    kemem.index_records([{**other_agent, **_event(i)} for i in range(2)], "events")
    entity = {
        **A,
        "entity_name": "木木",
        "entity_type": "客体",
        "kind": "用户属性",
        "description": "木木喜欢蓝玫瑰",
        "updatetime": "2025-01-01 10:00:00",
    }
    kemem.index_records([entity], "entities")
    kemem.index_records([{"agent_id": "qiyu", **_event(9)}], "events", db="official")

    assert kemem.delete_all(**A) == 6  # events and entities
    assert kemem.count(**A) == 0
    assert kemem.count(**B) == 3
    assert kemem.count(**other_agent) == 2
    assert kemem.count(agent_id="qiyu", db="official") == 1
    assert kemem.history("m0", **A)[-1].event == "DELETE"


def test_forget_strips_the_users_words_from_history(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    kemem.index_records([{**B, **_event(1)}], "events")
    kemem.update("m1", "一个秘密", **A)
    assert kemem.delete_all(**A, forget=True) == 1
    entries = kemem.history("m1", **A)
    assert [e.event for e in entries] == ["FORGET"]
    assert all(e.old_text is None and e.new_text is None for e in entries)
    assert kemem.history("m1", **B)[0].new_text  # the other user's history is untouched


def test_scope_is_required_and_unknown_options_raise(kemem) -> None:
    kemem.init()
    with pytest.raises(InvalidInput, match="user_id: required"):
        kemem.delete_all(agent_id="qiyu")
    with pytest.raises(InvalidInput, match="agent_id"):
        kemem.delete_all(agent_id="", db="official")
    with pytest.raises(InvalidInput, match="user_id: must be empty"):
        kemem.delete_all(agent_id="qiyu", user_id="u_a", db="official")
    with pytest.raises(InvalidInput, match="bogus: unknown option"):
        kemem.search("你好", **A, bogus=1)
    with pytest.raises(ExtractionError, match="KEMEM_LLM_BASE_URL"):
        kemem.add("x", **A, infer=True)  # no extractor configured: a clear error, nothing written

    # Wrong types and unknown kinds are named errors, never a TypeError or a missing template.
    calls = {
        "memory_id": [
            lambda: kemem.get(None, **A),
            lambda: kemem.update(5, "x", **A),
            lambda: kemem.delete("a\x1fb", **A),
            lambda: kemem.history(None, **A),
        ],
        "kind": [
            lambda: kemem.add("木木胃疼", **A, kind="event"),
            lambda: kemem.index_records([{"description": "木木胃疼", **A}], kind="x"),
            lambda: kemem.get_all(**A, kind="x"),
        ],
        "text": [lambda: kemem.query(None, **A)],
        "threshold": [lambda: kemem.search("胃疼", **A, threshold=0.3, score_threshold=0.6)],
        "metadata": [lambda: kemem.add("木木胃疼", **A, metadata=["a"])],
        "user_id": [lambda: kemem.add("木木胃疼", agent_id="qiyu", user_id=7)],
    }
    for field, fns in calls.items():
        for fn in fns:
            with pytest.raises(InvalidInput) as exc:
                fn()
            assert exc.value.field == field, (field, str(exc.value))
    assert kemem.count(**A) == 0


def test_official_database_crud(kemem) -> None:
    kemem.init()
    off = {"agent_id": "qiyu", "db": "official"}
    (r,) = kemem.add("祁煜的画室在澜城美术馆三楼", **off, refresh=True)
    assert kemem.get(r.id, **off).db == "official"
    kemem.update(r.id, "祁煜的画室搬到了澜城美术馆四楼", **off)
    assert "四楼" in kemem.get(r.id, **off).text
    # A user of the agent recalls it, but cannot change it through a user scope.
    with pytest.raises(NotFound):
        kemem.get(r.id, **A)
    kemem.delete(r.id, **off, refresh=True)
    assert kemem.count(**off) == 0


def test_session_id_narrows_get_all_search_count_and_delete_all(kemem) -> None:
    """docs/SPEC.md §7 lists session_id on these verbs: the same as the filter on session_id."""
    kemem.init()
    kemem.add("木木周末去爬山了", **A, session_id="s1", refresh=True, dialogue=False)
    kemem.add("木木周末去看海了", **A, session_id="s2", refresh=True, dialogue=False)
    assert [m.text for m in kemem.get_all(**A, session_id="s1").results] == ["木木周末去爬山了"]
    assert kemem.count(**A, session_id="s2") == 1
    assert kemem.count(**A, session_id="s1", filters={"place": {"exists": True}}) == 0
    hits = kemem.search("周末", **A, session_id="s2", threshold=0).memory_events
    assert [h.description for h in hits] == ["木木周末去看海了"]
    with pytest.raises(InvalidInput) as err:
        kemem.count(**A, session_id="")
    assert err.value.field == "session_id"
    assert kemem.delete_all(**A, session_id="s1") == 1
    assert [m.text for m in kemem.get_all(**A).results] == ["木木周末去看海了"]
