"""Records → engine documents: the original text for display, jieba tokens for BM25."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from kemem_es.models import Database, EntityRecord, EventRecord, MemoryRecord

DATE_FMT = "%Y-%m-%dT%H:%M:%S"


class TextTokenizer(Protocol):
    def index_text(self, text: str) -> str: ...


def embed_text(record: MemoryRecord) -> str:
    """What gets embedded: the event text; for entities the name + description (the full sense)."""
    if isinstance(record, EventRecord):
        return record.description
    if record.entity_name in record.description:
        return record.description
    return f"{record.entity_name}：{record.description}"


def record_names(record: MemoryRecord) -> list[str]:
    """User, agent and entity names carried by a record (dictionary words for jieba)."""
    names = [record.user_name, record.agent_name]
    if isinstance(record, EntityRecord) and record.entity_type != "泛化实体":
        names.append(record.entity_name)
    return [n for n in names if n and 1 < len(n) <= 12]


def content_hash(record: MemoryRecord, model_name: str) -> str:
    """Changes when the record or the embedding model does: unchanged docs are skipped."""
    payload = record.model_dump(mode="json", exclude={"strength", "vector"})
    payload["_model"] = model_name
    digest = hashlib.sha1(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode())
    if record.vector is not None:  # bytes, not JSON text: hashing 512 floats stays cheap
        digest.update(np.asarray(record.vector, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _fmt(t: datetime | None) -> str | None:
    return t.strftime(DATE_FMT) if t else None


def to_document(record: MemoryRecord, db: Database, tok: TextTokenizer) -> dict[str, Any]:
    """The engine document, without the vector (added after batched embedding)."""
    doc: dict[str, Any] = {
        "id": record.doc_id(db),
        "db": db,
        "agent_id": record.agent_id,
        "user_id": record.user_id,
        "user_name": record.user_name,
        "agent_name": record.agent_name,
        "session_id": record.session_id,
        "strength": record.strength,
        "recall_count": 0,
        "metadata": record.metadata,
        "indexed_at": datetime.now(timezone.utc).strftime(DATE_FMT),
    }
    if isinstance(record, EventRecord):
        doc.update(
            description=record.description,
            description_tok=tok.index_text(record.description),
            deepinsight=record.deepinsight,
            deepinsight_tok=tok.index_text(record.deepinsight),
            keywords=record.keywords,
            keywords_tok=" ".join(tok.index_text(k) for k in record.keywords),
            place=record.place,
            scene=record.scene,
            created_at=_fmt(record.created_at),
            updatetime=_fmt(record.updatetime),
            event_time=_fmt(record.event_time),
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
            updatetime=_fmt(record.updatetime),
        )
    return {k: v for k, v in doc.items() if v is not None}
