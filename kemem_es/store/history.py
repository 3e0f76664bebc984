"""The history of every change: ADD / UPDATE / DELETE / NOOP / FORGET with the text before and
after, who did it and when. Entries are keyed by the memory's engine id (``uid``), so a
memory's history is scoped exactly like the memory itself."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kemem_es.contract.memory import Action, HistoryEntry
from kemem_es.models import MemoryKind
from kemem_es.store.documents import utc_now
from kemem_es.store.layout import (
    SENTENCE_CODES_FIELD,
    VECTOR_CODE_FIELD,
    VECTOR_FIELD,
    history_alias,
)
from kemem_es.store.scope import Scope

if TYPE_CHECKING:
    from kemem_es.engine.client import Engine

_last_seq = 0
# (cluster, history alias) this process wrote entries to since it last refreshed that index.
_unrefreshed: set[tuple[str, str]] = set()


def texts_query(uids: set[str]) -> dict[str, Any]:
    """The history entries of the memories ``uids`` (engine ids): the texts they have had."""
    return {
        "size": LIMIT_MAX,
        "query": {"bool": {"filter": [{"terms": {"uid": sorted(uids)}}]}},
        "_source": ["uid", "old_text", "new_text"],
    }


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
        if not k.endswith("_tok")
        and k not in (VECTOR_FIELD, VECTOR_CODE_FIELD, SENTENCE_CODES_FIELD, "meta")
    }


def bulk_lines(prefix: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    alias = history_alias(prefix)
    lines: list[dict[str, Any]] = []
    for doc in docs:
        lines += [{"index": {"_index": alias}}, doc]
    return lines


def _key(engine: Engine) -> tuple[str, str]:
    return engine.url, history_alias(engine.settings.index_prefix)


def write(engine: Engine, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Index history entries (one bulk; the caller checks its items). Noted as written, also
    when the call fails (the engine may still apply it), for ``refresh_if_written``."""
    try:
        return engine.bulk(bulk_lines(engine.settings.index_prefix, docs))
    finally:
        _unrefreshed.add(_key(engine))


def refresh(engine: Engine, timeout_s: float | None = None) -> None:
    """Make every history entry written so far searchable (noted before the call, so entries
    written meanwhile are noted again)."""
    key = _key(engine)
    _unrefreshed.discard(key)
    try:
        engine.refresh(key[1], timeout_s)
    except BaseException:
        _unrefreshed.add(key)
        raise


def refresh_if_written(engine: Engine, timeout_s: float | None = None) -> None:
    """Refresh the history only when this process wrote to it since its last refresh: reads
    that follow their own writes see them, and reading (which any API key may do at request
    rate) does not force refreshes of the index every scope shares. Another process's entries
    show after the index's own periodic refresh."""
    if _key(engine) in _unrefreshed:
        refresh(engine, timeout_s)


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
