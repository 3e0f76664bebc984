"""Reading, changing and deleting single memories and whole scopes, with history.

Every operation takes a :class:`Scope`; the engine id comes from it and every fetched document
is checked against it, so another scope's memory is simply "not found". Writes that change one
memory use optimistic concurrency (the document's seq_no) and retry on a conflict, so a
concurrent update is never overwritten unseen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemem_es.contract.memory import Memory, MemoryPage
from kemem_es.errors import ConcurrentChange
from kemem_es.models import MemoryKind
from kemem_es.store.crud.base import Stored, index_missing
from kemem_es.store.crud.cursor import Cursor, decode_cursor, encode_cursor, listing_key, resume
from kemem_es.store.crud.deletes import Deletes
from kemem_es.store.crud.pits import PIT_KEEP_ALIVE_S, PIT_MAX_OPEN, PITS, PitBudget
from kemem_es.store.crud.reads import Reads

__all__ = [
    "PITS",
    "PIT_KEEP_ALIVE_S",
    "PIT_MAX_OPEN",
    "ConcurrentChange",
    "Crud",
    "Cursor",
    "PitBudget",
    "Stored",
    "decode_cursor",
    "encode_cursor",
    "index_missing",
    "listing_key",
    "page_of",
    "resume",
    "to_memories",
]


class Crud(Reads, Deletes):
    """A prefix's memories: reads (``reads``), listings (``listing``), one memory's writes
    (``writes``) and deletions of many (``deletes``), each part a module of this package."""


def to_memories(rows: Sequence[tuple[MemoryKind, dict[str, Any]]]) -> list[Memory]:
    from kemem_es.store.documents import to_memory

    return [to_memory(src, kind) for kind, src in rows]


def page_of(rows: Sequence[tuple[MemoryKind, dict[str, Any]]], cursor: str | None) -> MemoryPage:
    return MemoryPage(results=to_memories(rows), next_cursor=cursor)
