"""Reading memories: one by id, counts, a memory's history, which ids exist, every text a
memory has had."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kemem_es.contract.memory import HistoryEntry
from kemem_es.engine.errors import check_shards, deadline
from kemem_es.errors import InvalidInput, NotFound, activity
from kemem_es.models import Database, MemoryKind
from kemem_es.store import history
from kemem_es.store.crud.base import CrudBase, Stored, kinds_of
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import HEAVY_FIELDS, history_alias, index_alias
from kemem_es.store.scope import Scope, checked_id

FETCH_EXCLUDES = [f for f in HEAVY_FIELDS if f != "content_hash"]


class Reads(CrudBase):
    def fetch(self, scope: Scope, memory_id: str, kind: MemoryKind | None = None) -> Stored:
        """The memory with this id in this scope; NotFound otherwise (also for other scopes)."""
        memory_id = checked_id(memory_id, "memory_id")
        kinds = kinds_of(kind)
        refs = [(self.alias(scope, k), scope.doc_id(memory_id), scope.routing) for k in kinds]
        with activity("reading a memory"):
            docs = self.engine.get_many(refs, excludes=FETCH_EXCLUDES)
        found = [
            Stored(k, doc["_source"], doc["_seq_no"], doc["_primary_term"])
            for k, doc in zip(kinds, docs, strict=True)
            if doc is not None and scope.owns(doc.get("_source", {}))
        ]
        if not found:
            raise NotFound(f"no memory {memory_id!r} among the {scope.describe()}")
        if len(found) > 1:
            raise InvalidInput(
                f"memory id {memory_id!r} names both an event and an entity here; "
                "say which with kind='events' or kind='entities'",
                field="kind",
            )
        return found[0]

    def count(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
    ) -> int:
        query = {"bool": {"filter": scope.filters() + compile_filters(filters)}}
        self.before_read(scope, kinds_of(kind))
        with activity("counting memories"):
            return sum(
                self.engine.count(self.alias(scope, k), query, scope.routing)
                for k in kinds_of(kind)
            )

    def history(
        self, scope: Scope, memory_id: str, limit: int = history.LIMIT
    ) -> list[HistoryEntry]:
        """The newest ``limit`` changes of a memory, oldest first. This process's own changes
        are always in it (``history.refresh_if_written``); the refresh and the search share the
        query deadline, so a hung engine fails the read in that time, not the write timeout."""
        memory_id = checked_id(memory_id, "memory_id")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidInput(f"limit: must be a whole number, not {limit!r}", field="limit")
        if not 1 <= limit <= history.LIMIT_MAX:
            raise InvalidInput(f"limit: must be 1–{history.LIMIT_MAX}", field="limit")
        body = history.query(scope, memory_id, limit)
        with activity("reading history"), deadline(self.engine.settings.query_timeout_s):
            history.refresh_if_written(self.engine, self.engine.read_timeout)
            resp = self.engine.search(history_alias(self.prefix), body)
        check_shards(resp, "reading history")
        hits = resp["hits"]["hits"]
        return [history.to_entry(h["_source"]) for h in reversed(hits) if scope.owns(h["_source"])]

    def existing_ids(
        self, db: Database, kind: MemoryKind, refs: Sequence[tuple[str, str | None]]
    ) -> set[str]:
        """Which of the documents ``refs`` ((engine id, routing) in ``db``) exist (real time)."""
        alias = index_alias(self.prefix, db, kind)
        with activity("looking up memories"):
            return set(self.engine.mget(alias, refs, ["id"]))

    def texts_ever(self, uids: set[str]) -> list[dict[str, Any]]:
        """The history entries (uid, old_text, new_text) of the memories ``uids``: every text
        they have had, this process's latest changes included."""
        with activity("reading history"):
            history.refresh(self.engine)  # entries written a moment ago count
            body = history.texts_query(uids)
            hits = self.engine.search(history_alias(self.prefix), body)["hits"]["hits"]
        return [h["_source"] for h in hits]
