"""Sentence codes for event memories written before memories had them (``kemem-es migrate``).

A memory of several sentences gets each sentence's own vector when it is written
(``BulkPrepare.sentence_codes``; read by search.best_sentence). One stored before that has
none and keeps its plain score until it is imported again or updated. This fills them in
place, for the memories whose stored vector is this model's vector of their text: the lift
compares a sentence's cosine with the whole memory's, so a memory whose vector its caller
supplied (another model, or the same one run elsewhere) must stay without, as a write leaves
it. Nothing stored says who made a vector, so it is recomputed and compared; a memory the
comparison rules out is counted, not changed.

Each memory is updated only if it is still the version read (``if_seq_no``): one edited in
between was given its codes by that edit, one deleted needs none. No history entry: what the
memory says does not change (as for ``migrate.fill_vector_codes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kemem_es.engine.client import Engine, hit_ref
from kemem_es.engine.errors import check_bulk
from kemem_es.errors import activity
from kemem_es.store import vector_code
from kemem_es.store.bulk.base import TextEmbedder
from kemem_es.store.documents import MEMORY_SENTENCES
from kemem_es.store.layout import SENTENCE_CODES_FIELD, UID_FIELD, VECTOR_FIELD
from kemem_es.store.migrate import event_aliases, pages
from kemem_es.text.dialogue import memory_sentences

PAGE = 200
# The stored vector is this model's when recomputing its text gives it back: a write rounds
# to six decimals (cosine ≥ 1 − 1e-9); another model, or fp32 against int8 (~0.99), falls short.
SAME_VECTOR = 0.9999
TEXT_FIELD = "description"  # what an event memory's vector embeds (documents.embed_text)

# Event memories with a vector but no sentence codes: single sentences (which never get any),
# supplied vectors and memories written before sentence codes existed.
WITHOUT_SENTENCES = {
    "bool": {
        "filter": [{"exists": {"field": VECTOR_FIELD}}],
        "must_not": [{"exists": {"field": SENTENCE_CODES_FIELD}}],
    }
}


@dataclass
class SentenceReport:
    alias: str
    filled: int = 0  # memories given their sentences' codes
    not_ours: int = 0  # several sentences, but a vector this model does not give their text
    changed: int = 0  # edited (the edit wrote the codes) or deleted while this ran


def fill_sentence_codes(engine: Engine, embedder: TextEmbedder) -> list[SentenceReport]:
    """Give every multi-sentence event memory whose vector this model wrote its sentences'
    codes; one pass over the memories without codes, in ``uid`` order (``migrate.pages``). Does
    nothing when writes do not embed sentences (``sentence_vectors`` off). Re-running finds
    nothing new to fill."""
    if not engine.settings.sentence_vectors:
        return []
    reports = []
    with activity("filling sentence codes"):
        for alias in event_aliases(engine, embedder.dim):
            rep = SentenceReport(alias)
            # the texts only: vectors are fetched for the memories of several sentences
            found = pages(engine, alias, UID_FIELD, PAGE, query=WITHOUT_SENTENCES,
                          _source=[TEXT_FIELD], seq_no_primary_term=True)  # fmt: skip
            for hits in found:
                _fill_page(engine, embedder, alias, hits, rep)
            if rep.filled:
                engine.refresh(alias)
            if rep.filled or rep.not_ours or rep.changed:
                reports.append(rep)
    return reports


def _fill_page(
    engine: Engine,
    embedder: TextEmbedder,
    alias: str,
    hits: Sequence[dict[str, Any]],
    rep: SentenceReport,
) -> None:
    several = [
        (h, parts)
        for h in hits
        if len(parts := memory_sentences(h["_source"].get(TEXT_FIELD) or "", MEMORY_SENTENCES)) > 1
    ]
    if not several:
        return
    # most memories are one sentence: only these few carry their vectors back
    ids = [h["_id"] for h, _ in several]
    body = {"size": len(ids), "query": {"ids": {"values": ids}}, "_source": [VECTOR_FIELD]}
    found = engine.search(alias, body)["hits"]["hits"]
    vectors = {h["_id"]: h["_source"].get(VECTOR_FIELD) for h in found}
    wholes = embedder.embed([h["_source"][TEXT_FIELD] for h, _ in several])
    ours = []
    for (h, parts), whole in zip(several, wholes, strict=True):
        stored = np.asarray(vectors.get(h["_id"]) or [], dtype=np.float32)
        if stored.shape == whole.shape and _cosine(stored, whole) >= SAME_VECTOR:
            ours.append((h, parts))
        else:
            rep.not_ours += 1
    if not ours:
        return
    vecs = embedder.embed([p for _, parts in ours for p in parts])
    lines: list[dict[str, Any]] = []
    at = 0
    for h, parts in ours:
        code = vector_code.encode_many(vecs[at : at + len(parts)])
        at += len(parts)
        lines += [{"update": hit_ref(h, versioned=True)}, {"doc": {SENTENCE_CODES_FIELD: code}}]
    items = engine.bulk(lines)["items"]
    # deleted, or edited since it was read (the edit wrote its codes): nothing to fill
    changed = [i for i in items if i["update"].get("status") in (404, 409)]
    rest = [i for i in items if i["update"].get("status") not in (404, 409)]
    check_bulk({"items": rest}, f"filling sentence codes in {alias}")
    rep.changed += len(changed)
    rep.filled += len(rest)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0
