"""Reading and changing memories by id or scope: get, get_all, history, update, delete,
delete_all, count."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.errors import InvalidInput, NotFound
from kemem_es.memory.hooks import HookContext, Hooks
from kemem_es.memory.service.base import ServiceBase, retried
from kemem_es.memory.strength import ebbinghaus_gain
from kemem_es.models import MAX_STRENGTH, MemoryKind, MemoryRecord
from kemem_es.store import history
from kemem_es.store.crud import Stored, page_of
from kemem_es.store.documents import (
    LIFECYCLE_FIELDS,
    content_hash,
    embed_text,
    fact_fields,
    facts_of_record,
    to_document,
    to_memory,
    vector_fields,
    with_strength_key,
)
from kemem_es.store.documents import to_record_data as stored_record_data
from kemem_es.store.layout import FACT_FIELDS, SLOTS_FIELD, SUBJECT_FIELD
from kemem_es.store.scope import Scope
from kemem_es.store.users import parse_instant

FIXED_FIELDS = ("id", "agent_id", "user_id", "db")  # an update cannot move a memory
TIME_FIELDS = ("created_at", "updatetime")


class Editing(ServiceBase):
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

    def history(
        self, memory_id: str, scope: Scope, limit: int = history.LIMIT
    ) -> list[HistoryEntry]:
        return self.crud.history(scope, memory_id, limit)

    # -- change ---------------------------------------------------------------------------
    def update(
        self,
        memory_id: str,
        data: str | Mapping[str, Any],
        scope: Scope,
        kind: MemoryKind | None = None,
        refresh: bool = False,
        actor: str = "api",
        reason: str | None = None,
        similarity: float | None = None,
        hooks: Hooks | None = None,
    ) -> AddResult:
        """A partial update: only the given fields change; recall counts and created_at
        survive; updatetime becomes now unless given; strength grows by the Ebbinghaus rule
        (the time since the last write) unless given. ``hooks``: the caller's before_write
        hooks, run on the whole new version (a dedup merge inside ``add`` passes none: its
        record was hooked already)."""
        if isinstance(data, str):
            changes: dict[str, Any] = {"description": data}
        elif isinstance(data, Mapping):
            changes = dict(data)
        else:
            raise InvalidInput(
                f"data: the new text or a mapping of fields, not a {type(data).__name__}",
                field="data",
            )
        if not changes:
            raise InvalidInput("data: nothing to update", field="data")
        for name in FIXED_FIELDS:
            if name in changes:
                raise InvalidInput(
                    f"{name}: a memory's id and scope cannot change (add it anew instead)",
                    field=name,
                )
        for name in TIME_FIELDS:  # None clears a field; a memory's times cannot be cleared
            if name in changes and changes[name] is None:
                raise InvalidInput(f"{name}: cannot be removed (give a date)", field=name)

        def attempt() -> AddResult:
            stored = self.crud.fetch(scope, memory_id, kind)
            return self._update(stored, changes, scope, refresh, actor, reason, similarity, hooks)

        with self._one_memory(scope, memory_id):
            return retried(attempt, memory_id)

    def _update(
        self,
        stored: Stored,
        changes: dict[str, Any],
        scope: Scope,
        refresh: bool,
        actor: str,
        reason: str | None = None,
        similarity: float | None = None,
        hooks: Hooks | None = None,
    ) -> AddResult:
        kind = stored.kind
        now = datetime.now().astimezone()
        merged = stored_record_data(stored.source, kind) | changes
        merged = {k: v for k, v in merged.items() if v is not None}
        if "updatetime" not in changes:
            merged["updatetime"] = now
        if hooks and hooks.before_write:
            merged = _hooked_version(hooks, merged, scope, kind, stored.memory_id)
        c = self._validate(merged, kind, scope)
        old_record = self._validate(stored_record_data(stored.source, kind), kind, scope).record
        if not {"updatetime", "strength", "vector"} & changes.keys() and _same_record(
            c.record, old_record
        ):  # nothing would change but the time: not a change, and no strength for it
            self.crud.ensure_recorded(scope, stored, actor)  # a retried update: see _add_one
            self._noop(scope, stored.memory_id, kind, actor, reason="unchanged")
            return AddResult(
                id=stored.memory_id, event="NOOP", memory=to_memory(stored.source, kind)
            )
        tok = self.writer.tokenizers([(scope, c.record)])[scope]
        doc = to_document(c.record, scope, tok, stored.memory_id)
        doc["content_hash"] = content_hash(c.record, self.writer.embedder.name)
        vector = None
        if "vector" in changes or embed_text(c.record) != embed_text(old_record):
            vector = self.writer.vectors([c.record])[0]
            codes = self.writer.sentence_codes(kind, [c.record])[0]
            doc.update(vector_fields(kind, vector, codes))
        for f in LIFECYCLE_FIELDS:
            doc.pop(f, None)
        if "strength" not in changes:
            last = parse_instant(stored.source.get("indexed_at")) or now
            gain = ebbinghaus_gain(now - last)
            doc["strength"] = min(MAX_STRENGTH, float(stored.source.get("strength") or 0.0) + gain)
        if kind == "events" and stored.source.get(SLOTS_FIELD):
            # a statement said now: its slots follow its new text
            facts = facts_of_record(c.record, said_now=True)
            doc.update(fact_fields(facts) or {SLOTS_FIELD: None, SUBJECT_FIELD: None})
        with_strength_key(doc)
        # Fields the new version no longer has are cleared, not left behind (what replaced
        # this fact stays: an edit does not make a superseded fact current again).
        keep = (*LIFECYCLE_FIELDS, "strength", "indexed_at", *FACT_FIELDS)
        for f in stored.source:
            if f not in doc and f not in keep:
                doc[f] = None
        entry = history.entry(
            scope, stored.memory_id, kind, "UPDATE", actor, stored.source, doc, reason=reason,
            similarity=None if similarity is None else round(similarity, 4),
            matched_id=stored.memory_id if similarity is not None else None,
        )  # fmt: skip
        self.crud.patch(scope, stored, doc, entry, refresh)
        after = {k: v for k, v in {**stored.source, **doc}.items() if v is not None}
        self.recent.remember(scope, kind, stored.memory_id, after, vector)
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

        def attempt() -> Memory:
            try:
                stored = self.crud.fetch(scope, memory_id, kind)
            except NotFound:
                # A retry of a delete whose history entry failed: the deletion stands; its
                # entry is recorded now and the retry answers as the delete it completes.
                done = self.crud.complete_deletion(scope, memory_id, actor)
                if done is None:
                    raise
                return done
            self.crud.delete(scope, stored, actor, refresh)
            self.recent.forget(scope, stored.kind, stored.memory_id)
            return to_memory(stored.source, stored.kind)

        with self._one_memory(scope, memory_id):
            return retried(attempt, memory_id)

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
        n = self.crud.delete_scope(scope, filters, kind, actor, keep_text_in_history=not forget)
        self.recent.forget(scope, kind)
        return n

    def count(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
    ) -> int:
        return self.crud.count(scope, filters, kind)


def _hooked_version(
    hooks: Hooks, data: dict[str, Any], scope: Scope, kind: MemoryKind, memory_id: str
) -> dict[str, Any]:
    """An update's new version through the before_write hooks, as an add's record would go
    (a rejection raises before anything is written); a hook cannot give it another id."""
    ctx = HookContext(scope.agent_id, scope.user_id, scope.db, kind)
    (hooked,) = hooks.run_before_write([data], ctx, ["memory"])
    if hooked.get("id") != memory_id:
        raise InvalidInput(
            f"id: a before_write hook changed the id of memory {memory_id!r}; an update "
            "cannot move a memory",
            field="id",
        )
    return {k: v for k, v in hooked.items() if v is not None}


def _same_record(new: MemoryRecord, old: MemoryRecord) -> bool:
    return new.model_dump(exclude={"updatetime"}) == old.model_dump(exclude={"updatetime"})
