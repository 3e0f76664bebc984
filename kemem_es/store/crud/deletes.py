"""Deleting many memories: a whole scope (or what matches filters) page by page, a listed
set, and forgetting the scope's history texts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from kemem_es.contract.memory import Action
from kemem_es.engine.errors import check_bulk
from kemem_es.errors import EngineUnavailable, activity
from kemem_es.models import MemoryKind
from kemem_es.runtime import shielded
from kemem_es.store import fresh, history
from kemem_es.store.crud.base import Stored, index_missing, kinds_of
from kemem_es.store.crud.listing import Listing
from kemem_es.store.crud.writes import Writes
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import HEAVY_FIELDS, UID_FIELD, checked_kind, history_alias
from kemem_es.store.scope import Scope

DELETE_PAGE = 500
FORGET_IDS = 5000  # memory ids per history delete (well under the engine's terms limit)
DELETE_PASSES = 5  # delete_all: again while memories are added meanwhile, this many times at most


class Deletes(Writes, Listing):
    def delete_scope(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None,
        kind: MemoryKind | None,
        actor: str,
        keep_text_in_history: bool = True,
    ) -> int:
        """Delete every memory of the scope matching the filters, page by page, each recorded
        in history (without its text when ``keep_text_in_history`` is False: forgetting a
        user should not leave their words behind in the history). Forgetting strips the texts
        of the scope's whole history of that kind, or with filters, of exactly the memories
        deleted here: those that still exist keep theirs."""
        deleted: list[str] = []
        for rows in self._pages_to_delete(scope, filters, kind):
            deleted += self.delete_sources(scope, rows, actor, keep_text_in_history)
        if not keep_text_in_history:
            self._forget_history(scope, kind, deleted if filters else None)
        self.refresh(scope, kinds_of(kind))
        return len(deleted)

    def refresh(self, scope: Scope, kinds: Iterable[MemoryKind]) -> None:
        """Make what was written searchable now: the scope's indices of ``kinds`` and the
        history (one refresh after many writes, not a wait for each)."""
        for k in kinds:
            try:
                with activity("refreshing"):
                    self.engine.refresh(self.alias(scope, k))
            except EngineUnavailable as exc:
                if not index_missing(exc):  # a kind not written yet: nothing to refresh
                    raise
        with activity("refreshing"):
            history.refresh(self.engine)

    def delete_sources(
        self,
        scope: Scope,
        rows: Sequence[Stored],
        actor: str,
        keep_text: bool = True,
        reason: str | None = None,
    ) -> list[str]:
        """Delete these memories, each only if still the version listed, with a history entry
        each; returns the engine ids of those this call deleted. One changed since it was
        listed (a user's update, a recall) stays: the caller's choice was made on what it no
        longer is. One deleted meanwhile by someone else is not counted twice."""
        if not rows:
            return []
        lines: list[dict[str, Any]] = []
        entries: list[dict[str, Any]] = []
        for row in rows:
            lines.append(self._action("delete", scope, row.kind, row.memory_id, row))
            old = row.source if keep_text else None
            event: Action = "DELETE" if keep_text else "FORGET"
            entries.append(
                history.entry(scope, row.memory_id, row.kind, event, actor, old=old, reason=reason)
            )
        with shielded():  # the deletions and their history go together (see _bulk_one)
            for kind in {row.kind for row in rows}:
                fresh.written(self.engine, self.alias(scope, kind), scope.routing)
            with activity("deleting memories"):
                resp = self.engine.bulk(lines)
            ok = [
                e
                for e, item in zip(entries, resp["items"], strict=True)
                if item["delete"].get("result") == "deleted"
            ]
            if ok:
                self.record_history(ok, f"recording history ({len(ok)} memories were deleted)")
        # Not deleted (a blocked index, a failing shard): an error, never a smaller count;
        # a scope's forget then stops before it strips any history. Changed since listed: kept.
        failed = [i for i in resp["items"] if i["delete"].get("status") != 409]
        check_bulk({"items": failed}, f"deleting memories ({len(ok)} of {len(rows)} were deleted)")
        return [e["uid"] for e in ok]

    def _pages_to_delete(
        self, scope: Scope, filters: Mapping[str, Any] | None, kind: MemoryKind | None
    ) -> Iterator[list[Stored]]:
        """The matching memories, paged by engine id: the one sort key no write changes (by
        updatetime, a memory updated meanwhile moved ahead of the cursor and survived). Then
        again while a pass finds any (added meanwhile, or changed after it was listed: deleted
        as it is now, so its history holds what was deleted), ``DELETE_PASSES`` times at most.
        Each pass's refresh is bounded like the reads it comes before (the query deadline): on a
        hung engine a scope delete fails as fast as the rest of the Memory API, not after the
        write timeout."""
        for k in kinds_of(kind):
            body: dict[str, Any] = {
                "size": DELETE_PAGE,
                "query": {"bool": {"filter": scope.filters() + compile_filters(filters)}},
                "sort": [{UID_FIELD: {"order": "asc"}}],
                "_source": {"excludes": HEAVY_FIELDS},
                "track_total_hits": False,
                "seq_no_primary_term": True,
            }
            for _ in range(DELETE_PASSES):
                try:
                    with activity("refreshing"):  # bounded like the read it comes before
                        self.engine.refresh(self.alias(scope, k), self.engine.read_timeout)
                except EngineUnavailable as exc:
                    if not index_missing(exc):
                        raise
                    break  # a kind whose index does not exist yet has nothing to delete
                found = False
                page = body
                while True:
                    hits = self._live_page(self.alias(scope, k), page, scope)
                    if hits:
                        found = True
                        yield [Stored.listed(k, h) for h in hits]
                    if len(hits) < DELETE_PAGE:
                        break
                    page = body | {"search_after": hits[-1]["sort"]}
                if not found:
                    break

    def _forget_history(
        self, scope: Scope, kind: MemoryKind | None, uids: Sequence[str] | None
    ) -> None:
        """Strip the texts from the scope's history: of one kind when ``kind`` is given, of
        only these memories (engine ids) when ``uids`` is given. The FORGET entries stay."""
        if uids is not None and not uids:
            return
        scoped = scope.filters()
        if kind is not None:
            scoped.append({"term": {"kind": checked_kind(kind)}})
        batches: list[list[dict[str, Any]]] = (
            [[]]
            if uids is None
            else [
                [{"terms": {"uid": list(uids[i : i + FORGET_IDS])}}]
                for i in range(0, len(uids), FORGET_IDS)
            ]
        )
        with activity("refreshing"):
            history.refresh(self.engine)
        with activity("forgetting history"):
            for ids in batches:
                keep = [{"term": {"event": "FORGET"}}]
                body = {"query": {"bool": {"filter": scoped + ids, "must_not": keep}}}
                self.engine.delete_by_query(history_alias(self.prefix), body)
