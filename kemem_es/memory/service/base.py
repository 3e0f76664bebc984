"""What the Memory API's parts share: the store, the dedup state (recent writes, turns per
scope and memory), the one validation, NOOP records, and the retry of a conflicting write."""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any, TypeVar

from kemem_es.errors import ConcurrentChange, InvalidInput
from kemem_es.memory.dedup import RecentWrites
from kemem_es.models import MemoryKind
from kemem_es.runtime import KeyedLock, pause
from kemem_es.store import history
from kemem_es.store.bulk import BulkWriter
from kemem_es.store.crud import Crud, Stored
from kemem_es.store.facts import Facts
from kemem_es.store.nearest import Neighbours
from kemem_es.store.scope import Scope, checked_id
from kemem_es.store.validation import Checked, validate_items

RETRIES = 4
BACKOFF_S = 0.02  # before the 2nd, 3rd, 4th try: up to 20, 40, 80 ms, jittered
DEDUP_CHUNK = 256
T = TypeVar("T")


class ServiceBase:
    def __init__(
        self,
        crud: Crud,
        neighbours: Neighbours,
        writer: Callable[[], BulkWriter],
        dedup_threshold: float = 0.9,
        dedup_min_overlap: float = 0.6,
        dedup_recent_s: float = 30.0,
        supersede: bool = True,
        facts: Facts | None = None,
    ) -> None:
        self._writer = writer
        self.crud = crud
        self.neighbours = neighbours
        self.facts = facts if facts is not None else Facts(crud.engine)
        self.dedup_threshold = dedup_threshold
        self.dedup_min_overlap = dedup_min_overlap
        # Dedup sees this process's writes before the engine's refresh does, and the adds of
        # one scope and kind take turns, so two near-duplicates at once do not both get added.
        self.recent = RecentWrites(dedup_recent_s)
        self._turns = KeyedLock()
        # Facts that change (docs/facts.md): a new fact of a subject's slot supersedes the old.
        self.supersede = supersede

    @cached_property
    def writer(self) -> BulkWriter:
        """Built on first write: reads, lists and deletes need no embedding model."""
        return self._writer()

    @property
    def dim(self) -> int:
        return self.writer.embedder.dim

    def validate(self, data: dict[str, Any], kind: MemoryKind, scope: Scope) -> Checked:
        """The one validation (record model, scope rule, vector size) for one record."""
        return self._validate(data, kind, scope)

    def _validate(self, data: dict[str, Any], kind: MemoryKind, scope: Scope) -> Checked:
        good, problems = validate_items([("memory", data)], kind, scope.db, self.dim)
        if problems:
            first = problems[0].removeprefix("memory: ")
            raise InvalidInput(f"invalid memory: {first}", problems, field=first.split(":", 1)[0])
        if good[0].scope != scope:  # e.g. a before_write hook that rewrote user_id
            moved = "agent_id" if good[0].scope.agent_id != scope.agent_id else "user_id"
            raise InvalidInput(
                f"{moved}: the record was moved out of the call's scope ({scope.agent_id!r}, "
                f"{scope.user_id!r}); a memory is written where it was asked to be",
                field=moved,
            )
        return good[0]

    def _one_memory(self, scope: Scope, memory_id: str) -> AbstractContextManager[None]:
        """Updates and deletes of one memory take turns within this process: at once they
        would only conflict on the engine and retry (other processes still can: retried)."""
        # Checked first: the id is a lock key here, before any fetch would check it.
        return self._turns.hold(("memory", scope, checked_id(memory_id, "memory_id")))

    def record_noop(self, scope: Scope, memory_id: str, kind: MemoryKind, actor: str) -> None:
        """A fact judged already known (an LLM judge's NOOP): recorded in history."""
        self._noop(scope, memory_id, kind, actor, "judge")

    def _noop(
        self, scope: Scope, memory_id: str, kind: MemoryKind, actor: str, reason: str,
        similarity: float | None = None,
    ) -> None:  # fmt: skip
        entry = history.entry(
            scope, memory_id, kind, "NOOP", actor, reason=reason,
            similarity=None if similarity is None else round(similarity, 4),
            matched_id=memory_id if similarity is not None else None,
        )  # fmt: skip
        self.crud.record_history([entry], "recording history")

    @staticmethod
    def _hash(stored: Stored) -> str | None:
        return stored.source.get("content_hash")


def retried(attempt: Callable[[], T], memory_id: str) -> T:
    """``attempt()`` (read, then write the version read) again while another writer changes
    the memory in between, after a short jittered backoff (writers that collided at once
    would collide again at once); ConcurrentChange when it kept changing."""
    for n in range(RETRIES):
        try:
            return attempt()
        except ConcurrentChange:
            if n + 1 < RETRIES:
                pause(random.uniform(0.5, 1.0) * BACKOFF_S * 2**n)
    raise ConcurrentChange(
        f"memory {memory_id!r} kept changing under us (other writers): nothing was written; "
        "try again"
    )
