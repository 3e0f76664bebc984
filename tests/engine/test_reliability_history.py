"""Reliability round 3 (issue 40), item 1: history that cannot drift from the store. The history
index refuses writes (``index.blocks.read_only_allow_delete``) during add / update / delete /
import / clean-up / delete_all; after the block is lifted, a retry of the verb (or the repair,
``kemem-es doctor``) leaves history and store consistent: the newest entry other than a NOOP
of every memory is its stored version, and every deletion is recorded. Checked by a scan over
the whole scope, independent of the repair's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kemem_es.errors import KememError, NotFound
from kemem_es.store.layout import history_alias

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_mumu"}
T0 = "2025-03-01 09:00:00"


@contextmanager
def history_read_only(km) -> Iterator[None]:
    alias = history_alias(km.settings.index_prefix)
    indices = km.engine.client.indices
    indices.put_settings(index=alias, body={"index.blocks.read_only_allow_delete": True})
    try:
        yield
    finally:
        indices.put_settings(index=alias, body={"index.blocks.read_only_allow_delete": None})


def scan(km, deleted: set[str]) -> list[str]:
    """Every memory of the scope: its newest non-NOOP entry records its stored text; every id
    in ``deleted``: gone, and its newest non-NOOP entry is a DELETE."""
    problems = []
    listed, cursor = [], None
    while True:
        page = km.get_all(**A, limit=100, cursor=cursor)
        listed += page.results
        cursor = page.next_cursor
        if not cursor:
            break
    for m in listed:
        changes = [e for e in km.history(m.id, **A) if e.event != "NOOP"]
        if not changes or changes[-1].event not in ("ADD", "UPDATE"):
            problems.append(f"{m.id}: no ADD/UPDATE last ({[e.event for e in changes]})")
        elif changes[-1].new_text != m.text:
            problems.append(f"{m.id}: history says {changes[-1].new_text!r}, store {m.text!r}")
    for mid in deleted:
        with pytest.raises(NotFound):
            km.get(mid, **A)
        changes = [e for e in km.history(mid, **A) if e.event != "NOOP"]
        if not changes or changes[-1].event != "DELETE":
            problems.append(f"{mid}: deleted, history ends with {[e.event for e in changes]}")
    return problems


def event(mid: str, text: str) -> dict:
    return {"id": mid, "description": text, "created_at": T0}


def test_retries_of_add_update_delete_and_import_repair_the_history(kemem) -> None:
    kemem.init()
    kemem.add(event("upd", "木木喜欢螺蛳粉"), **A)
    kemem.add(event("del", "小满周末去杭州"), **A)
    records = [{**event(f"imp{i}", f"导入的第{i}件事：豆包学会了握手{i}"), **A} for i in range(3)]
    with history_read_only(kemem):
        with pytest.raises(KememError, match="history"):
            kemem.add(event("new", "木木养了一只叫豆包的柯基"), **A)
        with pytest.raises(KememError, match="history"):
            kemem.update("upd", "木木现在更喜欢桂林米粉", **A)
        with pytest.raises(KememError, match="history"):
            kemem.delete("del", **A)
        with pytest.raises(KememError):
            kemem.index_records(records, "events")
    # Before any retry, the drift the issue saw is there.
    assert scan(kemem, {"del"})
    # The natural retries.
    assert kemem.add(event("new", "木木养了一只叫豆包的柯基"), **A)[0].event == "NOOP"
    assert kemem.update("upd", "木木现在更喜欢桂林米粉", **A).event == "NOOP"
    assert kemem.delete("del", **A).text == "小满周末去杭州"
    kemem.index_records(records, "events")
    assert scan(kemem, {"del"}) == []
    recovered = [e for e in kemem.history("new", **A) if e.reason == "recovered"]
    assert [e.event for e in recovered] == ["ADD"]
    # A second retry changes nothing more, and a delete of what never was is still NotFound.
    with pytest.raises(NotFound):
        kemem.delete("del", **A)
    with pytest.raises(NotFound):
        kemem.delete("never-was", **A)
    assert kemem.repair_history(**A, dry_run=True).consistent


def test_the_repair_records_what_clean_up_and_delete_all_left_out(kemem) -> None:
    kemem.init()
    for i in range(12):
        session = "s_del" if i >= 10 else "s_keep"
        text = f"第{i}件小事：木木在公园捡到了第{i}片叶子"
        kemem.add(event(f"m{i}", text), **A, session_id=session)
    kemem.add(event("x", "木木喜欢螺蛳粉"), **A)
    kemem.update("x", "木木更喜欢桂林米粉", **A)
    with history_read_only(kemem):
        with pytest.raises(KememError):
            kemem.update("x", "木木最喜欢的是肠粉", **A)
        # Clean-up of a user over the cap, and a delete_all: their deletions' entries fail.
        with contextlib.suppress(KememError):
            kemem.cleanup(**A, cap=10, ratio=0.3, inactive_days=10_000, interval_days=0)
        with contextlib.suppress(KememError):
            kemem.delete_all(**A, session_id="s_del")
    gone = {f"m{i}" for i in range(12)} - {m.id for m in kemem.get_all(**A).results}
    assert {"m10", "m11"} <= gone and len(gone) > 2  # by clean-up and delete_all, unrecorded
    assert scan(kemem, gone)
    dry = kemem.repair_history(**A, dry_run=True)
    assert not dry.consistent and dry.repaired == 0
    assert set(dry.unrecorded_deletions) == gone and dry.unrecorded_versions == ["x"]
    rep = kemem.repair_history(**A)
    assert rep.repaired == len(gone) + 1
    assert scan(kemem, gone) == []
    assert kemem.repair_history(**A, dry_run=True).consistent  # nothing left, nothing twice
    assert kemem.repair_history(**A).repaired == 0


def test_doctor_over_a_consistent_scope_finds_nothing(kemem) -> None:
    kemem.init()
    kemem.add(event("a", "木木喜欢螺蛳粉"), **A)
    kemem.update("a", "木木喜欢桂林米粉", **A)
    kemem.add(event("b", "小满周末去杭州"), **A)
    kemem.delete("b", **A)
    rep = kemem.repair_history(agent_id="qiyu", dry_run=True)  # the whole agent
    assert rep.consistent and rep.memories == 1 and rep.histories == 2


def test_kemem_es_doctor_reopens_reports_and_repairs(kemem) -> None:
    """The command: ``--reopen`` closes and reopens the memory indices (the way out of
    OpenSearch 3.5's already_closed_exception after a foreign scroll), ``--dry-run`` exits 1
    while something is missing, a plain run records it."""
    from typer.testing import CliRunner

    from kemem_es.cli.app import app

    kemem.init()
    kemem.add(event("a", "木木喜欢螺蛳粉"), **A)
    with history_read_only(kemem), pytest.raises(KememError):
        kemem.update("a", "木木喜欢桂林米粉", **A)
    env = {"KEMEM_INDEX_PREFIX": kemem.settings.index_prefix, "KEMEM_ES_URL": kemem.settings.url}
    args = ["doctor", "--agent", "qiyu", "--user", "u_mumu"]
    run = CliRunner().invoke(app, [*args, "--dry-run", "--reopen"], env=env)
    assert run.exit_code == 1, run.output
    assert "reopened 4 indices" in run.output and "1 unrecorded versions" in run.output
    assert CliRunner().invoke(app, args, env=env).exit_code == 0
    run = CliRunner().invoke(app, [*args, "--dry-run"], env=env)
    assert run.exit_code == 0 and "0 unrecorded versions, 0 unrecorded deletions" in run.output
    assert kemem.get("a", **A).text == "木木喜欢桂林米粉"  # the reopened index still serves
    assert kemem.history("a", **A)[-1].reason == "recovered"


def fact(mid: str, text: str, when: str) -> dict:
    return {"id": mid, "entity_name": "木木", "entity_type": "客体", "kind": "用户属性",
            "description": text, "updatetime": when}  # fmt: skip


def test_a_retried_add_completes_a_supersession_the_history_block_cut_short(kemem) -> None:
    """Facts that change under the same fault: with history refusing writes, the add of a new
    fact of a subject's slot stops after its memory is written, before the old fact is marked
    superseded. Its retry marks it and records both; the repair finds a superseded mark whose
    history entry is missing (the text did not change, the state did)."""
    from kemem_es.store.scope import Scope

    kemem.init()
    E = {**A, "kind": "entities"}
    kemem.add(fact("old", "木木住在北京", "2025-03-01"), **E)
    new = fact("new", "木木搬到杭州住了", "2025-09-01")
    with history_read_only(kemem), pytest.raises(KememError, match="history"):
        kemem.add(new, **E)
    assert kemem.get("old", **A).superseded_by is None  # cut short before the mark
    # The retry: the new memory is already stored (NOOP), the old one is superseded now.
    (again,) = kemem.add(new, **E)
    assert again.event == "NOOP" and again.superseded == ["old"]
    assert kemem.get("old", **A).superseded_by == "new"
    assert scan(kemem, set()) == []
    marks = [e for e in kemem.history("old", **A) if e.reason == "superseded"]
    assert [e.event for e in marks] == ["UPDATE"]
    assert kemem.repair_history(**A, dry_run=True).consistent

    # The mark written, its own entry refused: the repair sees the stored state the history
    # lacks (same text, now superseded), and records it once.
    kemem.add(fact("job", "木木在银行工作", "2025-01-01"), **E)
    with history_read_only(kemem), pytest.raises(KememError):
        kemem.memories.mark_superseded(Scope.of(**A), "entities", "job", "new")
    assert kemem.get("job", **A).superseded_by == "new"
    dry = kemem.repair_history(**A, dry_run=True)
    assert dry.unrecorded_versions == ["job"]
    assert kemem.repair_history(**A).repaired == 1
    assert kemem.repair_history(**A, dry_run=True).consistent
    last = [e for e in kemem.history("job", **A) if e.event != "NOOP"][-1]
    assert last.event == "UPDATE" and last.reason == "recovered"
