"""The Memory API's verbs on stored memories: add, get, get_all, update, delete, delete_all,
count, history, and the consistency repair and statistics beside them."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.errors import activity
from kemem_es.front.dialogue import Dialogue
from kemem_es.front.recall import with_session
from kemem_es.memory.inputs import AddInput
from kemem_es.models import Database, MemoryKind
from kemem_es.store.history import LIMIT as HISTORY_LIMIT
from kemem_es.store.layout import KINDS

if TYPE_CHECKING:  # loaded on first use (jieba, the model, the lexicon take seconds)
    from kemem_es.store.consistency import HistoryRepair
    from kemem_es.store.stats import MemoryStats


class MemoryVerbs(Dialogue):
    def add(
        self,
        data: AddInput,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        kind: MemoryKind = "events",
        db: Database = "user",
        infer: bool | Literal["background"] = False,
        refresh: bool = False,
        dedup: bool = True,
        user_name: str | None = None,
        agent_name: str | None = None,
        scene_change: bool = False,
        dialogue: bool = True,
    ) -> list[AddResult]:
        """Remember ``data``: a text, chat messages (``[{"role", "content"}, ...]``, stored as
        one event of the turns joined), or a record (dict / EventRecord / EntityRecord).
        Returns each stored memory with the action taken (ADD / UPDATE / NOOP).
        ``refresh=True`` makes it searchable before returning (else within a second).
        ``dedup``: a new fact close to an existing one (cosine ≥ KEMEM_DEDUP_THRESHOLD)
        updates it, an exact duplicate is a NOOP; each result says which and why.
        ``infer=True``: the extractor turns the messages into entity and event records first
        (all validated before any is written); ``infer="background"`` stores the raw turn now,
        returns it, and extracts afterwards (``km.drain()`` waits; failures are logged and
        kept in ``km.extraction_errors``).

        With a ``session_id``, text and chat messages are the session's dialogue
        (docs/sessions.md): they are appended to it, and every ``KEMEM_SESSION_BATCH_TURNS``
        turns (once the window holds ``KEMEM_SESSION_TRIGGER_TURNS``; ``scene_change=True``:
        all of them) are extracted in the background; the result lists what this call stored
        as memories (with ``infer=True`` the batches it handed over are extracted before it
        returns). A record with a ``session_id`` is stored as a memory, as before; so is text
        with ``dialogue=False`` (one memory tagged with the session)."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        names = {k: v for k, v in (("user_name", user_name), ("agent_name", agent_name)) if v}
        if session_id is not None and dialogue and not _is_record(data):
            return self._append(data, scope, session_id, names, scene_change, infer is True)[1]
        for k in KINDS if infer else (kind,):
            self._ready(k, db)
        return self.writes.add(
            data, scope, kind, session_id, metadata, refresh, dedup, infer, names
        )

    def get(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
    ) -> Memory:
        """One memory by id, within the scope; NotFound for an unknown id (or another scope's)."""
        self._open()
        return self.memories.get(memory_id, self._scope(agent_id, user_id, db), kind)

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        limit: int = 100,
        cursor: str | None = None,
        session_id: str | None = None,
    ) -> MemoryPage:
        """A page of the scope's memories, newest first (updatetime); ``next_cursor`` fetches
        the next. The pages of one listing show the scope as it was at the first page (an
        engine point in time), so a memory changed meanwhile is neither missed nor repeated."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.get_all(scope, with_session(filters, session_id), kind, limit, cursor)

    def update(
        self,
        memory_id: str,
        data: str | Mapping[str, Any],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
        refresh: bool = False,
    ) -> AddResult:
        """Change some fields of a memory (a text changes its description); the rest stays.
        The before_write hooks see the new version, as they see an add's record."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.update(memory_id, data, scope, kind, refresh, hooks=self.hooks)

    def delete(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
        refresh: bool = False,
    ) -> Memory:
        """Delete one memory (recorded in history); returns what was deleted."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.delete(memory_id, scope, kind, refresh)

    def delete_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        forget: bool = False,
        session_id: str | None = None,
    ) -> int:
        """Delete every memory of one scope (matching ``filters``), events and entities.
        A scope is required: a user (user db) or, with ``db="official"``, an agent.
        ``forget=True`` also strips that scope's history of its texts. Returns the count."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        n = self.memories.delete_all(scope, with_session(filters, session_id), kind, forget)
        if db == "user" and filters is None and kind is None:  # the scope's sessions go too
            if session_id is None:
                self.sessions.delete_scope(scope, forget)
            else:
                self.sessions.delete(scope, session_id, forget)
        return n

    def count(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        session_id: str | None = None,
    ) -> int:
        """How many memories of the scope match ``filters`` (what delete_all would delete)."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.count(scope, with_session(filters, session_id), kind)

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        limit: int = HISTORY_LIMIT,
    ) -> list[HistoryEntry]:
        """The recorded changes of a memory, oldest first (also after it was deleted): the
        newest ``limit`` (1–10,000) of them when there are more."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.history(memory_id, scope, limit)

    def repair_history(
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        db: Database = "user",
        dry_run: bool = False,
    ) -> HistoryRepair:
        """Find (and, unless ``dry_run``, record) what the history lacks in one agent's memories
        (one user's, with ``user_id``): stored versions that are not their memory's newest
        entry, deletions with no DELETE entry (see docs/consistency.md). ``kemem-es doctor``."""
        self._open()
        from kemem_es.store.consistency import repair_history

        scope = self._scope(agent_id, user_id or ("-" if db == "user" else None), db)
        user = scope.user_id if user_id is not None else None
        return repair_history(self.engine, scope.db, scope.agent_id, user, dry_run)

    def stats(self, *, agents: Collection[str] | None = None) -> MemoryStats:
        """Engine health and version, counts per agent / user / database / kind, the strength
        distribution and recent clean-ups (the dashboard's overview); ``agents`` limits the
        numbers to those agents."""
        self._open()
        from kemem_es.store.stats import memory_stats

        with activity("reading statistics"):
            return memory_stats(self.engine, agents)


def _is_record(data: object) -> bool:
    """A record (stored as a memory) rather than dialogue (text or chat messages)."""
    return isinstance(data, BaseModel) or (isinstance(data, Mapping) and "role" not in data)
