"""A new fact against its nearest memory: which one it is, and what to do (ADD, UPDATE,
NOOP)."""

from __future__ import annotations

from kemem_es.errors import NotFound
from kemem_es.memory.dedup import Decision, Match, decide, nearest, new_keywords
from kemem_es.memory.service.base import ServiceBase
from kemem_es.models import MemoryKind, MemoryRecord
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked


class Matching(ServiceBase):
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
