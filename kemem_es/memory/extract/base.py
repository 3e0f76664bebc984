"""What every extractor returns and the interface a custom one implements."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from kemem_es.models import MemoryKind

Message = Mapping[str, Any]
Messages = str | Sequence[Message | str]


@dataclass(frozen=True)
class Extraction:
    """What an extractor found: record data for :class:`EventRecord` / :class:`EntityRecord`
    without scope fields. Times are ISO 8601 strings with the offset of ``now``.

    ``ignored`` lists the keys of the answer that records do not take (``events[0].importance``):
    they were dropped, not stored — an LLM's answer never sets ids, scope or strength."""

    events: list[dict[str, Any]] = field(default_factory=list)
    entities: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    # with candidate memories shown (extract.judge): per entity, the model's action and target
    # memory id (None where it gave none), aligned with ``entities``
    judgements: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.events) + len(self.entities)

    def items(self) -> Iterator[tuple[MemoryKind, dict[str, Any]]]:
        """``("events", data)`` then ``("entities", data)`` pairs, ready for
        ``MemoryService.add(data, scope, kind, ...)``, which fills in the scope."""
        for data in self.events:
            yield "events", dict(data)
        for data in self.entities:
            yield "entities", dict(data)


@runtime_checkable
class Extractor(Protocol):
    """Anything that turns a dialogue into records; plug your own into ``Kemem``."""

    def extract(
        self,
        messages: Messages,
        *,
        user_name: str | None = None,
        agent_name: str | None = None,
        now: datetime,
    ) -> Extraction: ...


@runtime_checkable
class AsyncExtractor(Protocol):
    async def aextract(
        self,
        messages: Messages,
        *,
        user_name: str | None = None,
        agent_name: str | None = None,
        now: datetime,
    ) -> Extraction: ...
