"""Listing a scope's memories page by page (``get_all``), on a point in time where one is
worth opening."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kemem_es.engine.errors import check_shards
from kemem_es.errors import InvalidInput, KememError, activity
from kemem_es.models import MemoryKind
from kemem_es.store.crud import pits
from kemem_es.store.crud.base import CrudBase, kinds_of
from kemem_es.store.crud.cursor import Cursor, decode_cursor, encode_cursor, listing_key, resume
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import HEAVY_FIELDS, UID_FIELD, kind_of_index
from kemem_es.store.scope import Scope

log = logging.getLogger(__package__)  # the package's logger: the name these logs always had

PAGE_MAX = 1000
LISTING_SORT = [
    {"updatetime": {"order": "desc", "missing": "_last"}},
    {UID_FIELD: {"order": "asc"}},
]


class Listing(CrudBase):
    def page(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[tuple[MemoryKind, dict[str, Any]]], str | None]:
        """One page, newest first (updatetime, then engine id: a total order). A listing of
        more than one page reads a point in time taken at its first page, because an update
        sets updatetime to now: on the live indices a memory updated before the cursor reached
        it would move ahead of the cursor and never be listed. So each memory of the scope as
        it was at the first page comes exactly once, in that version. Where there is no point
        in time (expired, refused), the listing goes on from the live indices.

        Points in time are engine contexts with a cluster-wide limit, and a listing nobody
        finishes (a dashboard's first page, a client that reads one page) never says so. So a
        point in time is opened only when a second page may follow, closed with the last page,
        kept alive ``PIT_KEEP_ALIVE_S`` after each page (not minutes more), and this process
        holds at most ``PIT_MAX_OPEN`` at once: past that, listings page the live indices."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= PAGE_MAX:
            raise InvalidInput(f"limit: a whole number 1–{PAGE_MAX}", field="limit")
        after = decode_cursor(cursor) if cursor else None
        body: dict[str, Any] = {
            "size": limit,
            "query": {"bool": {"filter": scope.filters() + compile_filters(filters)}},
            "sort": LISTING_SORT,
            "_source": {"excludes": HEAVY_FIELDS},
            "track_total_hits": False,
        }
        indices = ",".join(self.alias(scope, k) for k in kinds_of(kind))
        if after is None:  # read-your-own-writes: the first page (a point in time follows it)
            self.before_read(scope, kinds_of(kind))
        listing = listing_key(scope, kind, filters)
        after = resume(after, listing) if after else None
        got = None
        if after is None:
            hits = self._live_page(indices, body, scope)
            if len(hits) == limit:  # more pages to come: the listing's point in time, now
                got = self._pit_page(self._open_pit(indices, scope), body)
                hits = got[0] if got else hits
        else:
            got = self._pit_page(after.pit, body | {"search_after": after.after})
            if got is None:
                hits = self._live_page(indices, body | {"search_after": after.after[:2]}, scope)
            else:
                hits = got[0]
        pit = got[1] if got else None
        out = [(kind_of_index(h["_index"]), h["_source"]) for h in hits]
        if len(hits) < limit:
            self._close_pit(pit)
            return out, None
        last = hits[-1]["sort"]
        return out, encode_cursor(Cursor(last if pit else last[:2], pit, listing))

    def _live_page(self, indices: str, body: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
        with activity("listing memories"):
            resp = self.engine.search(indices, body, routing=scope.routing)
        return list(check_shards(resp, "listing memories")["hits"]["hits"])

    def _open_pit(self, indices: str, scope: Scope) -> str | None:
        """A point in time for a listing; None where this process holds ``PIT_MAX_OPEN``
        already (an expected state under many listings: debug only) or the engine will not
        open one (too many open, too old): the listing then pages the live indices."""
        if not pits.PITS.reserve():
            log.debug("listing memories without a point in time: %d held", pits.PIT_MAX_OPEN)
            return None
        pit = None
        try:
            with activity("opening a point in time"):
                pit = self.engine.open_pit(indices, pits.keep_alive(), scope.routing)
        except KememError as exc:
            log.warning("listing memories without a point in time: %s", exc)
        finally:
            pits.PITS.opened(pit)
        return pit

    def _pit_page(
        self, pit: str | None, body: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str] | None:
        """The hits and the point in time to go on with; None when it is gone (kept alive
        ``PIT_KEEP_ALIVE_S`` after each page) or unusable (then it stays counted in ``PITS``
        until its keep-alive passes: it may still be open)."""
        if pit is None:
            return None
        try:
            with activity("listing memories"):
                resp = self.engine.search_pit(pit, pits.keep_alive(), body)
            hits = check_shards(resp, "listing memories")["hits"]["hits"]
        except KememError as exc:
            log.info("listing memories from the live indices: the point in time is gone (%s)", exc)
            return None
        now_as = str(resp.get("pit_id") or pit)
        pits.PITS.kept(pit, now_as)
        return list(hits), now_as

    def _close_pit(self, pit: str | None) -> None:
        """A finished listing's point in time, released now rather than when it expires."""
        if pit is None:
            return
        try:
            with activity("closing a point in time"):
                self.engine.close_pit(pit)
        except KememError as exc:  # it expires anyway (and stays counted until then)
            log.info("closing a point in time: %s", exc)
        else:
            pits.PITS.closed(pit)
