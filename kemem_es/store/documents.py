"""Records ↔ engine documents, both ways, in one place.

A document keeps the original texts for display, jieba tokens (``*_tok``) for BM25, the scope,
the caller's id (``id``) and the engine id (``uid``), lifecycle fields (strength, recall count)
and metadata twice: as given (``metadata``, for display) and as typed key/value entries
(``meta``, nested) that filters can match without one mapped field per tenant key.

Times are stored as given: ISO 8601 with its offset when the input had one (so the instant is
exact and the local wall-clock time survives for display), naive otherwise (read by the engine
as UTC, which agrees with a naive ``now`` at query time).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from kemem_es.contract.memory import Memory
from kemem_es.models import (
    MAX_STRENGTH,
    RECORD_TYPES,
    EntityRecord,
    EventRecord,
    MemoryKind,
    MemoryRecord,
    read_date_text,
)
from kemem_es.store import vector_code
from kemem_es.store.layout import (
    ID_FIELD,
    SENTENCE_CODES_FIELD,
    SLOTS_FIELD,
    STRENGTH_KEY_FIELD,
    STRENGTH_KEY_SCALE,
    SUBJECT_FIELD,
    SUPERSEDED_AT,
    SUPERSEDED_BY,
    UID_FIELD,
    VECTOR_CODE_FIELD,
    VECTOR_FIELD,
)
from kemem_es.store.scope import Scope
from kemem_es.text.facts import Facts, entity_facts, facts_of

# Kept when an import or an update rewrites a memory: what its life so far has earned it.
LIFECYCLE_FIELDS = ("recall_count", "last_recalled_at")
OPTIONAL_TERMS = {"place", "scene", "keyword", "user_name", "agent_name", "session_id"}


class TextTokenizer(Protocol):
    def index_text(self, text: str) -> str: ...

    def index_texts(self, texts: Sequence[str]) -> list[str]: ...

    def scoped(self, names: Iterable[str]) -> TextTokenizer: ...


def embed_text(record: MemoryRecord) -> str:
    """What gets embedded: the event text; for entities the name + description (the full sense)."""
    if isinstance(record, EventRecord):
        return record.description
    if record.entity_name in record.description:
        return record.description
    return f"{record.entity_name}：{record.description}"


# What a document derives from its record besides the model: tokens, sub-words, the embedder's
# input. Bumped when that changes, so re-importing the same source refreshes documents written
# before (2: latin names no longer cut English words apart; 3: English irregular past forms
# stem as their base form; round 8 of issue 12; 4: names are kept whole in their own scope's
# texts only, see store/names.py; 5: an event's sentences have vectors of their own).
DERIVATION_VERSION = 5


def content_hash(record: MemoryRecord, model_name: str) -> str:
    """Changes when anything the caller wrote (strength included), the model or the derivation
    (``DERIVATION_VERSION``) changes: re-importing an unchanged record is a no-op, a
    strength-only edit is an update, and a store written by an older derivation is refreshed
    by importing its source again."""
    payload = record.model_dump(mode="json", exclude={"vector"})
    if payload.get("slot") is None:  # added later: records without one hash as before
        payload.pop("slot", None)
    payload["_model"] = model_name
    payload["_derivation"] = DERIVATION_VERSION
    digest = hashlib.sha1(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode())
    if record.vector is not None:  # bytes, not JSON text: hashing 512 floats stays cheap
        digest.update(np.asarray(record.vector, dtype=np.float32).tobytes())
    return digest.hexdigest()


def fmt_time(t: datetime | None) -> str | None:
    """As given, its offset and any fraction of a second kept (the engine orders by the
    millisecond; the source keeps what was written, for get and export)."""
    if t is None:
        return None
    return t.isoformat(timespec="microseconds" if t.microsecond else "seconds")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def date_value(text: str) -> str | None:
    """A metadata text as the engine's date sub-field holds it, or None when it is not a date
    the records' rule (``models.read_date_text``) accepts. Such a text ("2025-02-30", an offset
    of +20:00) stays plain keyword metadata: metadata is the caller's free-form data, so it is
    not refused for looking almost like a date. The value is written in ISO 8601 with a ``T``
    (``2025-06-01 12:00`` → ``2025-06-01T12:00:00``), the one form the engine's format reads
    for every shape the rule allows."""
    try:
        return read_date_text(text).isoformat()
    except ValueError:
        return None


def meta_entries(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """Typed entries for filtering. The JSON type of a value chooses its field: text →
    ``kw`` (and ``date`` too when it reads as a date, see ``date_value``), number → ``num``,
    true/false → ``bool``. A list gives one entry per item."""
    out: list[dict[str, Any]] = []
    for key, value in metadata.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool):
                out.append({"key": key, "bool": item})
            elif isinstance(item, int | float):
                out.append({"key": key, "num": item})
            elif isinstance(item, str):
                entry: dict[str, Any] = {"key": key, "kw": item}
                when = date_value(item)
                if when is not None:
                    entry["date"] = when
                out.append(entry)
    return out


# The latest date the engine takes; below this strength the key stops at it (the term's error
# there is under 4e-3 / k of the strength weight).
MAX_KEY_MS = 250_000_000_000_000  # year 9892


def strength_key(strength: float | None) -> int | None:
    """The ``strength_key`` date (epoch ms) of a strength: SCALE / s, so that distance_feature
    (origin: the epoch, pivot SCALE / k) scores pivot / (pivot + SCALE / s) = s / (s + k).
    None (the field absent: the term is 0, as s / (s + k) is) for no strength."""
    if strength is None or strength <= 0:
        return None
    return min(round(STRENGTH_KEY_SCALE / float(strength)), MAX_KEY_MS)


def with_strength_key(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the key of the strength it sets (None clears it, for a partial update)."""
    if "strength" in doc:
        doc[STRENGTH_KEY_FIELD] = strength_key(doc["strength"])
    return doc


def to_document(
    record: MemoryRecord, scope: Scope, tok: TextTokenizer, memory_id: str | None = None
) -> dict[str, Any]:
    """The engine document, without the vector (added after batched embedding)."""
    mid = memory_id or record.memory_id()
    doc: dict[str, Any] = {
        ID_FIELD: mid,
        UID_FIELD: scope.doc_id(mid),
        **scope.fields(),
        "user_name": record.user_name,
        "agent_name": record.agent_name,
        "session_id": record.session_id,
        "strength": record.strength,
        "recall_count": 0,
        "metadata": record.metadata,
        "meta": meta_entries(record.metadata),
        "indexed_at": utc_now(),
    }
    if isinstance(record, EventRecord):
        doc.update(
            description=record.description,
            description_tok=tok.index_text(record.description),
            deepinsight=record.deepinsight,
            deepinsight_tok=tok.index_text(record.deepinsight),
            keywords=record.keywords,
            keywords_tok=" ".join(tok.index_texts(record.keywords)),
            place=record.place,
            scene=record.scene,
            created_at=fmt_time(record.created_at),
            updatetime=fmt_time(record.updatetime),
            event_time=fmt_time(record.event_time),
        )
    elif isinstance(record, EntityRecord):
        doc.update(
            entity_name=record.entity_name,
            entity_name_tok=tok.index_text(record.entity_name),
            entity_type=record.entity_type,
            kind=record.kind,
            keyword=record.keyword,
            keyword_tok=tok.index_text(record.keyword),
            description=record.description,
            description_tok=tok.index_text(record.description),
            updatetime=fmt_time(record.updatetime),
        )
        doc.update(fact_fields(facts_of_record(record)))
    with_strength_key(doc)
    # An empty optional value is stored as absent, so that `exists` filters mean something.
    return {k: v for k, v in doc.items() if v is not None and not (k in OPTIONAL_TERMS and v == "")}


def facts_of_record(record: MemoryRecord, said_now: bool = False) -> Facts:
    """What a memory is about (docs/facts.md): an entity's subject and slots; an event's only
    when it was said now (``add`` text or messages: a statement of the speaker), never for an
    episode (imported events are not facts that change)."""
    if isinstance(record, EntityRecord):
        return entity_facts(
            record.entity_name, record.kind, record.keyword, record.description, record.slot
        )
    return facts_of(record.description) if said_now else Facts()


def fact_fields(facts: Facts) -> dict[str, Any]:
    """The document fields of ``facts`` (none when the memory names no slot)."""
    if not facts.slots:
        return {}
    return {SLOTS_FIELD: facts.stored, SUBJECT_FIELD: facts.subject}


# A memory's sentences embedded on their own at most (more are joined into this many runs).
MEMORY_SENTENCES = 4


def vector_fields(
    kind: MemoryKind, vector: list[float], sentences: str | None = None
) -> dict[str, Any]:
    """What a new vector sets in a document: the vector, and for events its code (the compact
    copy the query path compares hits with, ``store.vector_code``) and its sentences' codes
    (``sentences``, from ``BulkPrepare.sentence_codes``; none for a single sentence)."""
    if kind == "events" and vector:
        return {
            VECTOR_FIELD: vector,
            VECTOR_CODE_FIELD: vector_code.encode(vector),
            SENTENCE_CODES_FIELD: sentences,
        }
    return {VECTOR_FIELD: vector}


_RECORD_FIELDS: dict[MemoryKind, tuple[str, ...]] = {
    kind: tuple(model.model_fields) for kind, model in RECORD_TYPES.items()
}


def to_record_data(source: dict[str, Any], kind: MemoryKind) -> dict[str, Any]:
    """A stored document back as record input (what an update starts from); a field an
    update cleared is stored as null and comes back absent."""
    data = {
        f: source[f] for f in _RECORD_FIELDS[kind] if source.get(f) is not None and f != "vector"
    }
    data["id"] = source.get(ID_FIELD)
    if "strength" in data:
        data["strength"] = stored_strength(source)
    return data


def stored_strength(source: dict[str, Any]) -> float:
    """A stored strength within ``MAX_STRENGTH``: reinforcement of older versions had no
    ceiling, and a value past it would fail the validation of every later update (and of the
    memory re-imported from an export), for a strength the caller never set."""
    return min(float(source.get("strength") or 0.0), MAX_STRENGTH)


def to_memory(source: dict[str, Any], kind: MemoryKind) -> Memory:
    """A stored document as the caller sees it (a field an update cleared is stored as null)."""
    common = {
        "id": source.get(ID_FIELD, ""),
        "kind": kind,
        "db": source.get("db", "user"),
        "agent_id": source.get("agent_id", ""),
        "user_id": source.get("user_id"),
        "session_id": source.get("session_id"),
        "text": source.get("description", ""),
        "updatetime": source.get("updatetime"),
        "user_name": source.get("user_name"),
        "agent_name": source.get("agent_name"),
        "strength": stored_strength(source),
        "recall_count": source.get("recall_count", 0),
        "last_recalled_at": source.get("last_recalled_at"),
        "metadata": source.get("metadata") or {},
        "slots": source.get(SLOTS_FIELD) or [],
        "superseded_by": source.get(SUPERSEDED_BY),
        "superseded_at": source.get(SUPERSEDED_AT),
    }
    if kind == "events":
        return Memory(
            **common,
            deepinsight=source.get("deepinsight") or "",
            keywords=source.get("keywords") or [],
            place=source.get("place") or "",
            scene=source.get("scene") or "",
            created_at=source.get("created_at"),
        )
    return Memory(
        **common,
        entity_name=source.get("entity_name"),
        entity_type=source.get("entity_type"),
        entity_kind=source.get("kind"),
        keyword=source.get("keyword"),
    )
