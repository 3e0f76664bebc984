"""Changing one memory (create, replace, patch, delete), each with its history entry, and
the consistency checks of a retried write."""

from __future__ import annotations

from typing import Any

from kemem_es.contract.memory import Memory
from kemem_es.engine.errors import check_bulk, is_refusal, type_and_reason, with_remedy
from kemem_es.errors import ConcurrentChange, EngineRefused, EngineUnavailable, NotFound, activity
from kemem_es.models import MemoryKind
from kemem_es.runtime import shielded
from kemem_es.store import consistency, fresh, history
from kemem_es.store.crud.base import CrudBase, Stored
from kemem_es.store.scope import Scope, checked_id

# Top-level fields replaced whole; fixed source (compiled once), the values only in params.
# Given fields replace their values whole; a null one is removed (a cleared field is absent, as
# in a memory written without it). Values come in params only, never in the source.
PATCH_SCRIPT = (
    "for (e in params.doc.entrySet()) { if (e.getValue() == null) "
    "{ ctx._source.remove(e.getKey()) } else { ctx._source.put(e.getKey(), e.getValue()) } }"
)


class Writes(CrudBase):
    def _action(self, op: str, scope: Scope, kind: MemoryKind, memory_id: str,
                version: Stored | None = None) -> dict[str, Any]:  # fmt: skip
        """A bulk action line on one memory; with ``version``, only if it is still that one."""
        meta: dict[str, Any] = {
            "_index": self.alias(scope, kind),
            "_id": scope.doc_id(memory_id),
            "routing": scope.routing,
        }
        if version is not None:
            meta |= {"if_seq_no": version.seq_no, "if_primary_term": version.primary_term}
        return {op: meta}

    def replace(
        self, scope: Scope, stored: Stored, doc: dict[str, Any], entry: dict[str, Any],
        refresh: bool,
    ) -> None:  # fmt: skip
        """Write a changed memory over the version that was read (conflict → retry above)."""
        action = self._action("index", scope, stored.kind, stored.memory_id, stored)
        self._bulk_one([action, doc], entry, refresh, scope, stored.memory_id)

    def patch(
        self, scope: Scope, stored: Stored, doc: dict[str, Any], entry: dict[str, Any],
        refresh: bool,
    ) -> None:  # fmt: skip
        """A partial update of the version that was read: fields not in ``doc`` (the vector,
        recall counts) stay as they are; fields set to None are cleared. Each given field
        replaces its old value whole: a partial ``doc`` would merge objects key by key, so
        ``metadata`` could never lose a key (and its derived ``meta`` entries would disagree)."""
        if not self.engine.painless:  # the same write, computed here (see _patched)
            full = self._patched(scope, stored, doc)
            action = self._action("index", scope, stored.kind, stored.memory_id, stored)
            self._bulk_one([action, full], entry, refresh, scope, stored.memory_id)
            return
        action = self._action("update", scope, stored.kind, stored.memory_id, stored)
        script = {"source": PATCH_SCRIPT, "lang": "painless", "params": {"doc": doc}}
        self._bulk_one([action, {"script": script}], entry, refresh, scope, stored.memory_id)

    def _patched(self, scope: Scope, stored: Stored, doc: dict[str, Any]) -> dict[str, Any]:
        """PATCH_SCRIPT without a script: the whole stored document (vector included, read in
        real time) with ``doc``'s fields replaced whole and its None fields removed. It is
        written onto the version that was read (if_seq_no), so a change in between is a
        conflict, as the scripted update's."""
        index = self.alias(scope, stored.kind)
        got = self.engine.get_many([(index, scope.doc_id(stored.memory_id), scope.routing)])[0]
        current = dict((got or {}).get("_source") or stored.source)
        current.update(doc)
        return {k: v for k, v in current.items() if v is not None}

    def create(
        self, scope: Scope, kind: MemoryKind, memory_id: str, doc: dict[str, Any],
        entry: dict[str, Any], refresh: bool,
    ) -> None:  # fmt: skip
        action = self._action("create", scope, kind, memory_id)
        self._bulk_one([action, doc], entry, refresh, scope, memory_id)

    def delete(self, scope: Scope, stored: Stored, actor: str, refresh: bool) -> None:
        action = self._action("delete", scope, stored.kind, stored.memory_id, stored)
        entry = history.entry(
            scope, stored.memory_id, stored.kind, "DELETE", actor, old=stored.source
        )
        self._bulk_one([action], entry, refresh, scope, stored.memory_id)

    def _bulk_one(
        self, lines: list[dict[str, Any]], entry: dict[str, Any], refresh: bool, scope: Scope,
        memory_id: str,
    ) -> None:  # fmt: skip
        """One memory's write, then its history entry. A failed item says why in the caller's
        terms: a conflict (retry), the memory gone meanwhile (NotFound: deleted by another
        writer between our read and this write), the index gone (run init), or a refusal —
        never with the engine's internal id, which the caller never sees. The two writes go
        together: an async caller cancelled meanwhile is cancelled after both (``shielded``)."""
        with shielded():
            self._write_one(lines, entry, refresh, scope, memory_id)

    def _write_one(
        self, lines: list[dict[str, Any]], entry: dict[str, Any], refresh: bool, scope: Scope,
        memory_id: str,
    ) -> None:  # fmt: skip
        meta = next(iter(lines[0].values()))
        try:
            with activity("writing a memory"):
                resp = self.engine.bulk(lines, refresh="wait_for" if refresh else False)
        finally:  # also when it failed: the engine may still apply it
            if not refresh:
                fresh.written(self.engine, meta["_index"], meta.get("routing"))
        item = next(iter(resp["items"][0].values()))
        status = item.get("status", 0)
        error = item.get("error") or {}
        if status == 409:
            raise ConcurrentChange(f"memory {memory_id!r} changed meanwhile")
        if status == 404 and "index_not_found" in str(error.get("type", "")):
            what = f"{error.get('type')}: {error.get('reason', 'no such index')}"
            raise EngineUnavailable(with_remedy(f"writing a memory: {what}"))
        if status == 404:
            raise NotFound(f"no memory {memory_id!r} among the {scope.describe()}")
        if status >= 300:
            why = type_and_reason(error) if error else f"status {status}"
            why = why.replace(str(item.get("_id", "")), repr(memory_id)) if item.get("_id") else why
            if is_refusal(status):
                raise EngineRefused(f"the engine refused memory {memory_id!r}: {why}")
            raise EngineUnavailable(with_remedy(f"writing memory {memory_id!r}: {why}"))
        self.record_history([entry], f"recording history (memory {memory_id!r} itself was written)")

    def record_history(self, entries: list[dict[str, Any]], doing: str) -> None:
        """History entries, all or an error: a dropped entry is a change with no record."""
        with activity(doing):
            resp = history.write(self.engine, entries)
        check_bulk(resp, doing)
        consistency.note_recorded(self.engine, entries)

    def ensure_recorded(self, scope: Scope, stored: Stored, actor: str) -> bool:
        """A retry's check (``store.consistency``): the stored version is the memory's newest
        history entry, else it is recorded now. True when an entry was missing."""
        return consistency.ensure_recorded(self.engine, scope, stored.kind, stored.source, actor)

    def complete_deletion(self, scope: Scope, memory_id: str, actor: str) -> Memory | None:
        """A retried delete of a memory that is gone: its DELETE entry, recorded now if its
        history lacks it (the earlier try deleted it, and its entry failed); the memory as it
        was deleted, or None when the deletion is recorded already (or never happened)."""
        from kemem_es.store.documents import to_memory

        last = consistency.unrecorded_deletion(self.engine, scope, checked_id(memory_id, "id"))
        if last is None:
            return None
        entry = consistency.recovered_deletion(scope, last, actor)
        consistency.write(self.engine, [entry], f"recording the deletion of memory {memory_id!r}")
        kind: MemoryKind = "entities" if last.get("kind") == "entities" else "events"
        return to_memory(last.get("new") or {"id": memory_id}, kind)
