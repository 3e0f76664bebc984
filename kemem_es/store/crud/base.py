"""What every part of :class:`~kemem_es.store.crud.Crud` shares: the fetched memory
(:class:`Stored`), the kinds a call covers, the engine and the scope's index alias."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.models import MemoryKind
from kemem_es.store import fresh
from kemem_es.store.layout import KINDS, checked_kind, index_alias
from kemem_es.store.scope import Scope


@dataclass(frozen=True)
class Stored:
    """A fetched memory: its kind, source (without vector) and concurrency token."""

    kind: MemoryKind
    source: dict[str, Any]
    seq_no: int
    primary_term: int

    @property
    def memory_id(self) -> str:
        return str(self.source.get("id", ""))

    @classmethod
    def listed(cls, kind: MemoryKind, hit: dict[str, Any]) -> Stored:
        """A search hit of a query with ``seq_no_primary_term``: the version it was listed at."""
        return cls(kind, hit["_source"], hit["_seq_no"], hit["_primary_term"])


def kinds_of(kind: MemoryKind | None) -> tuple[MemoryKind, ...]:
    return KINDS if kind is None else (checked_kind(kind),)


class CrudBase:
    """The engine and the prefix whose memories the parts read and write."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prefix = engine.settings.index_prefix

    def alias(self, scope: Scope, kind: MemoryKind) -> str:
        return index_alias(self.prefix, scope.db, kind)

    def before_read(self, scope: Scope, kinds: Iterable[MemoryKind]) -> None:
        """This process's own writes of the scope made visible (``store.fresh``)."""
        reads = [(self.alias(scope, k), scope.routing) for k in kinds]
        fresh.before_read(self.engine, reads, self.engine.read_timeout)


def index_missing(exc: BaseException) -> bool:
    """A translated engine error that says the index does not exist (a fresh prefix whose
    first write created only its own kind's index)."""
    return "index_not_found" in str(exc)
