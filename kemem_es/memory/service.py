"""The Memory API's verbs: add, get, get_all, update, delete, delete_all, history.

Each verb validates like the import does (one validation for every write path), works inside
one :class:`Scope`, and records what it changed in the history index.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.engine.client import Engine
from kemem_es.errors import InvalidInput, KememError, NotFound
from kemem_es.memory.inputs import AddInput, to_record_data
from kemem_es.models import MemoryKind
from kemem_es.store import history
from kemem_es.store.bulk import BulkWriter
from kemem_es.store.crud import ConcurrentChange, Crud, Stored, page_of
from kemem_es.store.documents import (
    LIFECYCLE_FIELDS,
    content_hash,
    embed_text,
    to_document,
    to_memory,
)
from kemem_es.store.documents import to_record_data as stored_record_data
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked, validate_items

RETRIES = 3
FIXED_FIELDS = ("id", "agent_id", "user_id", "db")  # an update cannot move a memory


class MemoryService:
    def __init__(self, engine: Engine, writer: BulkWriter) -> None:
        self.engine = engine
        self.writer = writer
        self.crud = Crud(engine)

    @property
    def dim(self) -> int:
        return self.writer.embedder.dim

    def _validate(self, data: dict[str, Any], kind: MemoryKind, scope: Scope) -> Checked:
        good, problems = validate_items([("memory", data)], kind, scope.db, self.dim)
        if problems:
            first = problems[0].removeprefix("memory: ")
            raise InvalidInput(f"invalid memory: {first}", problems, field=first.split(":", 1)[0])
        return good[0]

    # -- add ------------------------------------------------------------------------------
    def add(
        self,
        data: AddInput,
        scope: Scope,
        kind: MemoryKind = "events",
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        refresh: bool = False,
        actor: str = "api",
    ) -> list[AddResult]:
        now = datetime.now().astimezone()
        record_data = to_record_data(data, kind, scope, session_id, metadata, now)
        checked = self._validate(record_data, kind, scope)
        said_now = not isinstance(data, Mapping | BaseModel)  # text/messages: time is "now"
        for _ in range(RETRIES):
            try:
                return [self._upsert(checked, kind, refresh, actor, said_now)]
            except ConcurrentChange:
                continue
        raise KememError(f"memory {checked.memory_id!r} kept changing under us; try again")

    def _upsert(
        self, c: Checked, kind: MemoryKind, refresh: bool, actor: str, said_now: bool
    ) -> AddResult:
        """ADD a new memory, UPDATE one whose id exists with other content, NOOP otherwise
        (for text said again: the same words, session and metadata, whatever the time)."""
        h = content_hash(c.record, self.writer.embedder.name)
        try:
            stored: Stored | None = self.crud.fetch(c.scope, c.memory_id, kind)
        except NotFound:
            stored = None
        if stored and (self._hash(stored) == h or (said_now and _same_words(c, stored))):
            entry = history.entry(c.scope, c.memory_id, kind, "NOOP", actor, reason="unchanged")
            self.engine.bulk(history.bulk_lines(self.crud.prefix, [entry]))
            return AddResult(id=c.memory_id, event="NOOP", memory=to_memory(stored.source, kind))
        self.writer._learn_names([c.record])
        doc = to_document(c.record, c.scope, self.writer.tokenizer, c.memory_id)
        doc["content_hash"] = h
        doc["vector"] = self.writer.vectors([c.record])[0]
        if stored is None:
            entry = history.entry(c.scope, c.memory_id, kind, "ADD", actor, new=doc)
            self.crud.create(c.scope, kind, c.memory_id, doc, entry, refresh)
            return AddResult(id=c.memory_id, event="ADD", memory=to_memory(doc, kind))
        doc.update({f: stored.source[f] for f in LIFECYCLE_FIELDS if f in stored.source})
        if "strength" not in c.record.model_fields_set:
            doc["strength"] = stored.source.get("strength", 0.0)
        entry = history.entry(c.scope, c.memory_id, kind, "UPDATE", actor, stored.source, doc)
        self.crud.replace(c.scope, stored, doc, entry, refresh)
        return AddResult(
            id=c.memory_id,
            event="UPDATE",
            memory=to_memory(doc, kind),
            previous=stored.source.get("description"),
        )

    @staticmethod
    def _hash(stored: Stored) -> str | None:
        return stored.source.get("content_hash")

    # -- read -----------------------------------------------------------------------------
    def get(self, memory_id: str, scope: Scope, kind: MemoryKind | None = None) -> Memory:
        stored = self.crud.fetch(scope, memory_id, kind)
        return to_memory(stored.source, stored.kind)

    def get_all(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        rows, nxt = self.crud.page(scope, filters, kind, limit, cursor)
        return page_of(rows, nxt)

    def history(self, memory_id: str, scope: Scope) -> list[HistoryEntry]:
        return self.crud.history(scope, memory_id)

    # -- change ---------------------------------------------------------------------------
    def update(
        self,
        memory_id: str,
        data: str | Mapping[str, Any],
        scope: Scope,
        kind: MemoryKind | None = None,
        refresh: bool = False,
        actor: str = "api",
    ) -> AddResult:
        """A partial update: only the given fields change; strength (unless given), recall
        counts and created_at survive; updatetime becomes now unless given."""
        changes = {"description": data} if isinstance(data, str) else dict(data)
        if not changes:
            raise InvalidInput("data: nothing to update", field="data")
        for name in FIXED_FIELDS:
            if name in changes:
                raise InvalidInput(
                    f"{name}: a memory's id and scope cannot change (add it anew instead)",
                    field=name,
                )
        for _ in range(RETRIES):
            stored = self.crud.fetch(scope, memory_id, kind)
            try:
                return self._update(stored, changes, scope, refresh, actor)
            except ConcurrentChange:
                continue
        raise KememError(f"memory {memory_id!r} kept changing under us; try again")

    def _update(
        self,
        stored: Stored,
        changes: dict[str, Any],
        scope: Scope,
        refresh: bool,
        actor: str,
    ) -> AddResult:
        kind = stored.kind
        merged = stored_record_data(stored.source, kind) | changes
        if "updatetime" not in changes:
            merged["updatetime"] = datetime.now().astimezone()
        c = self._validate(merged, kind, scope)
        self.writer._learn_names([c.record])
        doc = to_document(c.record, scope, self.writer.tokenizer, stored.memory_id)
        doc["content_hash"] = content_hash(c.record, self.writer.embedder.name)
        old_record = self._validate(stored_record_data(stored.source, kind), kind, scope).record
        if "vector" in changes or embed_text(c.record) != embed_text(old_record):
            doc["vector"] = self.writer.vectors([c.record])[0]
        for f in (*LIFECYCLE_FIELDS, "indexed_at"):
            doc.pop(f, None)
        if "strength" not in changes:
            doc.pop("strength", None)
        # Fields the new version no longer has are cleared, not left behind.
        for f in stored.source:
            if f not in doc and f not in (*LIFECYCLE_FIELDS, "strength", "indexed_at"):
                doc[f] = None
        entry = history.entry(scope, stored.memory_id, kind, "UPDATE", actor, stored.source, doc)
        self.crud.patch(scope, stored, doc, entry, refresh)
        after = {**stored.source, **{k: v for k, v in doc.items() if v is not None}}
        return AddResult(
            id=stored.memory_id,
            event="UPDATE",
            memory=to_memory(after, kind),
            previous=stored.source.get("description"),
        )

    def delete(
        self,
        memory_id: str,
        scope: Scope,
        kind: MemoryKind | None = None,
        refresh: bool = False,
        actor: str = "api",
    ) -> Memory:
        for _ in range(RETRIES):
            stored = self.crud.fetch(scope, memory_id, kind)
            try:
                self.crud.delete(scope, stored, actor, refresh)
            except ConcurrentChange:
                continue
            return to_memory(stored.source, stored.kind)
        raise KememError(f"memory {memory_id!r} kept changing under us; try again")

    def delete_all(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        forget: bool = False,
        actor: str = "api",
    ) -> int:
        """Delete a scope's memories (those matching ``filters``). ``forget`` also strips the
        scope's history of its texts (the right to be forgotten)."""
        return self.crud.delete_scope(scope, filters, kind, actor, keep_text_in_history=not forget)

    def count(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
    ) -> int:
        return self.crud.count(scope, filters, kind)


def _same_words(c: Checked, stored: Stored) -> bool:
    src = stored.source
    return (
        src.get("description") == c.record.description
        and src.get("session_id") == c.record.session_id
        and (src.get("metadata") or {}) == c.record.metadata
    )
