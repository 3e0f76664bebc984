"""Scope sizes, counted by the engine and cached a minute: whether a database's events are
scored exactly or through the ANN ∪ keyword window, and whether the ANN clause needs the
scope as its own filter."""

from __future__ import annotations

import time
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.client import Search
from kemem_es.engine.errors import check_shards
from kemem_es.errors import EngineUnavailable
from kemem_es.models import Database
from kemem_es.search import events as ev
from kemem_es.search.searcher_base import SearcherBase, _missing_index
from kemem_es.store.layout import index_alias

# Up to this many memories in scope, every one is scored (exact); measured at 20k in scope on
# 2 cores: exact 13 ms vs approximate 5 ms of engine time.
EXACT_MAX_DOCS = 2_000
COUNT_TTL_S = 60.0


def _total(resp: dict[str, Any]) -> int:
    """The exact hit count of a size-0 search in an msearch answer, as ``Engine.count`` gives
    it: an error (a missing index) raised, a partial count refused (``check_shards``)."""
    if "error" in resp:
        raise EngineUnavailable(f"counting: {resp['error']}")
    total = check_shards(resp, "counting")["hits"]["total"]
    return int(total["value"] if isinstance(total, dict) else total)


class ScopeSizes(SearcherBase):
    """Scope sizes counted by the engine, and the search path they choose."""

    def _approx(self, db: Database, params: QueryParams) -> bool:
        """auto: exact scoring while the scope is small, the ANN ∪ keyword window beyond.
        Scope sizes are counted by the engine and cached for a minute."""
        if params.path != "auto":
            return params.path == "approx"
        return self._scope_counts(db, params)[0] > EXACT_MAX_DOCS

    def _scope_counts(self, db: Database, params: QueryParams) -> tuple[int, int]:
        """(memories in scope, memories on the scope's shard), counted by the engine, cached a
        minute."""
        alias = index_alias(self.engine.settings.index_prefix, db, "events")
        user = params.user_id if db == "user" else None
        key = (alias, params.agent_id, user, repr(params.filters))
        cached = self._counts.get(key)
        if cached is None or time.monotonic() - cached[0] > COUNT_TTL_S:
            scope = {"bool": {"filter": ev.request_filters(db, params)}}
            routing = ev.routing(db, params)
            # both counts in one round trip (issue 42: a new scope's first query made two)
            counts: list[Search] = [
                (alias, {"size": 0, "track_total_hits": True, "query": scope}, routing),
                (alias, {"size": 0, "track_total_hits": True}, routing),
            ]
            try:
                n_scope, n_shard = (_total(r) for r in self.engine.msearch(counts))
            except Exception as err:  # a missing index: the event search will say so
                if not _missing_index(err):
                    raise
                return 0, 0
            cached = (time.monotonic(), n_scope, n_shard)
            self._counts[key] = cached
        return cached[1], cached[2]

    def _ann_filtered(self, db: Database, params: QueryParams, approx: bool) -> bool:
        """Whether the ANN clause needs the scope as its own filter. Not when the scope is all
        its shard holds (one agent's official db): the filter then removes nothing, and building
        it costs a pass over every document (~6 ms a query at 1M). The window's own filter
        still applies, so a memory written outside the scope within the count's minute can
        only take an ANN slot, never be returned."""
        if not approx:
            return True
        n_scope, n_index = self._scope_counts(db, params)
        return n_scope < n_index
