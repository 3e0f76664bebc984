"""Dedup for a bulk import: duplicates dropped, near-duplicates folded into their memory."""

from __future__ import annotations

from dataclasses import replace

from kemem_es.memory.dedup import Match, merged_changes, new_keywords, normalise
from kemem_es.memory.service.base import DEDUP_CHUNK
from kemem_es.memory.service.editing import Editing
from kemem_es.memory.service.matching import Matching
from kemem_es.models import MemoryKind
from kemem_es.store.validation import Checked


class Importing(Editing, Matching):
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


def _had_it(c: Checked, match: Match, had: dict[str, set[str]]) -> bool:
    """An import's record that its match has or once had, with no keyword it lacks: a copy."""
    texts = had.get(c.scope.doc_id(match.memory_id), set())
    return normalise(c.record.description) in texts and not new_keywords(c.record, match.source)
