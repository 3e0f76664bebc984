"""The Memory API's verbs: add, get, get_all, update, delete, delete_all, history.

Each verb validates like the import does (one validation for every write path), works inside
one :class:`Scope`, and records what it changed in the history index.
"""

from __future__ import annotations

from kemem_es.memory.service.adding import Adding
from kemem_es.memory.service.base import BACKOFF_S, DEDUP_CHUNK, RETRIES, retried
from kemem_es.memory.service.importing import Importing

__all__ = ["BACKOFF_S", "DEDUP_CHUNK", "RETRIES", "MemoryService", "retried"]


class MemoryService(Adding, Importing):
    """The Memory API over one prefix's store: adding (``adding``), import dedup
    (``importing``), reading and changing (``editing``), supersession, each a module of this
    package."""
