"""Facts that change (docs/facts.md): a new fact of a subject's slot supersedes the old one,
which is kept and marked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kemem_es.errors import NotFound
from kemem_es.memory.service.base import DEDUP_CHUNK, ServiceBase, retried
from kemem_es.memory.supersede import plan, time_of
from kemem_es.models import MemoryKind
from kemem_es.store import history
from kemem_es.store.bulk import marks
from kemem_es.store.crud import Stored
from kemem_es.store.documents import facts_of_record, utc_now
from kemem_es.store.layout import ID_FIELD, SUPERSEDED_AT, SUPERSEDED_BY
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked


class Supersession(ServiceBase):
    def _finish_superseding(
        self, c: Checked, kind: MemoryKind, stored: Stored, actor: str,
        supersede: bool | None, said_now: bool,
    ) -> list[str]:  # fmt: skip
        """A retry of an add that stopped after its memory was written (its history refused)
        never marked the older facts of its slot: marked now. Nothing when it is itself
        superseded or carries no slot."""
        rules = self.supersede if supersede is None else supersede and self.supersede
        facts = facts_of_record(c.record, said_now)
        if not rules or not facts.slots or stored.source.get(SUPERSEDED_BY):
            return []
        older, _ = self._superseding(c, kind, facts, stored.source)
        return [m for m in older if self.mark_superseded(c.scope, kind, m, c.memory_id, actor)]

    def _superseding(
        self, c: Checked, kind: MemoryKind, facts: Any, doc: dict[str, Any]
    ) -> tuple[list[str], str | None]:
        """(current memories of the same subject and slot that the new one supersedes, or a
        newer one that supersedes it), from the engine and this process's recent writes."""
        (found,) = self.facts.slot_holders(
            [(c.scope, kind, facts.subject, facts.stored, c.memory_id)]
        )
        recent = self.recent.slot_holders(c.scope, kind, facts.subject, facts.stored)
        holders = [h for h in [*recent, *found] if h.get("id") != c.memory_id]
        return plan(facts, c.record.description, time_of(doc), holders)

    def judge_candidates(self, scope: Scope) -> list[dict[str, Any]]:
        """The scope's current entity memories an LLM judge is shown, newest first."""
        return self.facts.current_entities(scope)

    def mark_superseded(
        self, scope: Scope, kind: MemoryKind, memory_id: str, by: str, actor: str = "api",
        reason: str = "superseded",
    ) -> bool:  # fmt: skip
        """Mark one memory superseded by ``by`` (kept, recorded in history, no longer recalled
        as current). False when it is gone or superseded already."""

        def attempt() -> bool:
            try:
                stored = self.crud.fetch(scope, memory_id, kind)
            except NotFound:
                self.recent.forget(scope, kind, memory_id)
                return False
            if stored.source.get(SUPERSEDED_BY):
                return False
            marking = superseded_change(scope, kind, memory_id, stored, by, actor, reason)
            change, after, entry = marking
            self.crud.patch(scope, stored, change, entry, False)
            self.recent.remember(scope, kind, memory_id, after, None)
            return True

        with self._one_memory(scope, memory_id):
            return retried(attempt, memory_id)

    def supersede_imported(self, items: list[Checked], kind: MemoryKind, actor: str) -> int:
        """After an import: each written memory with a slot supersedes the older current
        memories of its subject and slot (or is superseded by a newer one). Returns how many
        memories were marked.

        Per chunk of records: one search for the holders of their slots, one read of the
        memories that may be marked (``store.bulk.marks``), one bulk of marks and one of their
        history entries. The decisions are those of marking one memory after another, oldest
        record first: a memory is marked once (the first record that supersedes it), a memory
        that is gone or superseded already is not marked (as ``mark_superseded`` answers
        False), and a record superseded meanwhile supersedes nothing. A mark the bulk could
        not apply (the memory changed or went since it was read) takes the one-at-a-time
        path, which reads it again in real time."""
        todo = []
        for c in items:
            facts = facts_of_record(c.record)
            if facts.slots:
                todo.append((c, facts))
        if not todo or not self.supersede:
            return 0
        for scope in {c.scope.db: c.scope for c, _ in todo}.values():
            self.crud.refresh(scope, {kind})
        marked: set[tuple[Scope, str]] = set()
        n = 0
        todo.sort(key=lambda cf: time_of(cf[0].record.model_dump()))
        for lo in range(0, len(todo), DEDUP_CHUNK):
            chunk = todo[lo : lo + DEDUP_CHUNK]
            found = self.facts.slot_holders(
                [(c.scope, kind, f.subject, f.stored, c.memory_id) for c, f in chunk],
            )
            n += self._mark_chunk(chunk, found, kind, actor, marked)
        return n

    def _mark_chunk(
        self, chunk: list[tuple[Checked, Any]], found: list[list[dict[str, Any]]],
        kind: MemoryKind, actor: str, marked: set[tuple[Scope, str]],
    ) -> int:  # fmt: skip
        """One chunk of ``supersede_imported``: the decisions in order, on the versions read
        once, then the marks written together."""
        # Whatever a record may mark: its slots' holders, and itself (a newer holder).
        keys = []
        for (c, _), holders in zip(chunk, found, strict=True):
            if holders:
                keys += [
                    (c.scope, c.memory_id),
                    *((c.scope, str(h.get(ID_FIELD))) for h in holders),
                ]
        current = marks.read_versions(self.crud.engine, kind, keys)
        todo: list[marks.Mark] = []

        def mark(scope: Scope, memory_id: str, by: str) -> None:
            """What ``mark_superseded`` does to the version read, kept for the bulk."""
            got = current.get((scope, memory_id))
            if got is None:
                self.recent.forget(scope, kind, memory_id)
                return
            stored, full = got
            if stored.source.get(SUPERSEDED_BY):
                return
            change, after, entry = superseded_change(scope, kind, memory_id, stored, by, actor)
            todo.append(marks.Mark(scope, stored, change, entry, full))
            # What the next decisions see: this memory superseded now.
            current[(scope, memory_id)] = (replace(stored, source=after), full)
            marked.add((scope, memory_id))

        for (c, facts), holders in zip(chunk, found, strict=True):
            if (c.scope, c.memory_id) in marked:
                continue
            live = [h for h in holders if (c.scope, str(h.get("id"))) not in marked]
            when = time_of(c.record.model_dump())
            older, newer = plan(facts, c.record.description, when, live)
            if newer is not None:
                mark(c.scope, c.memory_id, newer)
                continue
            for old in older:
                mark(c.scope, old, c.memory_id)
        done, again = marks.write_marks(self.crud.engine, todo)
        for m in done:
            after = {**m.stored.source, **m.change}
            self.recent.remember(m.scope, kind, m.memory_id, after, None)
        n = len(done)
        for m in again:  # read again and written (or its failure raised) one at a time
            by = str(m.change[SUPERSEDED_BY])
            if self.mark_superseded(m.scope, kind, m.memory_id, by, actor):
                n += 1
            else:
                marked.discard((m.scope, m.memory_id))
        return n


def superseded_change(
    scope: Scope, kind: MemoryKind, memory_id: str, stored: Stored, by: str, actor: str,
    reason: str = "superseded",
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:  # fmt: skip
    """Marking ``stored`` superseded by ``by``: the fields changed, the memory after, and the
    history entry that records it (one mark or a bulk of them write the same)."""
    change = {SUPERSEDED_BY: by, SUPERSEDED_AT: utc_now()}
    after = {**stored.source, **change}
    entry = history.entry(
        scope, memory_id, kind, "UPDATE", actor, stored.source, after,
        reason=reason, matched_id=by,
    )  # fmt: skip
    return change, after, entry
