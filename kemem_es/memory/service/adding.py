"""``add``'s path: one record at a time, in its scope's turn, as ADD, UPDATE or NOOP (by id,
by its nearest memory, by the slot rule)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kemem_es.contract.memory import AddResult
from kemem_es.errors import NotFound
from kemem_es.memory.dedup import Match, closer, merged_changes, new_keywords
from kemem_es.memory.inputs import AddInput, to_record_data
from kemem_es.memory.service.base import retried
from kemem_es.memory.service.editing import Editing
from kemem_es.memory.service.matching import Matching
from kemem_es.memory.service.supersession import Supersession
from kemem_es.memory.supersede import restatement, same_slot
from kemem_es.models import MemoryKind
from kemem_es.store import history
from kemem_es.store.crud import Stored
from kemem_es.store.documents import (
    LIFECYCLE_FIELDS,
    content_hash,
    fact_fields,
    facts_of_record,
    to_document,
    to_memory,
    utc_now,
    vector_fields,
    with_strength_key,
)
from kemem_es.store.layout import SUPERSEDED_AT, SUPERSEDED_BY
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked
from kemem_es.text.facts import Facts


class Adding(Editing, Matching, Supersession):
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
            done = self._finish_superseding(c, kind, stored, actor, supersede, said_now)
            return AddResult(
                id=c.memory_id, event="NOOP", memory=to_memory(stored.source, kind), superseded=done
            )
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
            folded = self._dedup_one(c, kind, refresh, actor, vector, facts, rules)
            if folded is not None:
                return folded
        tok = self.writer.tokenizers([(c.scope, c.record)])[c.scope]
        doc = to_document(c.record, c.scope, tok, c.memory_id)
        doc["content_hash"] = h
        doc.update(vector_fields(kind, vector, self.writer.sentence_codes(kind, [c.record])[0]))
        if stored is None:
            return self._add_new(c, kind, refresh, actor, doc, vector, facts, rules)
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

    def _dedup_one(
        self, c: Checked, kind: MemoryKind, refresh: bool, actor: str, vector: list[float],
        facts: Facts, rules: bool,
    ) -> AddResult | None:  # fmt: skip
        """A new id's nearest memory decides: a NOOP (a copy) or an UPDATE that folds the fact
        into it; None: the fact is added (no match, a changed slot value, a match gone)."""
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
        return None

    def _add_new(
        self, c: Checked, kind: MemoryKind, refresh: bool, actor: str, doc: dict[str, Any],
        vector: list[float], facts: Facts, rules: bool,
    ) -> AddResult:  # fmt: skip
        """ADD: the new memory written with its fact fields; with the slot rule, the current
        memories of its slot it supersedes are marked (or it is marked, when a newer one holds
        the slot)."""
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
        return AddResult(id=c.memory_id, event="ADD", memory=to_memory(doc, kind), superseded=done)


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
