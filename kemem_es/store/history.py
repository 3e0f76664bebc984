"""The history of every change: ADD / UPDATE / DELETE / NOOP / FORGET with the text before and
after, who did it and when. Entries are keyed by the memory's engine id (``uid``), so a
memory's history is scoped exactly like the memory itself."""

from __future__ import annotations

import time
from typing import Any

from kemem_es.contract.memory import Action, HistoryEntry
from kemem_es.models import MemoryKind
from kemem_es.store.documents import utc_now
from kemem_es.store.layout import VECTOR_CODE_FIELD, VECTOR_FIELD, history_alias
from kemem_es.store.scope import Scope

_last_seq = 0


def _seq() -> int:
    """Monotonic within a process: orders entries written in the same millisecond."""
    global _last_seq
    _last_seq = max(_last_seq + 1, time.time_ns() // 1000)
    return _last_seq


def entry(
    scope: Scope,
    memory_id: str,
    kind: MemoryKind,
    event: Action,
    actor: str,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A history document. ``old`` / ``new`` are the memory's source fields (no vector)."""
    doc: dict[str, Any] = {
        "uid": scope.doc_id(memory_id),
        "memory_id": memory_id,
        "kind": kind,
        **scope.fields(),
        "event": event,
        "actor": actor,
        "at": utc_now(),
        "seq": _seq(),
    }
    if old is not None:
        doc["old_text"] = old.get("description")
        doc["old"] = slim(old)
    if new is not None:
        doc["new_text"] = new.get("description")
        doc["new"] = slim(new)
    doc.update({k: v for k, v in extra.items() if v is not None})
    return doc


def slim(source: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in source.items()
        if not k.endswith("_tok") and k not in (VECTOR_FIELD, VECTOR_CODE_FIELD, "meta")
    }


def bulk_lines(prefix: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    alias = history_alias(prefix)
    lines: list[dict[str, Any]] = []
    for doc in docs:
        lines += [{"index": {"_index": alias}}, doc]
    return lines


LIMIT = 1000  # entries a history call returns by default
LIMIT_MAX = 10_000  # the engine's default result window


def query(scope: Scope, memory_id: str, limit: int = LIMIT) -> dict[str, Any]:
    """The newest ``limit`` entries, newest first (the caller reverses them): after many
    NOOPs the latest UPDATE or DELETE must not be the part that is cut off."""
    return {
        "size": limit,
        "query": {"bool": {"filter": [{"term": {"uid": scope.doc_id(memory_id)}}]}},
        "sort": [{"seq": "desc"}],
        "_source": {"excludes": ["old", "new"]},
    }


def to_entry(source: dict[str, Any]) -> HistoryEntry:
    return HistoryEntry(
        memory_id=source["memory_id"],
        kind=source.get("kind", ""),
        event=source["event"],
        at=source["at"],
        actor=source.get("actor", ""),
        old_text=source.get("old_text"),
        new_text=source.get("new_text"),
        matched_id=source.get("matched_id"),
        similarity=source.get("similarity"),
        reason=source.get("reason"),
    )
