"""An import's superseded marks written in bulk (one read, one bulk of marks, one of history a
chunk) give what marking one memory after another gave: the same marks, the same history
entries, the same count; a re-run marks nothing again; a memory changed between the read and
the bulk is read again and marked once; another tenant's facts are never touched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kemem_es.memory.service import supersession
from kemem_es.memory.supersede import plan, time_of
from kemem_es.store.bulk import marks
from kemem_es.store.documents import facts_of_record
from kemem_es.store.scope import Scope

pytestmark = pytest.mark.engine

BATCHED = {"agent_id": "sb-batch", "user_id": "u1"}
ONE_BY_ONE = {"agent_id": "sb-one", "user_id": "u1"}
OTHER = {"agent_id": "sb-batch", "user_id": "u2"}  # same agent, another user: never touched
NAMES = [
    "阿宁", "木木", "小周", "老王", "阿杰", "小林", "大刘", "阿梅", "小吴", "老陈", "阿福", "小米",
]  # fmt: skip


def fact(mid: str, name: str, text: str, when: str, scope: dict[str, str]) -> dict[str, Any]:
    return {"id": mid, "entity_name": name, "entity_type": "客体", "kind": "用户属性",
            "description": f"{name}{text}", "updatetime": when, **scope}  # fmt: skip


def olds(scope: dict[str, str]) -> list[dict[str, Any]]:
    """What the store holds before: where each one lives, and for two of them their work."""
    out = [fact(f"old{i}", n, "住在北京", "2024-01-01", scope) for i, n in enumerate(NAMES)]
    out += [fact("job0", NAMES[0], "在一家银行工作", "2024-01-01", scope)]
    out += [fact("job1", NAMES[1], "在一家银行工作", "2024-01-01", scope)]
    return out


def news(scope: dict[str, str]) -> list[dict[str, Any]]:
    """The import: ten moves (one subject moves twice in this one batch), a job change, a record
    older than what is stored (itself superseded), a restatement (supersedes nothing), and a new
    subject (nothing to supersede)."""
    out = [fact(f"new{i}", n, "搬到杭州了", "2025-06-01", scope) for i, n in enumerate(NAMES[:10])]
    out += [fact("newer0", NAMES[0], "搬到上海了", "2025-09-01", scope)]
    out += [fact("newjob0", NAMES[0], "跳槽去字节了", "2025-03-01", scope)]
    out += [fact("stale10", NAMES[10], "住在广州", "2023-01-01", scope)]
    out += [fact("same11", NAMES[11], "住在北京", "2025-02-01", scope)]
    out += [fact("fresh", "阿新", "住在成都", "2025-02-01", scope)]
    return out


def one_at_a_time(service: Any, items: list[Any], kind: Any, actor: str) -> int:
    """The path before the batching, as it was: one fetch and one write a mark."""
    todo = [(c, f) for c in items if (f := facts_of_record(c.record)).slots]
    if not todo or not service.supersede:
        return 0
    for scope in {c.scope.db: c.scope for c, _ in todo}.values():
        service.crud.refresh(scope, {kind})
    marked: set[tuple[Scope, str]] = set()
    n = 0
    todo.sort(key=lambda cf: time_of(cf[0].record.model_dump()))
    for lo in range(0, len(todo), supersession.DEDUP_CHUNK):
        chunk = todo[lo : lo + supersession.DEDUP_CHUNK]
        found = service.facts.slot_holders(
            [(c.scope, kind, f.subject, f.stored, c.memory_id) for c, f in chunk]
        )
        for (c, facts), holders in zip(chunk, found, strict=True):
            if (c.scope, c.memory_id) in marked:
                continue
            live = [h for h in holders if (c.scope, str(h.get("id"))) not in marked]
            older, newer = plan(facts, c.record.description, time_of(c.record.model_dump()), live)
            if newer is not None:
                if service.mark_superseded(c.scope, kind, c.memory_id, newer, actor):
                    marked.add((c.scope, c.memory_id))
                    n += 1
                continue
            for m in older:
                if service.mark_superseded(c.scope, kind, m, c.memory_id, actor):
                    marked.add((c.scope, m))
                    n += 1
    return n


def outcome(kemem: Any, scope: dict[str, str], imported: bool = True) -> dict[str, Any]:
    """Each memory's mark and its whole history (what a reader can tell apart)."""
    ids = [r["id"] for r in olds(scope) + (news(scope) if imported else [])]
    out = {}
    for mid in ids:
        got = kemem.get(mid, **scope)
        entries = [
            (e.event, e.reason, e.matched_id, e.actor, e.old_text, e.new_text)
            for e in kemem.history(mid, **scope)
        ]
        out[mid] = (got.superseded_by, bool(got.superseded_at), entries)
    return out


def imported(kemem: Any, records: list[dict[str, Any]]) -> int:
    return kemem.index_records(records, kind="entities", db="user").superseded


def one_at_a_time_marks(kemem: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The memories that take the one-at-a-time path (``mark_superseded``), in order."""
    calls: list[str] = []
    one = kemem.memories.mark_superseded

    def counted(scope: Any, kind: Any, memory_id: str, *a: Any, **k: Any) -> bool:
        calls.append(memory_id)
        return bool(one(scope, kind, memory_id, *a, **k))

    monkeypatch.setattr(kemem.memories, "mark_superseded", counted)
    return calls


@pytest.mark.parametrize("chunk", [3, 256])
@pytest.mark.parametrize("scripts", [True, False], ids=["painless", "no-scripts"])
def test_batched_marks_equal_one_at_a_time(kemem, monkeypatch, chunk: int, scripts: bool) -> None:
    monkeypatch.setattr(supersession, "DEDUP_CHUNK", chunk)  # chunks meet mid-import too
    if not scripts:  # an engine without painless: the marks are written as whole documents
        monkeypatch.setattr(kemem.engine, "_painless", False)
    service = kemem.memories
    kemem.index_records(olds(BATCHED) + olds(ONE_BY_ONE) + olds(OTHER), kind="entities")
    batched = imported(kemem, news(BATCHED))
    with monkeypatch.context() as m:
        m.setattr(service, "supersede_imported", lambda *a: one_at_a_time(service, *a))
        reference = imported(kemem, news(ONE_BY_ONE))
    # old0 → newer0 (the later of two moves in one batch), new0 → newer0, old1..old9 → new1..9,
    # job0 → newjob0, stale10 → old10 (older than what is stored); same11 and fresh mark nothing
    assert batched == reference == 13
    got, want = outcome(kemem, BATCHED), outcome(kemem, ONE_BY_ONE)
    assert got == want
    assert got["old0"][0] == "newer0" and got["new0"][0] == "newer0"
    assert got["stale10"][0] == "old10" and got["old10"][0] is None
    assert got["same11"][0] is None and got["old11"][0] is None
    assert got["job1"][0] is None and got["job0"][0] == "newjob0"
    marks_recorded = sum(
        1 for _, _, hist in got.values() for e in hist if e[1] == "superseded"
    )  # one entry a mark, not one dropped
    assert marks_recorded == 13
    assert all(sb is None for sb, _, _ in outcome(kemem, OTHER, imported=False).values())
    for scope in (BATCHED, ONE_BY_ONE, OTHER):
        assert kemem.repair_history(**scope, dry_run=True).consistent
    # A re-run marks nothing again and adds no history.
    assert imported(kemem, news(BATCHED)) == 0
    assert outcome(kemem, BATCHED) == got
    assert kemem.repair_history(**BATCHED, dry_run=True).consistent


def test_a_memory_changed_after_the_read_is_read_again_and_marked_once(kemem, monkeypatch) -> None:
    """Another writer changes a memory between the chunk's read and its bulk: that mark is
    refused (the version read is gone), read again one at a time and written over the new
    version; the other marks of the bulk stand, each recorded once."""
    kemem.index_records(olds(BATCHED), kind="entities")
    read = marks.read_versions

    def then_changed(engine: Any, kind: Any, keys: Any) -> Any:
        got = read(engine, kind, keys)
        kemem.update("old3", {"description": "老王住在北京的朝阳区"}, **BATCHED, kind="entities")
        return got

    monkeypatch.setattr(marks, "read_versions", then_changed)
    calls = one_at_a_time_marks(kemem, monkeypatch)
    assert imported(kemem, news(BATCHED)) == 13
    assert calls == ["old3"]  # only the refused one took the one-at-a-time path
    got = kemem.get("old3", **BATCHED)
    assert got.superseded_by == "new3" and got.text == "老王住在北京的朝阳区"
    hist = kemem.history("old3", **BATCHED)
    assert [(e.event, e.reason) for e in hist][-2:] == [("UPDATE", None), ("UPDATE", "superseded")]
    assert kemem.repair_history(**BATCHED, dry_run=True).consistent


def test_a_refused_history_write_of_the_marks_is_loud_and_repairable(kemem, monkeypatch) -> None:
    """The marks are written, their history bulk refused (the history index blocked): the import
    fails naming the memories; the marks stand unrecorded, the repair records each once, and a
    re-run marks nothing again."""
    from kemem_es.errors import KememError
    from kemem_es.store.layout import history_alias

    kemem.index_records(olds(BATCHED), kind="entities")
    indices = kemem.engine.client.indices
    alias = history_alias(kemem.settings.index_prefix)
    write = marks.write_marks

    def blocked(engine: Any, todo: Any) -> Any:
        indices.put_settings(index=alias, body={"index.blocks.read_only_allow_delete": True})
        try:
            return write(engine, todo)
        finally:
            indices.put_settings(index=alias, body={"index.blocks.read_only_allow_delete": None})

    monkeypatch.setattr(marks, "write_marks", blocked)
    with pytest.raises(KememError, match=r"memories '\w+'.* were marked superseded"):
        imported(kemem, news(BATCHED))
    monkeypatch.setattr(marks, "write_marks", write)
    assert kemem.get("old1", **BATCHED).superseded_by == "new1"  # the mark stands
    dry = kemem.repair_history(**BATCHED, dry_run=True)
    assert len(dry.unrecorded_versions) == 13 and "old1" in dry.unrecorded_versions
    assert kemem.repair_history(**BATCHED).repaired == 13
    assert kemem.repair_history(**BATCHED, dry_run=True).consistent
    assert imported(kemem, news(BATCHED)) == 0
    hist = [e for e in kemem.history("old1", **BATCHED) if e.event != "NOOP"]
    assert [(e.event, e.reason) for e in hist] == [("ADD", None), ("UPDATE", "recovered")]


def test_a_marks_bulk_whose_answer_is_lost_is_loud_and_repairable(kemem, monkeypatch) -> None:
    """The engine applies the marks' bulk but its answer never comes (a read timeout after the
    request was sent): the import fails naming the memories it was marking, nothing is said
    done, the marks that stand are unrecorded until the repair records each once, and a re-run
    marks nothing again."""
    from opensearchpy.exceptions import ConnectionTimeout

    from kemem_es.errors import DeadlineExceeded

    kemem.index_records(olds(BATCHED), kind="entities")
    engine = kemem.memories.crud.engine
    send = engine._send

    def answer_lost(req: Any) -> Any:
        answer = send(req)
        if req.path == "/_bulk" and "superseded_by" in json.dumps(req.body, ensure_ascii=False):
            raise ConnectionTimeout("TIMEOUT", "read timed out", None)
        return answer

    monkeypatch.setattr(engine, "_send", answer_lost)
    named = r"marking memories '\w+'.* superseded: .*did not answer"
    with pytest.raises(DeadlineExceeded, match=named):
        imported(kemem, news(BATCHED))
    monkeypatch.setattr(engine, "_send", send)
    assert kemem.get("old1", **BATCHED).superseded_by == "new1"  # applied all the same
    dry = kemem.repair_history(**BATCHED, dry_run=True)
    assert "old1" in dry.unrecorded_versions
    assert kemem.repair_history(**BATCHED).repaired == len(dry.unrecorded_versions)
    assert kemem.repair_history(**BATCHED, dry_run=True).consistent
    assert imported(kemem, news(BATCHED)) == 0
    hist = [e for e in kemem.history("old1", **BATCHED) if e.event != "NOOP"]
    assert [(e.event, e.reason) for e in hist] == [("ADD", None), ("UPDATE", "recovered")]


def test_a_memory_changed_or_deleted_since_the_last_refresh_is_never_marked_blind(
    kemem, monkeypatch
) -> None:
    """The chunk's read is as of the last refresh: a memory another writer changed or deleted
    after it is read as it was. Its mark (written on the version read) is refused, read again
    in real time one at a time: the changed one is marked over its new version, the deleted
    one is not marked; each change recorded once."""
    from kemem_es.store.layout import index_alias

    kemem.index_records(olds(BATCHED), kind="entities")
    alias = index_alias(kemem.settings.index_prefix, "user", "entities")
    indices = kemem.engine.client.indices
    read = marks.read_versions

    def changed_first(engine: Any, kind: Any, keys: Any) -> Any:
        # no refresh until the read: the read cannot see these changes
        indices.put_settings(index=alias, body={"index.refresh_interval": "-1"})
        try:
            kemem.update(
                "old3", {"description": "老王住在北京的朝阳区"}, **BATCHED, kind="entities"
            )
            kemem.delete("old5", **BATCHED, kind="entities")
            return read(engine, kind, keys)
        finally:
            indices.put_settings(index=alias, body={"index.refresh_interval": None})

    monkeypatch.setattr(marks, "read_versions", changed_first)
    calls = one_at_a_time_marks(kemem, monkeypatch)
    assert imported(kemem, news(BATCHED)) == 12  # old5 is gone: not marked
    assert sorted(calls) == ["old3", "old5"]  # both refused by the bulk, read again
    got = kemem.get("old3", **BATCHED)
    assert got.superseded_by == "new3" and got.text == "老王住在北京的朝阳区"
    hist = kemem.history("old3", **BATCHED)
    assert [(e.event, e.reason) for e in hist][-2:] == [("UPDATE", None), ("UPDATE", "superseded")]
    assert [e.event for e in kemem.history("old5", **BATCHED)] == ["ADD", "DELETE"]
    assert kemem.repair_history(**BATCHED, dry_run=True).consistent
