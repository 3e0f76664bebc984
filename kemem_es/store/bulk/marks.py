"""Superseded marks of many memories at once (an import's facts that change, docs/facts.md): the
versions they are marked on read in one round trip, the marks written in one bulk, their
history entries in one more.

The rules are those of one memory's mark (``Supersession.mark_superseded``): each mark is
written onto the version that was read (``if_seq_no``), so a change in between is a conflict,
never overwritten unseen; the memory is written first, its history entry after, and only for
a mark the engine applied (an entry written with the mark in one request would record a mark
the engine refused). What this bulk could not apply is handed back, for the one-at-a-time path
to read again and write (or report, naming the memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.errors import activity
from kemem_es.models import MemoryKind
from kemem_es.store import consistency, history
from kemem_es.store.bulk.send import note_written
from kemem_es.store.crud.base import Stored
from kemem_es.store.crud.reads import FETCH_EXCLUDES
from kemem_es.store.crud.writes import PATCH_SCRIPT
from kemem_es.store.layout import index_alias
from kemem_es.store.scope import Scope, checked_id

Key = tuple[Scope, str]  # (scope, memory id)


@dataclass(frozen=True)
class Mark:
    """One memory to mark: the version read, the change, and its history entry."""

    scope: Scope
    stored: Stored
    change: dict[str, Any]
    entry: dict[str, Any]
    full: dict[str, Any] | None = None  # the whole document, where the engine has no scripts

    @property
    def memory_id(self) -> str:
        return self.stored.memory_id


def read_versions(
    engine: Engine, kind: MemoryKind, keys: Sequence[Key]
) -> dict[Key, tuple[Stored, dict[str, Any] | None]]:
    """Each memory's version as of the last refresh (one round trip), as one memory's fetch
    reads it: only where its scope owns it (another scope's memory is not found). With the
    whole document too (vector included) where the engine cannot run the patch script and the
    mark is written as the whole document.

    Not real time: a real-time read of a memory changed since the last refresh makes the
    engine refresh first (measured: 1.7× the import rate of entities half of which supersede,
    without). It is safe because every mark is written on the version read: one that changed
    or went since (another writer's) is refused and read again in real time, one at a time;
    the memories this import marked itself are never read again (the caller keeps them)."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return {}
    prefix = engine.settings.index_prefix
    whole = not engine.painless
    refs = [
        (index_alias(prefix, s.db, kind), s.doc_id(checked_id(m, "memory_id")), s.routing)
        for s, m in keys
    ]
    with activity("reading the memories to mark superseded"):
        docs = engine.get_many(refs, excludes=() if whole else FETCH_EXCLUDES, realtime=False)
    out: dict[Key, tuple[Stored, dict[str, Any] | None]] = {}
    for (scope, memory_id), doc in zip(keys, docs, strict=True):
        if doc is None or not scope.owns(doc.get("_source", {})):
            continue
        src = doc["_source"]
        light = history.slim(src) if whole else src
        stored = Stored(kind, light, doc["_seq_no"], doc["_primary_term"])
        out[(scope, memory_id)] = (stored, src if whole else None)
    return out


def _lines(engine: Engine, mark: Mark) -> list[dict[str, Any]]:
    """The bulk action (on the version read) and its body: the patch script, or (no scripts)
    the whole document with the change, its cleared fields removed, as ``Writes.patch``."""
    s, stored = mark.scope, mark.stored
    meta = {
        "_index": index_alias(engine.settings.index_prefix, s.db, stored.kind),
        "_id": s.doc_id(stored.memory_id),
        "routing": s.routing,
        "if_seq_no": stored.seq_no,
        "if_primary_term": stored.primary_term,
    }
    if mark.full is None:
        script = {"source": PATCH_SCRIPT, "lang": "painless", "params": {"doc": mark.change}}
        return [{"update": meta}, {"script": script}]
    doc = {k: v for k, v in {**mark.full, **mark.change}.items() if v is not None}
    return [{"index": meta}, doc]


def _names(marks: Sequence[Mark], most: int = 5) -> str:
    ids = ", ".join(repr(m.memory_id) for m in marks[:most])
    return ids + (f" and {len(marks) - most} more" if len(marks) > most else "")


def write_marks(engine: Engine, marks: Sequence[Mark]) -> tuple[list[Mark], list[Mark]]:
    """Write the marks in one bulk, then the history entries of those the engine applied in
    one more. Returns (written and recorded, not applied: for the one-at-a-time path). A
    request the engine did not answer, or a refused history write, raises naming the memories
    (their marks may stand unrecorded then: ``kemem-es doctor`` records them, as for one)."""
    if not marks:
        return [], []
    lines: list[dict[str, Any]] = []
    for m in marks:
        lines += _lines(engine, m)
    try:
        with activity(f"marking memories {_names(marks)} superseded"):
            resp = engine.bulk(lines)
    finally:  # also when it failed: the engine may still apply it
        note_written(engine, lines)
    done: list[Mark] = []
    again: list[Mark] = []
    for m, item in zip(marks, resp["items"], strict=True):
        res: dict[str, Any] = next(iter(item.values()), {})
        ok = res.get("result") in ("updated", "created") and res.get("status", 0) < 300
        (done if ok else again).append(m)
    if done:
        doing = f"recording history (memories {_names(done)} were marked superseded)"
        consistency.write(engine, [m.entry for m in done], doing)
    return done, again
