"""Dedup on write: a new fact very similar to an existing memory updates it instead of piling up.

The engine finds the nearest memory of the same scope and kind (for entities: of the same entity
and entity kind; names compared as the tokenizer sees them: Linda is linda, and ＡＢＣ乐队 is
ABC乐队) with a filtered k-NN search; ``decide`` turns that into ADD / UPDATE / NOOP:

- the same text (ignoring spaces and punctuation) → NOOP: an exact duplicate changes nothing;
- cosine ≥ threshold (0.9) → UPDATE the existing memory: the newer text replaces the older, which
  stays in the history, and keywords are joined (an entity's one ``keyword`` as 「a、b」). A
  restatement in the same words that brings keywords the memory lacks is an UPDATE that adds
  them, not a NOOP. For entity attributes this is the merge rule:
  rather than concatenating texts (the old pipeline's habit, which piles near-duplicates like
  「小满的生日在十一月八号」+「小满是天蝎座，生日是11月8日」 into one ever-growing string), the
  latest statement of an attribute wins, nothing is lost (history), and the memory's strength
  grows by the Ebbinghaus rule because the fact came back;
- otherwise → ADD.

Events must also say it in mostly the same words (``word_overlap`` ≥ ``min_overlap``, 0.6): a
cosine alone cannot tell a restated episode from another one. m3e-small puts one user's English
session summaries 0.95 apart (every pair of 25 above 0.9, so each new session replaced the
last and 25 sessions ended as one memory) and distinct English episodes up to 0.935. Across the
dev corpora, distinct events with cosine ≥ 0.85 share at most 0.38 of their words (Chinese:
0.26), restatements 0.69–1.0. Entities keep the cosine rule: their candidate is already the same
entity and attribute kind, where a high cosine is a restatement told in other words (「生日是3月
15日」/「生日在三月十五号，双鱼座」 0.91, sharing 0.22 of their character pairs).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kemem_es.models import EntityRecord, MemoryKind, MemoryRecord, split_keywords
from kemem_es.store.documents import TextTokenizer
from kemem_es.store.layout import HEAVY_FIELDS
from kemem_es.store.nearest import Neighbours
from kemem_es.store.scope import Scope
from kemem_es.text.stopwords import default_stopwords
from kemem_es.text.tokenizer import normalize

Decision = Literal["ADD", "UPDATE", "NOOP"]
_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Match:
    """The nearest existing memory: its id, cosine similarity and stored source."""

    memory_id: str
    similarity: float
    source: dict[str, Any]


def normalise(text: str) -> str:
    return _NOISE.sub("", text).lower()


_PIECES = re.compile(r"[\u3400-\u9fff]+|[^\W_\u3400-\u9fff]+", re.UNICODE)


def pieces(text: str) -> set[str]:
    """What ``word_overlap`` compares: Han character pairs (jieba's cuts of a restated sentence
    move, its character pairs stay) and other words (latin, digits), lowercased; stop words
    left out (two English episodes share their "the", "she", "was")."""
    out: set[str] = set()
    for m in _PIECES.finditer(text.lower()):
        run = m.group()
        if len(run) > 1 and "\u3400" <= run[0] <= "\u9fff":
            out.update(run[i : i + 2] for i in range(len(run) - 1))
        else:
            out.add(run)
    return out - default_stopwords()


def word_overlap(a: str, b: str) -> float:
    """The share of the shorter text's pieces the other holds: 1.0 for a restatement that only
    adds detail (「木木喜欢吃螺蛳粉」/「木木特别喜欢吃螺蛳粉」 0.86)."""
    pa, pb = pieces(a), pieces(b)
    return len(pa & pb) / max(1, min(len(pa), len(pb)))


def decide(
    new_text: str, match: Match | None, threshold: float, min_overlap: float = 0.0
) -> Decision:
    """ADD / UPDATE / NOOP for a new text and its nearest memory (``min_overlap``: events)."""
    if match is None:
        return "ADD"
    old_text = match.source.get("description", "")
    if normalise(old_text) == normalise(new_text):
        return "NOOP"
    if match.similarity < threshold:
        return "ADD"
    return "UPDATE" if word_overlap(new_text, old_text) >= min_overlap else "ADD"


def same_entity(source: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether a stored memory is about the record's entity and entity kind: names compared
    after the tokenizer's normalisation (NFKC, lowercase), as search compares them."""
    if not isinstance(record, EntityRecord):
        return True
    name = normalize(str(source.get("entity_name") or "")).strip()
    return name == normalize(record.entity_name).strip() and source.get("kind") == record.kind


def nearest(
    neighbours: Neighbours,
    items: Sequence[tuple[Scope, MemoryRecord, Sequence[float]]],
    kind: MemoryKind,
    tokenizers: Mapping[Scope, TextTokenizer] | None = None,
) -> list[Match | None]:
    """The nearest memory for each (scope, record, vector), in one round trip. ``tokenizers``
    (each scope's): entities also match their names spelled otherwise (case, full width)."""
    out: list[Match | None] = []
    for (scope, record, _), hits in zip(
        items, neighbours.hits(items, kind, tokenizers), strict=True
    ):
        hit = next(
            (h for h in hits if scope.owns(h["_source"]) and same_entity(h["_source"], record)),
            None,
        )
        if hit is None:
            out.append(None)
            continue
        cosine = 2.0 * float(hit["_score"]) - 1.0
        out.append(Match(str(hit["_source"].get("id", "")), cosine, hit["_source"]))
    return out


ENTITY_KEYWORD_SEP = "、"  # an entity's joined keyword: 「饮食、口味」, the "a、b" events accept


def _keyword_words(record: MemoryRecord, source: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The stored memory's keywords and the record's, as lists of words for both kinds."""
    if isinstance(record, EntityRecord):
        return split_keywords(source.get("keyword") or ""), split_keywords(record.keyword)
    return list(source.get("keywords") or []), list(record.keywords)


def new_keywords(record: MemoryRecord, source: dict[str, Any]) -> list[str]:
    """The record's keywords the stored memory lacks: a merge must not drop them, so a
    restatement that brings some is an UPDATE, not a NOOP."""
    old, new = _keyword_words(record, source)
    return [k for k in dict.fromkeys(new) if k not in old]


def joined_keywords(record: MemoryRecord, source: dict[str, Any]) -> dict[str, Any]:
    """The keyword field a merge writes: the stored words, then the record's new ones."""
    old, _ = _keyword_words(record, source)
    words = old + new_keywords(record, source)
    if isinstance(record, EntityRecord):
        return {"keyword": ENTITY_KEYWORD_SEP.join(words)} if words != old else {}
    return {"keywords": words}


def merged_changes(record: MemoryRecord, match: Match) -> dict[str, Any]:
    """What an UPDATE writes onto the matched memory: the newer statement, keywords joined."""
    changes: dict[str, Any] = {"description": record.description}
    changes.update(joined_keywords(record, match.source))
    data = record.model_dump(exclude_unset=True, exclude={"id", "agent_id", "user_id"})
    if isinstance(record, EntityRecord):
        for f in ("entity_type", "updatetime"):
            if f in data:
                changes[f] = data[f]
    else:
        for f in ("deepinsight", "place", "scene", "updatetime"):
            if data.get(f):
                changes[f] = data[f]
    if record.metadata:
        changes["metadata"] = {**(match.source.get("metadata") or {}), **record.metadata}
    if record.session_id:
        changes["session_id"] = record.session_id
    return changes


@dataclass
class _Written:
    expires: float  # time.monotonic()
    vector: np.ndarray
    source: dict[str, Any]


class RecentWrites:
    """What this process wrote in the last ``ttl_s`` seconds, per (scope, kind), for dedup.

    The engine's k-NN search sees a write only after its next refresh (a second by default,
    longer on a busy or an idle shard). So two near-duplicates added back to back, or by two
    requests at once, each found no match, and both were added. ``MemoryService`` compares a new
    fact with these writes as well as with the engine's nearest memory, and the writes of one
    scope and kind take turns (a ``KeyedLock``). Another process's writes are seen after the
    refresh, as before. Bounded: past ``max_entries`` nothing more is remembered until entries
    expire (dedup then relies on the engine alone)."""

    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._by: dict[tuple[Scope, MemoryKind], dict[str, _Written]] = {}
        self._count = 0

    def remember(
        self,
        scope: Scope,
        kind: MemoryKind,
        memory_id: str,
        source: dict[str, Any],
        vector: Sequence[float] | np.ndarray | None,
    ) -> None:
        """A memory as just written. Without a vector (its text did not change) only an entry
        already held gets the new source."""
        if self.ttl_s <= 0:
            return
        now = time.monotonic()
        with self._lock:
            entries = self._entries(scope, kind, now)
            held = entries.get(memory_id)
            light = _light(source)
            if vector is None:
                if held is not None:
                    held.source = light
                return
            if held is None and self._count >= self.max_entries:
                self._prune_all(now)
                if self._count >= self.max_entries:
                    return
            if held is None:
                self._count += 1
            vec = np.asarray(vector, dtype=np.float32)
            entries[memory_id] = _Written(now + self.ttl_s, vec, light)
            self._by[(scope, kind)] = entries

    def forget(
        self, scope: Scope, kind: MemoryKind | None = None, memory_id: str | None = None
    ) -> None:
        """Deleted memories (one id, or all of a scope's) are no dedup candidates."""
        with self._lock:
            for key in [k for k in self._by if k[0] == scope and kind in (None, k[1])]:
                entries = self._by[key]
                if memory_id is None:
                    self._count -= len(entries)
                    del self._by[key]
                elif entries.pop(memory_id, None) is not None:
                    self._count -= 1

    def nearest(
        self,
        scope: Scope,
        kind: MemoryKind,
        record: MemoryRecord,
        vector: Sequence[float] | np.ndarray,
    ) -> Match | None:
        """The closest of this scope's recent writes, compared as the engine's search would
        (for entities: the same entity and entity kind only)."""
        with self._lock:
            entries = list(self._entries(scope, kind, time.monotonic()).items())
        if not entries:
            return None
        v = np.asarray(vector, dtype=np.float32)
        best: Match | None = None
        for memory_id, w in entries:
            if not same_entity(w.source, record):
                continue
            norm = float(np.linalg.norm(v) * np.linalg.norm(w.vector)) or 1.0
            cosine = float(v @ w.vector) / norm
            if best is None or cosine > best.similarity:
                best = Match(memory_id, cosine, w.source)
        return best

    def slot_holders(
        self, scope: Scope, kind: MemoryKind, subject: str, slots: Sequence[str]
    ) -> list[dict[str, Any]]:
        """This scope's recent writes about ``subject`` holding any of ``slots`` and not
        superseded (the engine sees them only after its next refresh)."""
        wanted = set(slots)
        with self._lock:
            entries = list(self._entries(scope, kind, time.monotonic()).values())
        return [
            w.source
            for w in entries
            if w.source.get("subject") == subject
            and wanted & set(w.source.get("slots") or [])
            and not w.source.get("superseded_by")
        ]

    def _entries(self, scope: Scope, kind: MemoryKind, now: float) -> dict[str, _Written]:
        entries = self._by.get((scope, kind), {})
        for memory_id in [m for m, w in entries.items() if w.expires <= now]:
            del entries[memory_id]
            self._count -= 1
        if not entries:
            self._by.pop((scope, kind), None)
        return entries

    def _prune_all(self, now: float) -> None:
        for scope, kind in list(self._by):
            self._entries(scope, kind, now)


def _light(source: dict[str, Any]) -> dict[str, Any]:
    """A document as a read returns it: without the vector, its code and the token copies."""
    heavy = {f for f in HEAVY_FIELDS if not f.startswith("*")}
    return {k: v for k, v in source.items() if k not in heavy and not k.endswith("_tok")}


def closer(found: Match | None, recent: Match | None) -> Match | None:
    """The better dedup candidate of the engine's nearest memory and a recent write; for the
    same memory, the recent write (the engine may still hold its older version)."""
    if recent is None:
        return found
    if found is None or found.memory_id == recent.memory_id:
        return recent
    return recent if recent.similarity > found.similarity else found
