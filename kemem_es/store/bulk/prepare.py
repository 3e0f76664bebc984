"""Preparing bulk batches: which records are new or changed, their vectors and per-scope
tokenizers, and the history an unchanged memory's lost write never recorded."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson

from kemem_es.contract.memory import Action
from kemem_es.engine.errors import check_bulk
from kemem_es.models import MemoryKind, MemoryRecord
from kemem_es.runtime import offload
from kemem_es.store import consistency, history, vector_code
from kemem_es.store.bulk.base import EXISTING_FIELDS, Batch, BulkBase, carry_over
from kemem_es.store.bulk.report import IndexReport
from kemem_es.store.documents import (
    MEMORY_SENTENCES,
    TextTokenizer,
    content_hash,
    embed_text,
    to_document,
    vector_fields,
)
from kemem_es.store.layout import history_alias, index_alias
from kemem_es.store.names import record_names
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked
from kemem_es.text.dialogue import memory_sentences


def approx_bytes(doc: dict[str, Any]) -> int:
    """Request bytes of one document: the vector by count (12 bytes a float), the rest as JSON."""
    vec = doc.get("vector") or []
    rest = {k: v for k, v in doc.items() if k != "vector"}
    return 12 * len(vec) + len(orjson.dumps(rest)) + 64


class BulkPrepare(BulkBase):
    def _prepare(
        self, chunk: Sequence[Checked], kind: MemoryKind, report: IndexReport, actor: str
    ) -> list[Batch]:
        """Bulk batches (each under max_bytes) for the records of a chunk that are new or
        changed."""
        prefix = self.engine.settings.index_prefix
        hashes = [content_hash(c.record, self.embedder.name) for c in chunk]
        existing: dict[str, dict[str, Any]] = {}
        versions: dict[str, tuple[int, int]] = {}  # engine id → (seq_no, primary term) read
        for db in {c.scope.db for c in chunk}:
            refs = [c.ref for c in chunk if c.scope.db == db]
            alias = index_alias(prefix, db, kind)
            for doc_id, (src, seq, term) in self.engine.mget_versions(
                alias, refs, EXISTING_FIELDS
            ).items():
                existing[doc_id], versions[doc_id] = src, (seq, term)
        todo: list[tuple[Checked, str]] = []
        same: list[tuple[Checked, str]] = []
        for c, h in zip(chunk, hashes, strict=True):
            stored = existing.get(c.doc_id, {})
            if stored.get("content_hash") == h or self._strength_earned(c.record, stored):
                same.append((c, stored["content_hash"]))  # the version its history must hold
            else:
                todo.append((c, h))
        report.unchanged += len(same)
        if same:
            self._record_missing_history(same, kind, actor)
        if not todo:
            return []
        vectors = self.vectors([c.record for c, _ in todo], [c.embedded for c, _ in todo])
        sentences = self.sentence_codes(kind, [c.record for c, _ in todo])
        toks = self.tokenizers([(c.scope, c.record) for c, _ in todo])
        batches: list[Batch] = []
        cur = Batch([], {}, {})
        size = 0
        for (c, h), vec, codes in zip(todo, vectors, sentences, strict=True):
            old = existing.get(c.doc_id)
            doc = to_document(c.record, c.scope, toks[c.scope], c.memory_id)
            doc["content_hash"] = h
            doc.update(vector_fields(kind, vec, codes))
            keep_strength = "strength" not in c.record.model_fields_set
            if old:
                carry_over(doc, old, keep_strength)
            n = approx_bytes(doc)
            if cur.lines and (size + n > self.max_bytes):
                batches.append(cur)
                cur, size = Batch([], {}, {}), 0
            alias = index_alias(prefix, c.scope.db, kind)
            meta: dict[str, Any] = {"_index": alias, "_id": c.doc_id, "routing": c.scope.routing}
            if keep_strength:
                cur.keep_strength.add(c.doc_id)
            if old:  # only over the version read: a recall flushed meanwhile is not overwritten
                seq, term = versions[c.doc_id]
                meta |= {"if_seq_no": seq, "if_primary_term": term}
            # Absent when read: created only if still absent (another writer's memory of the
            # same id, stored meanwhile, is a 409 and read again, never overwritten blind).
            cur.lines += [{"index" if old else "create": meta}, doc]
            cur.labels[c.doc_id] = c.label
            cur.history[c.doc_id] = history.entry(
                c.scope, c.memory_id, kind, "UPDATE" if old else "ADD", actor, old=old, new=doc
            )
            size += n
        if cur.lines:
            batches.append(cur)
        return batches

    def _strength_earned(self, record: MemoryRecord, old: dict[str, Any]) -> bool:
        """The record sets the strength its memory has earned since a write that set none
        (an export of the store read back in): unchanged, not a strength edit."""
        if "strength" not in record.model_fields_set or "content_hash" not in old:
            return False
        if not math.isclose(record.strength, float(old.get("strength", -1)), rel_tol=1e-9):
            return False
        unset = record.model_copy(
            update={"strength": type(record).model_fields["strength"].default}
        )
        return bool(content_hash(unset, self.embedder.name) == old["content_hash"])

    def tokenizers(self, items: Sequence[tuple[Scope, MemoryRecord]]) -> dict[Scope, TextTokenizer]:
        """Each scope's tokenizer: its names (stored, and these records') kept whole in its
        texts only (``store.names``), so jieba keeps 木木 whole, not 木 木, for its user."""
        by_scope: dict[Scope, list[MemoryRecord]] = {}
        for scope, record in items:
            by_scope.setdefault(scope, []).append(record)
        out: dict[Scope, TextTokenizer] = {}
        self.names.prefetch(by_scope)
        for scope, records in by_scope.items():
            names = self.names.visible(scope) | record_names(records)
            self.names.note(scope, records)  # names already known change nothing (one object)
            out[scope] = self.tokenizer.scoped(names.words)
        return out

    def _record_missing_history(
        self, same: Sequence[tuple[Checked, str]], kind: MemoryKind, actor: str
    ) -> None:
        """History for unchanged memories whose last write was never recorded: a bulk that
        timed out on our side but that the engine applied later stored them without their
        entries (the history bulk follows the answer). Their newest entry other than a NOOP
        must be the stored version (its ``content_hash``); else it is recorded now, as an ADD
        (no entry, or the last one a deletion) or an UPDATE from the last recorded version,
        with reason ``recovered``. One search per chunk of unchanged records."""
        prefix = self.engine.settings.index_prefix
        history.refresh(self.engine)  # entries written a moment ago count
        body = {
            "size": len(same),
            "query": {
                "bool": {
                    "filter": [{"terms": {"uid": [c.doc_id for c, _ in same]}}],
                    "must_not": [{"term": {"event": "NOOP"}}],
                }
            },
            "collapse": {"field": "uid"},  # the newest entry of each memory
            "sort": [{"seq": "desc"}],
            "_source": ["uid", "new"],
        }
        hits = self.engine.search(history_alias(prefix), body)["hits"]["hits"]
        last = {h["_source"]["uid"]: h["_source"].get("new") for h in hits}
        entries = []
        for c, h in same:
            old = last.get(c.doc_id)
            if old is not None and old.get("content_hash") == h:
                continue
            doc = to_document(c.record, c.scope, self.tokenizer, c.memory_id)
            doc["content_hash"] = h
            event: Action = "UPDATE" if old else "ADD"
            entries.append(
                history.entry(
                    c.scope, c.memory_id, kind, event, actor, old=old, new=doc, reason="recovered"
                )
            )
        if entries:
            doing = f"recording the missing history of {len(entries)} unchanged memories"
            check_bulk(history.write(self.engine, entries), doing)
            consistency.note_recorded(self.engine, entries)

    def vectors(
        self,
        records: Sequence[MemoryRecord],
        known: Sequence[list[float] | None] | None = None,
    ) -> list[list[float]]:
        """Supplied vectors (checked during validation) and ones already computed (``known``)
        as given; the rest embedded in one go."""
        known = known or [None] * len(records)
        out: list[list[float]] = [r.vector or k or [] for r, k in zip(records, known, strict=True)]
        need = [i for i, v in enumerate(out) if not v]
        if need:
            embedded = offload(self.embedder.embed, [embed_text(records[i]) for i in need])
            for i, vec in zip(need, embedded, strict=True):
                out[i] = vec.astype(float).round(6).tolist()
        return out

    def sentence_codes(self, kind: MemoryKind, records: Sequence[MemoryRecord]) -> list[str | None]:
        """Each event's sentences embedded on their own, as one code (``store.vector_code``;
        read by search.best_sentence); None for a memory of one sentence, for entities, and
        for a memory whose vector the caller supplied (its model is the caller's: it brings no
        sentence vectors). All sentences of the call in one embedding call."""
        none: list[str | None] = [None] * len(records)
        if kind != "events" or not self.engine.settings.sentence_vectors:
            return none
        parts = [
            [] if r.vector else memory_sentences(embed_text(r), MEMORY_SENTENCES) for r in records
        ]
        flat = [p for ps in parts for p in ps]
        if not flat:
            return none
        vecs = offload(self.embedder.embed, flat)
        out: list[str | None] = []
        at = 0
        for ps in parts:
            out.append(vector_code.encode_many(vecs[at : at + len(ps)]) if ps else None)
            at += len(ps)
        return out
