"""The Memory API's verbs: add, get, get_all, update, delete, delete_all, history.

Each verb validates like the import does (one validation for every write path), works inside
one :class:`Scope`, and records what it changed in the history index.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.errors import ConcurrentChange, InvalidInput, NotFound
from kemem_es.memory.dedup import (
    Decision,
    Match,
    RecentWrites,
    closer,
    decide,
    merged_changes,
    nearest,
    new_keywords,
    normalise,
)
from kemem_es.memory.hooks import HookContext, Hooks
from kemem_es.memory.inputs import AddInput, to_record_data
from kemem_es.memory.strength import ebbinghaus_gain
from kemem_es.memory.supersede import plan, restatement, same_slot, time_of
from kemem_es.models import MAX_STRENGTH, MemoryKind, MemoryRecord
from kemem_es.runtime import KeyedLock, pause
from kemem_es.store import history
from kemem_es.store.bulk import BulkWriter
from kemem_es.store.crud import Crud, Stored, page_of
from kemem_es.store.documents import (
    LIFECYCLE_FIELDS,
    content_hash,
    embed_text,
    fact_fields,
    facts_of_record,
    to_document,
    to_memory,
    utc_now,
    vector_fields,
    with_strength_key,
)
from kemem_es.store.documents import to_record_data as stored_record_data
from kemem_es.store.facts import Facts
from kemem_es.store.layout import (
    FACT_FIELDS,
    SLOTS_FIELD,
    SUBJECT_FIELD,
    SUPERSEDED_AT,
    SUPERSEDED_BY,
)
from kemem_es.store.nearest import Neighbours
from kemem_es.store.scope import Scope, checked_id
from kemem_es.store.users import parse_instant
from kemem_es.store.validation import Checked, validate_items

RETRIES = 4
BACKOFF_S = 0.02  # before the 2nd, 3rd, 4th try: up to 20, 40, 80 ms, jittered
DEDUP_CHUNK = 256
FIXED_FIELDS = ("id", "agent_id", "user_id", "db")  # an update cannot move a memory
TIME_FIELDS = ("created_at", "updatetime")
T = TypeVar("T")


class MemoryService:
    def __init__(
        self,
        crud: Crud,
        neighbours: Neighbours,
        writer: Callable[[], BulkWriter],
        dedup_threshold: float = 0.9,
        dedup_min_overlap: float = 0.6,
        dedup_recent_s: float = 30.0,
        supersede: bool = True,
        facts: Facts | None = None,
    ) -> None:
        self._writer = writer
        self.crud = crud
        self.neighbours = neighbours
        self.facts = facts if facts is not None else Facts(crud.engine)
        self.dedup_threshold = dedup_threshold
        self.dedup_min_overlap = dedup_min_overlap
        # Dedup sees this process's writes before the engine's refresh does, and the adds of
        # one scope and kind take turns, so two near-duplicates at once do not both get added.
        self.recent = RecentWrites(dedup_recent_s)
        self._turns = KeyedLock()
        # Facts that change (docs/facts.md): a new fact of a subject's slot supersedes the old.
        self.supersede = supersede

    @cached_property
    def writer(self) -> BulkWriter:
        """Built on first write: reads, lists and deletes need no embedding model."""
        return self._writer()

    @property
    def dim(self) -> int:
        return self.writer.embedder.dim

    def validate(self, data: dict[str, Any], kind: MemoryKind, scope: Scope) -> Checked:
        """The one validation (record model, scope rule, vector size) for one record."""
        return self._validate(data, kind, scope)

    def _validate(self, data: dict[str, Any], kind: MemoryKind, scope: Scope) -> Checked:
        good, problems = validate_items([("memory", data)], kind, scope.db, self.dim)
        if problems:
            first = problems[0].removeprefix("memory: ")
            raise InvalidInput(f"invalid memory: {first}", problems, field=first.split(":", 1)[0])
        if good[0].scope != scope:  # e.g. a before_write hook that rewrote user_id
            moved = "agent_id" if good[0].scope.agent_id != scope.agent_id else "user_id"
            raise InvalidInput(
                f"{moved}: the record was moved out of the call's scope ({scope.agent_id!r}, "
                f"{scope.user_id!r}); a memory is written where it was asked to be",
                field=moved,
            )
        return good[0]

    # -- add ------------------------------------------------------------------------------
    def prepare(
        self,
        data: AddInput,
        scope: Scope,
        kind: MemoryKind = "events",
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Record data for ``add``'s input, in the call's scope (before hooks and validation);
        ``names`` label the speakers of chat messages."""
        now = datetime.now().astimezone()
        return to_record_data(data, kind, scope, session_id, metadata, now, names)

    def add_records(
        self,
        records: list[dict[str, Any]],
        scope: Scope,
        kind: MemoryKind = "events",
        refresh: bool = False,
        actor: str = "api",
        dedup: bool = True,
        said_now: bool = False,
        supersede: bool | None = None,
    ) -> list[AddResult]:
        """Validate every record first (one bad record: nothing written), then write each as
        ADD / UPDATE / NOOP (see ``_add_one``). ``supersede=False``: no slot rule (an LLM
        judged this fact already)."""
        checked = [self._validate(r, kind, scope) for r in records]
        results = []
        for c in checked:
            with self._turns.hold((c.scope, kind)):
                add = functools.partial(
                    self._add_one, c, kind, refresh, actor, dedup, said_now, supersede
                )
                results.append(retried(add, c.memory_id))
        return results

    def _add_one(
        self, c: Checked, kind: MemoryKind, refresh: bool, actor: str, dedup: bool,
        said_now: bool, supersede: bool | None = None,
    ) -> AddResult:  # fmt: skip
        """The same id: NOOP when unchanged (for text said again: the same words, session and
        metadata, whatever the time), else UPDATE. A new id: with ``dedup``, the nearest memory
        decides (dedup.decide); else ADD."""
        h = content_hash(c.record, self.writer.embedder.name)
        try:
            stored: Stored | None = self.crud.fetch(c.scope, c.memory_id, kind)
        except NotFound:
            stored = None
        if stored and (self._hash(stored) == h or (said_now and _said_again(c, stored))):
            # A retry of an add whose history entry failed: recorded now (store.consistency).
            self.crud.ensure_recorded(c.scope, stored, actor)
            self._noop(c.scope, stored.memory_id, kind, actor, reason="unchanged")
            return AddResult(id=c.memory_id, event="NOOP", memory=to_memory(stored.source, kind))
        if stored and said_now:
            # The words that first made this memory, said again after it changed (a dedup merge
            # or an update): the newer statement folds in as a dedup UPDATE would; created_at,
            # metadata and session stay unless the call brings new ones.
            again = Match(stored.memory_id, 1.0, stored.source)
            return self.update(
                stored.memory_id, merged_changes(c.record, again), c.scope, kind, refresh,
                actor, reason="said again",
            )  # fmt: skip
        vector = self.writer.vectors([c.record])[0]
        facts = facts_of_record(c.record, said_now)
        rules = self.supersede if supersede is None else supersede and self.supersede
        if stored is None and dedup:
            (found,) = self._nearest([(c.scope, c.record, vector)], kind)
            match = closer(found, self.recent.nearest(c.scope, kind, c.record, vector))
            decision = self._decide(c, match, kind)
            if (
                decision == "UPDATE"
                and match is not None
                and rules
                and same_slot(facts, match.source)
                and not restatement(c.record.description, match.source.get("description", ""))
            ):  # a changed value of the same slot: the old one is kept, superseded (below)
                decision = "ADD"
            if match is not None and decision == "NOOP":
                # Before the new fact is dropped as a copy, make sure its match still exists:
                # the engine's search shows a deleted memory until its next refresh, and a
                # recent write may have been deleted since (a real-time get by id).
                match, decision = self._existing_match(c, kind, match, found)
            if match is not None and decision == "NOOP":
                self._noop(c.scope, match.memory_id, kind, actor, "duplicate", match.similarity)
                return AddResult(
                    id=match.memory_id,
                    event="NOOP",
                    memory=to_memory(match.source, kind),
                    matched_id=match.memory_id,
                    similarity=round(match.similarity, 4),
                )
            if match is not None and decision == "UPDATE":
                changes = {**merged_changes(c.record, match), "vector": vector}
                try:
                    res = self.update(
                        match.memory_id, changes, c.scope, kind, refresh, actor,
                        reason="dedup", similarity=match.similarity,
                    )  # fmt: skip
                except NotFound:  # deleted since it was found (clean-up, another process)
                    self.recent.forget(c.scope, kind, match.memory_id)
                else:
                    return res.model_copy(
                        update={
                            "matched_id": match.memory_id,
                            "similarity": round(match.similarity, 4),
                        }
                    )
        tok = self.writer.tokenizers([(c.scope, c.record)])[c.scope]
        doc = to_document(c.record, c.scope, tok, c.memory_id)
        doc["content_hash"] = h
        doc.update(vector_fields(kind, vector))
        if stored is None:
            doc.update(fact_fields(facts))
            older: list[str] = []
            if rules and facts.slots:
                older, newer = self._superseding(c, kind, facts, doc)
                if newer is not None:
                    doc.update({SUPERSEDED_BY: newer, SUPERSEDED_AT: utc_now()})
            entry = history.entry(c.scope, c.memory_id, kind, "ADD", actor, new=doc)
            self.crud.create(c.scope, kind, c.memory_id, doc, entry, refresh)
            self.recent.remember(c.scope, kind, c.memory_id, doc, vector)
            done = [m for m in older if self.mark_superseded(c.scope, kind, m, c.memory_id, actor)]
            return AddResult(
                id=c.memory_id, event="ADD", memory=to_memory(doc, kind), superseded=done
            )
        doc.update({f: stored.source[f] for f in LIFECYCLE_FIELDS if f in stored.source})
        if "strength" not in c.record.model_fields_set:
            doc["strength"] = stored.source.get("strength", 0.0)
        with_strength_key(doc)
        entry = history.entry(c.scope, c.memory_id, kind, "UPDATE", actor, stored.source, doc)
        self.crud.replace(c.scope, stored, doc, entry, refresh)
        self.recent.remember(c.scope, kind, c.memory_id, doc, vector)
        return AddResult(
            id=c.memory_id,
            event="UPDATE",
            memory=to_memory(doc, kind),
            previous=stored.source.get("description"),
        )

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
            change = {SUPERSEDED_BY: by, SUPERSEDED_AT: utc_now()}
            after = {**stored.source, **change}
            entry = history.entry(
                scope, memory_id, kind, "UPDATE", actor, stored.source, after,
                reason=reason, matched_id=by,
            )  # fmt: skip
            self.crud.patch(scope, stored, change, entry, False)
            self.recent.remember(scope, kind, memory_id, after, None)
            return True

        with self._one_memory(scope, memory_id):
            return retried(attempt, memory_id)

    def supersede_imported(self, items: list[Checked], kind: MemoryKind, actor: str) -> int:
        """After an import: each written memory with a slot supersedes the older current
        memories of its subject and slot (or is superseded by a newer one). Returns how many
        memories were marked."""
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
            for (c, facts), holders in zip(chunk, found, strict=True):
                if (c.scope, c.memory_id) in marked:
                    continue
                live = [h for h in holders if (c.scope, str(h.get("id"))) not in marked]
                when = time_of(c.record.model_dump())
                older, newer = plan(facts, c.record.description, when, live)
                if newer is not None:
                    if self.mark_superseded(c.scope, kind, c.memory_id, newer, actor):
                        marked.add((c.scope, c.memory_id))
                        n += 1
                    continue
                for m in older:
                    if self.mark_superseded(c.scope, kind, m, c.memory_id, actor):
                        marked.add((c.scope, m))
                        n += 1
        return n

    def _existing_match(
        self, c: Checked, kind: MemoryKind, match: Match, found: Match | None
    ) -> tuple[Match | None, Decision]:
        """The NOOP's match, read by id (real time): the engine's search shows a deleted memory
        until its next refresh, and a recent write may have been deleted since. When it is
        gone, the engine's own hit is the next candidate, unless it is that same memory (then
        there is none, and the fact is added)."""
        candidates = [match] + [f for f in (found,) if f and f.memory_id != match.memory_id]
        for cand in candidates:
            decision = self._decide(c, cand, kind)
            if decision != "NOOP":
                return cand, decision
            try:
                self.crud.fetch(c.scope, cand.memory_id, kind)
            except NotFound:
                self.recent.forget(c.scope, kind, cand.memory_id)
                continue
            return cand, decision
        return None, self._decide(c, None, kind)

    def _nearest(
        self, items: list[tuple[Scope, MemoryRecord, list[float]]], kind: MemoryKind
    ) -> list[Match | None]:
        """``dedup.nearest`` with each scope's tokenizer for entities, whose names it compares
        as the tokenizer does."""
        if kind != "entities" or not items:
            return nearest(self.neighbours, items, kind)
        toks = self.writer.tokenizers([(scope, record) for scope, record, _ in items])
        return nearest(self.neighbours, items, kind, toks)

    def _decide(self, c: Checked, match: Match | None, kind: MemoryKind) -> Decision:
        """Events must also share their words (``dedup.decide``); entities are compared with the
        same entity's attributes of the same kind only, where the cosine suffices. The same
        words with keywords the memory lacks are an UPDATE that adds them."""
        overlap = self.dedup_min_overlap if kind == "events" else 0.0
        decision = decide(c.record.description, match, self.dedup_threshold, overlap)
        if decision == "NOOP" and match is not None and new_keywords(c.record, match.source):
            return "UPDATE"
        return decision

    def dedup_imports(
        self, items: list[Checked], kind: MemoryKind, actor: str = "import"
    ) -> tuple[list[Checked], int, int]:
        """Dedup for a bulk import: records without an id of their own whose id is new are
        compared with their nearest memory; duplicates are dropped (NOOP), near-duplicates
        folded into the existing memory (UPDATE). Returns (what is left to write, merged,
        duplicates).

        A record with its own id is never folded (as in ``add``): it is stored under that id.
        Re-running the same file changes nothing: a record whose text its match has or ever had
        (its history) is a duplicate, not a new UPDATE that flips the text back, and duplicates
        leave no history entry (the memory does not change; like an import's unchanged
        records)."""
        left: list[Checked] = []
        merged = dups = 0
        for lo in range(0, len(items), DEDUP_CHUNK):
            chunk = items[lo : lo + DEDUP_CHUNK]
            existing: set[str] = set()
            for db in {c.scope.db for c in chunk}:
                refs = [c.ref for c in chunk if c.scope.db == db]
                existing |= self.crud.existing_ids(db, kind, refs)
            new = [c for c in chunk if c.doc_id not in existing and not c.record.id]
            left += [c for c in chunk if c.doc_id in existing or c.record.id]
            vectors = self.writer.vectors([c.record for c in new])
            triples = [(c.scope, c.record, v) for c, v in zip(new, vectors, strict=True)]
            matches = self._nearest(triples, kind)
            decisions = [self._decide(c, m, kind) for c, m in zip(new, matches, strict=True)]
            folds = {
                c.scope.doc_id(m.memory_id)
                for c, m, d in zip(new, matches, decisions, strict=True)
                if m is not None and d == "UPDATE"
            }
            had = self._texts_of(folds)
            for c, vec, match, decision in zip(new, vectors, matches, decisions, strict=True):
                if match is None or decision == "ADD":
                    left.append(replace(c, embedded=vec))
                elif decision == "NOOP" or _had_it(c, match, had):
                    dups += 1
                else:
                    changes = {**merged_changes(c.record, match), "vector": vec}
                    self.update(
                        match.memory_id, changes, c.scope, kind, False, actor,
                        reason="dedup", similarity=match.similarity,
                    )  # fmt: skip
                    merged += 1
        return left, merged, dups

    def _texts_of(self, uids: set[str]) -> dict[str, set[str]]:
        """Every text (normalised) the memories ``uids`` have had, from their history."""
        if not uids:
            return {}
        out: dict[str, set[str]] = {}
        for src in self.crud.texts_ever(uids):
            texts = (src.get(f) for f in ("old_text", "new_text"))
            out.setdefault(src["uid"], set()).update(normalise(t) for t in texts if t)
        return out

    def record_noop(self, scope: Scope, memory_id: str, kind: MemoryKind, actor: str) -> None:
        """A fact judged already known (an LLM judge's NOOP): recorded in history."""
        self._noop(scope, memory_id, kind, actor, "judge")

    def _noop(
        self, scope: Scope, memory_id: str, kind: MemoryKind, actor: str, reason: str,
        similarity: float | None = None,
    ) -> None:  # fmt: skip
        entry = history.entry(
            scope, memory_id, kind, "NOOP", actor, reason=reason,
            similarity=None if similarity is None else round(similarity, 4),
            matched_id=memory_id if similarity is not None else None,
        )  # fmt: skip
        self.crud.record_history([entry], "recording history")

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

    def _one_memory(self, scope: Scope, memory_id: str) -> AbstractContextManager[None]:
        """Updates and deletes of one memory take turns within this process: at once they
        would only conflict on the engine and retry (other processes still can: retried)."""
        # Checked first: the id is a lock key here, before any fetch would check it.
        return self._turns.hold(("memory", scope, checked_id(memory_id, "memory_id")))

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
            doc.update(vector_fields(kind, vector))
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


def retried(attempt: Callable[[], T], memory_id: str) -> T:
    """``attempt()`` (read, then write the version read) again while another writer changes
    the memory in between, after a short jittered backoff (writers that collided at once
    would collide again at once); ConcurrentChange when it kept changing."""
    for n in range(RETRIES):
        try:
            return attempt()
        except ConcurrentChange:
            if n + 1 < RETRIES:
                pause(random.uniform(0.5, 1.0) * BACKOFF_S * 2**n)
    raise ConcurrentChange(
        f"memory {memory_id!r} kept changing under us (other writers): nothing was written; "
        "try again"
    )


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


def _had_it(c: Checked, match: Match, had: dict[str, set[str]]) -> bool:
    """An import's record that its match has or once had, with no keyword it lacks: a copy."""
    texts = had.get(c.scope.doc_id(match.memory_id), set())
    return normalise(c.record.description) in texts and not new_keywords(c.record, match.source)


def _said_again(c: Checked, stored: Stored) -> bool:
    """The memory's own words, with nothing new: a session, metadata or keywords the call does
    not give are not a change (the text alone says nothing about them)."""
    src, rec = stored.source, c.record
    return (
        src.get("description") == rec.description
        and not new_keywords(rec, src)
        and (rec.session_id is None or src.get("session_id") == rec.session_id)
        and all((src.get("metadata") or {}).get(k) == v for k, v in rec.metadata.items())
    )
