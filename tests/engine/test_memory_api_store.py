"""The store's edges on the real engine: metadata replaced by an update, the newest history,
forgetting what was deleted (by kind, by filter), malformed paging cursors."""

from __future__ import annotations

import base64
import logging

import pytest

from kemem_es.errors import InvalidInput
from kemem_es.store import history
from kemem_es.store.crud import (
    ConcurrentChange,
    Cursor,
    decode_cursor,
    encode_cursor,
    listing_key,
)
from kemem_es.store.scope import Scope

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_a"}
B = {"agent_id": "qiyu", "user_id": "u_b"}
ENTITY = {
    "id": "e1",
    "entity_name": "木木",
    "entity_type": "客体",
    "kind": "用户属性",
    "description": "木木喜欢蓝玫瑰",
    "updatetime": "2025-01-01 10:00:00",
}


def _event(i: int, **extra: object) -> dict:
    return {
        "id": f"m{i}",
        "description": f"第{i}件事：木木在画廊加班到很晚",
        "created_at": f"2025-01-{(i % 28) + 1:02d} 10:00:00",
        **extra,
    }


def _ids(km, filters: dict) -> set[str]:
    return {m.id for m in km.get_all(**A, filters=filters).results}


def test_update_replaces_metadata_and_keeps_the_vector(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1, metadata={"mood": "happy", "n": 3})}], "events")
    res = kemem.update("m1", {"metadata": {"n": 4}}, **A, refresh=True)
    assert res.memory.metadata == {"n": 4}
    assert kemem.get("m1", **A).metadata == {"n": 4}  # stored as returned: no "mood" left
    assert _ids(kemem, {"metadata.mood": {"exists": True}}) == set()
    assert _ids(kemem, {"metadata.n": 4}) == {"m1"}
    # A text-free update kept the vector: the memory is still found by meaning.
    resp = kemem.search("画廊加班", **A, threshold=0, limit=3)
    assert [e.index for e in resp.memory_events] == ["m1"]

    kemem.update("m1", {"metadata": {}}, **A, refresh=True)
    assert kemem.get("m1", **A).metadata == {}
    assert _ids(kemem, {"metadata.n": {"exists": True}}) == set()


def test_a_patch_of_a_stale_version_is_refused(kemem) -> None:
    """Optimistic concurrency survives the scripted update: a version read before another
    write is a conflict, not a silent overwrite."""
    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    scope = Scope.of(**A)
    stale = kemem.memories.crud.fetch(scope, "m1")
    kemem.update("m1", {"place": "家"}, **A)
    entry = history.entry(scope, "m1", "events", "UPDATE", "api")
    with pytest.raises(ConcurrentChange):
        kemem.memories.crud.patch(scope, stale, {"place": "公司"}, entry, refresh=False)
    assert kemem.get("m1", **A).place == "家"


def test_history_returns_the_newest_entries_oldest_first(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    scope = Scope.of(**A)
    noops = [history.entry(scope, "m1", "events", "NOOP", "api") for _ in range(1100)]
    kemem.engine.bulk(history.bulk_lines(kemem.settings.index_prefix, noops))
    kemem.update("m1", "木木在画廊加班到凌晨两点", **A)
    kemem.delete("m1", **A)

    entries = kemem.history("m1", **A)
    assert len(entries) == 1000
    assert [e.event for e in entries[-2:]] == ["UPDATE", "DELETE"]
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert [e.event for e in kemem.history("m1", **A, limit=3)] == ["NOOP", "UPDATE", "DELETE"]
    assert len(kemem.history("m1", **A, limit=2000)) == 1103  # ADD, 1100 NOOP, UPDATE, DELETE
    for bad in (0, -1, 10_001, "5", True):
        with pytest.raises(InvalidInput) as exc:
            kemem.history("m1", **A, limit=bad)
        assert exc.value.field == "limit"


def test_history_limit_over_http(kemem) -> None:
    from test_server import client, error_of

    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    kemem.update("m1", "木木在画廊加班到凌晨两点", **A)
    c = client(kemem)
    url = "/v1/memories/m1/history"
    assert [h["event"] for h in c.get(url, params=A).json()["results"]] == ["ADD", "UPDATE"]
    assert [h["event"] for h in c.get(url, params={**A, "limit": 1}).json()["results"]] == [
        "UPDATE"
    ]
    for bad in (0, 10_001):
        assert error_of(c.get(url, params={**A, "limit": bad}), 422)["field"] == "limit"


def test_forgetting_one_kind_keeps_the_other_kinds_history(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    kemem.index_records([{**A, **ENTITY}], "entities")
    assert kemem.delete_all(**A, kind="events", forget=True) == 1
    assert [e.event for e in kemem.history("m1", **A)] == ["FORGET"]
    (added,) = kemem.history("e1", **A)  # the entity still exists, and so does its history
    assert (added.event, added.new_text) == ("ADD", "木木喜欢蓝玫瑰")


def test_forgetting_by_filter_strips_exactly_the_deleted_memories(kemem) -> None:
    kemem.init()
    kemem.index_records(
        [
            {**A, **_event(1, metadata={"mood": "happy"})},
            {**A, **_event(2, metadata={"mood": "sad"})},
        ],
        "events",
    )
    kemem.index_records([{**B, **_event(1, metadata={"mood": "happy"})}], "events")
    kemem.update("m1", "一个秘密", **A)
    assert kemem.delete_all(**A, filters={"metadata.mood": "happy"}, forget=True) == 1
    entries = kemem.history("m1", **A)
    assert [e.event for e in entries] == ["FORGET"]
    assert entries[0].old_text is None and entries[0].new_text is None
    assert kemem.history("m2", **A)[0].new_text  # not deleted: its history is kept
    assert kemem.history("m1", **B)[0].new_text  # another user's: untouched


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


BAD_CURSORS = [
    '["a","b"]',
    "[null,null]",
    '[99999999999999999999,"x"]',
    '[1700000000000,"x"]',  # not an engine id
    '[1.5,"' + "a" * 40 + '"]',
    '[true,"' + "a" * 40 + '"]',
    "[1700000000000,5]",
    '{"a":1}',
    "[1,2,3]",
    '{"a":[1700000000000,"' + "a" * 40 + '",7]}',  # a tiebreaker belongs to a point in time
    '{"a":[1700000000000,"' + "a" * 40 + '"],"p":"not a pit id!"}',
    '{"a":[1700000000000,"' + "a" * 40 + '"],"x":1}',
    '{"a":[1700000000000,"' + "a" * 40 + '"],"l":"not a listing"}',
]


@pytest.mark.parametrize("raw", BAD_CURSORS)
def test_a_malformed_cursor_is_invalid_input_not_an_engine_error(kemem, raw: str) -> None:
    kemem.init()
    with pytest.raises(InvalidInput) as exc:
        kemem.get_all(**A, cursor=_b64(raw))
    assert exc.value.field == "cursor"


def test_cursors_of_every_kind_of_page_decode() -> None:
    """What encode_cursor writes (an engine date sort value, the missing value's, a uid) is
    accepted back unchanged."""
    uid = Scope.of(**A).doc_id("m1")
    pit = "85S6QQEHcGl0dGVzdBYtWUZjNGhGVFRiR1piQWhBd25WWVdBARYy+/_-=="
    listing = listing_key(Scope.of(**A), "events", {"place": "家"})
    for values in ([1_700_000_000_000, uid], [-(2**63), uid], [0, uid]):
        assert decode_cursor(encode_cursor(Cursor(values))) == Cursor(values)
        assert decode_cursor(encode_cursor(Cursor(values, pit))) == Cursor(values, pit)
        with_listing = Cursor(values, pit, listing)
        assert decode_cursor(encode_cursor(with_listing)) == with_listing
    with_tiebreak = Cursor([0, uid, 12], pit, listing)  # Elasticsearch's implicit _shard_doc
    assert decode_cursor(encode_cursor(with_tiebreak)) == with_tiebreak
    # The older form, the bare sort values, still works.
    assert decode_cursor(_b64(f'[0,"{uid}"]')) == Cursor([0, uid])


def _both_kinds(km) -> None:
    km.init()
    km.index_records([{**A, **_event(i)} for i in range(3)], "events")
    entities = [
        {**A, **ENTITY, "id": f"e{i}", "description": f"木木喜欢第{i}种花"} for i in range(3)
    ]
    km.index_records(entities, "entities")


def test_a_cursor_belongs_to_its_listing(kemem) -> None:
    """A point in time covers its first page's kinds: an events cursor passed with
    kind=entities went on listing events (and with no point in time, entities: the answer
    depended on engine state). Another scope, database or filter paged nonsense silently."""
    _both_kinds(kemem)
    first = kemem.get_all(**A, kind="events", limit=1)
    assert decode_cursor(first.next_cursor).pit  # the case that listed the wrong kind
    others = [
        {**A, "kind": "entities"},
        {**A},  # both kinds
        {**B, "kind": "events"},
        {"agent_id": "qiyu", "db": "official", "kind": "events"},
        {**A, "kind": "events", "filters": {"place": "家"}},
        {**A, "kind": "events", "session_id": "s1"},
    ]
    for other in others:
        with pytest.raises(InvalidInput, match="cursor: not from this listing") as exc:
            kemem.get_all(**other, limit=5, cursor=first.next_cursor)
        assert exc.value.field == "cursor", other
    # The same listing goes on, whatever the page size.
    rest = kemem.get_all(**A, kind="events", limit=5, cursor=first.next_cursor)
    assert [m.kind for m in rest.results] == ["events", "events"] and rest.next_cursor is None
    # Filters are the same listing in any key order.
    flt = {"place": {"exists": False}, "strength": {"gte": 0}}
    page = kemem.get_all(**A, filters=flt, limit=1)
    again = dict(reversed(flt.items()))
    assert len(kemem.get_all(**A, filters=again, limit=9, cursor=page.next_cursor).results) == 5


def test_an_older_cursor_pages_this_requests_listing(kemem) -> None:
    """A cursor of the form before cursors named their listing: its point in time may be of
    another kind, so it goes on from the live indices, which this request selects."""
    _both_kinds(kemem)
    first = kemem.get_all(**A, kind="events", limit=1)
    old = decode_cursor(first.next_cursor)
    older = encode_cursor(Cursor(old.after, old.pit))
    page = kemem.get_all(**A, kind="entities", limit=5, cursor=older)
    assert {m.kind for m in page.results} <= {"entities"}


def _listed(km, limit: int, between=lambda: None) -> list[str]:
    """Every id of a whole listing of A's memories; ``between`` runs after the first page."""
    page = km.get_all(**A, limit=limit)
    seen = [m.id for m in page.results]
    between()
    while page.next_cursor:
        page = km.get_all(**A, limit=limit, cursor=page.next_cursor)
        seen += [m.id for m in page.results]
    return seen


def test_paging_lists_each_memory_once_while_memories_are_updated(kemem) -> None:
    """An update sets updatetime to now: on the live index, a memory the pager had not reached
    moved ahead of the cursor and was never listed. The listing reads the scope as it was at its
    first page."""
    kemem.init()
    kemem.index_records([{**A, **_event(i)} for i in range(20)], "events")
    oldest = [m.id for m in kemem.get_all(**A, limit=20).results][-6:]

    def update_the_oldest() -> None:
        for mid in oldest:
            kemem.update(mid, {"metadata": {"touched": True}}, **A, refresh=True)
        kemem.add("新的一件事：木木去看海", **A, refresh=True, dedup=False)

    seen = _listed(kemem, 5, update_the_oldest)
    assert sorted(seen) == sorted(f"m{i}" for i in range(20))  # none missing, none twice
    # The next listing shows the changes: the updated memories first, the new one too.
    assert len(_listed(kemem, 5)) == 21


def test_a_listing_goes_on_when_its_point_in_time_is_gone(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(i)} for i in range(12)], "events")
    page = kemem.get_all(**A, limit=5)
    pit = decode_cursor(page.next_cursor).pit
    assert pit
    kemem.engine.close_pit(pit)  # as if it expired
    seen = [m.id for m in page.results]
    while page.next_cursor:
        page = kemem.get_all(**A, limit=5, cursor=page.next_cursor)
        seen += [m.id for m in page.results]
    assert sorted(seen) == sorted(f"m{i}" for i in range(12))


def _open_contexts(km) -> int:
    """The engine's open point-in-time contexts (one per shard a point in time covers)."""
    resp = km.engine.client.nodes.stats(metric="indices", index_metric="search")
    searches = [node["indices"]["search"] for node in resp["nodes"].values()]
    # OpenSearch counts them apart; Elasticsearch among its open search contexts.
    return sum(s.get("point_in_time_current", s.get("open_contexts", 0)) for s in searches)


def test_abandoned_listings_hold_few_points_in_time_briefly(kemem, monkeypatch, caplog) -> None:
    """A listing nobody finishes (a dashboard's first page, a client that reads one page)
    never closes its point in time: each held an engine context for 10 minutes, and 150 first
    pages used up the cluster's limit of 300. This process holds at most PIT_MAX_OPEN, each
    kept alive 2 minutes; past that a listing pages the live indices, with no WARNING each."""
    from kemem_es.store.crud import pits as crud  # the listing's point-in-time budget

    kemem.init()
    kemem.index_records([{**A, **_event(i)} for i in range(6)], "events")
    monkeypatch.setattr(crud, "PIT_MAX_OPEN", 3)
    monkeypatch.setattr(crud, "PITS", crud.PitBudget())
    keep_alives: list[str] = []
    real_open = kemem.engine.open_pit

    def open_pit(index: str, keep_alive: str, routing: str | None = None) -> str:
        keep_alives.append(keep_alive)
        return real_open(index, keep_alive, routing)

    monkeypatch.setattr(kemem.engine, "open_pit", open_pit)
    before = _open_contexts(kemem)
    with caplog.at_level(logging.DEBUG, logger="kemem_es.store.crud"):
        firsts = [kemem.get_all(**A, limit=2) for _ in range(8)]  # each abandoned at page 1
    assert [bool(decode_cursor(p.next_cursor).pit) for p in firsts] == [True] * 3 + [False] * 5
    assert crud.PITS.held() == 3 and keep_alives == ["120s"] * 3
    held = _open_contexts(kemem) - before
    assert 3 <= held <= 3 * 2  # both kinds' indices, one routed shard each
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # Past the budget a listing still lists each memory once, from the live indices.
    assert sorted(_listed(kemem, 2)) == sorted(f"m{i}" for i in range(6))
    # A listing that ends gives its point in time back at once.
    page = firsts[0]
    while page.next_cursor:
        page = kemem.get_all(**A, limit=2, cursor=page.next_cursor)
    assert crud.PITS.held() == 2 and _open_contexts(kemem) - before == held * 2 // 3
    assert decode_cursor(kemem.get_all(**A, limit=2).next_cursor).pit  # a slot is free again


def test_delete_all_deletes_memories_updated_or_added_while_it_runs(kemem, monkeypatch) -> None:
    """Paged by updatetime, a memory updated before delete_all reached it moved ahead of the
    cursor and survived; one added meanwhile survived too."""
    from kemem_es.store import crud
    from kemem_es.store.crud import deletes

    kemem.init()
    kemem.index_records([{**A, **_event(i)} for i in range(20)], "events")
    monkeypatch.setattr(deletes, "DELETE_PAGE", 5)
    real = crud.Crud.delete_sources
    calls = []

    def delete_sources(self, scope, rows, *args, **kwargs):
        if not calls:  # after the first page was read: change what is not deleted yet
            listed = {row.memory_id for row in rows}
            for mid in [f"m{i}" for i in range(20) if f"m{i}" not in listed]:
                kemem.update(mid, {"metadata": {"touched": True}}, **A)
            kemem.add("新的一件事：木木去看海", **A, refresh=True, dedup=False)
        calls.append(len(rows))
        return real(self, scope, rows, *args, **kwargs)

    monkeypatch.setattr(crud.Crud, "delete_sources", delete_sources)
    assert kemem.delete_all(**A, forget=True) == 21
    assert kemem.count(**A) == 0


def test_a_history_read_refreshes_the_history_only_after_this_process_wrote(
    kemem, monkeypatch
) -> None:
    """Every history read refreshed the history index, which all scopes share: any API key
    could force refreshes at request rate. A read refreshes it only when this process wrote
    history since its last refresh, so a change is in the history read right after it, in
    any Kemem of the process."""
    from kemem_es import Kemem
    from kemem_es.store.layout import history_alias

    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    alias = history_alias(kemem.settings.index_prefix)
    refreshed: list[str] = []
    real = kemem.engine.refresh

    def refresh(index: str, *args: float | None) -> None:
        refreshed.append(index)
        real(index, *args)

    monkeypatch.setattr(kemem.engine, "refresh", refresh)
    kemem.update("m1", "第1件事：木木在画廊加班到深夜", **A)  # not refreshed
    refreshed.clear()
    assert [e.event for e in kemem.history("m1", **A)] == ["ADD", "UPDATE"]
    assert refreshed == [alias]
    for _ in range(3):
        kemem.history("m1", **A)
    assert refreshed == [alias]  # nothing written since: no refresh
    kemem.delete("m1", **A)
    other = Kemem(kemem.settings)  # another instance of this process (its own engine client)
    try:
        assert [e.event for e in other.history("m1", **A)] == ["ADD", "UPDATE", "DELETE"]
    finally:
        other.close()


def test_a_malformed_cursor_over_http_is_422(kemem) -> None:
    from test_server import client, error_of

    kemem.init()
    c = client(kemem)
    for raw in BAD_CURSORS[:3]:
        r = c.get("/v1/memories", params={**A, "cursor": _b64(raw)})
        assert error_of(r, 422)["field"] == "cursor"


def test_a_cursor_of_another_listing_over_http_is_422(kemem) -> None:
    from test_server import client, error_of

    _both_kinds(kemem)
    c = client(kemem)
    first = c.get("/v1/memories", params={**A, "kind": "events", "limit": 1}).json()
    r = c.get("/v1/memories", params={**A, "kind": "entities", "cursor": first["next_cursor"]})
    err = error_of(r, 422)
    assert err["field"] == "cursor" and err["message"] == "cursor: not from this listing"


def test_the_readmes_chat_loop_recalls_and_remembers_but_not_small_talk(kemem) -> None:
    """The README's session loop, run as written (its ``Kemem()`` is this test's store): the
    turns are in the next turn's context at once; when the session ends, the user's statement
    is remembered, and neither the greeting nor the acknowledgement is (no LLM configured)."""
    import re
    from pathlib import Path

    from kemem_es.store.layout import index_alias

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## A chat loop with memory", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    kemem.init()
    loop: dict = {"Kemem": lambda: kemem}
    exec(code.replace("from kemem_es import Kemem\n", ""), loop)
    chat_turn, who = loop[re.search(r"def (\w+)\(", code).group(1)], loop["who"]
    prompts: list[str] = []

    def llm(system: str) -> str:
        prompts.append(system)
        return "听起来真开心，下次带我一起去"

    for message in ["你好", "我周末去海边看了日出，超级美", "嗯嗯"]:
        chat_turn(message, "s-readme", llm)
    chat_turn("上次看日出是哪里来着", "s-readme", llm)
    assert "海边看了日出" in prompts[-1]  # the earlier turn is in this turn's context
    kemem.end_session("s-readme", user_id=who["user_id"], agent_id=who["agent_id"])
    kemem.drain()
    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    scope = {"agent_id": who["agent_id"], "user_id": who["user_id"]}
    texts = " ".join(m.text for m in kemem.get_all(**scope).results)
    assert "日出" in texts and "你好" not in texts and "嗯嗯" not in texts
