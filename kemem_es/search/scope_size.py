"""Scope sizes, counted by the engine and cached a minute: whether a database's events are
scored exactly or through the ANN ∪ keyword window, and whether the ANN clause needs the
scope as its own filter."""

from __future__ import annotations

import time

from kemem_es.contract.params import QueryParams
from kemem_es.models import Database
from kemem_es.search import events as ev
from kemem_es.search.searcher_base import SearcherBase, _missing_index
from kemem_es.store.layout import index_alias

# Up to this many memories in scope, every one is scored (exact); measured at 20k in scope on
# 2 cores: exact 13 ms vs approximate 5 ms of engine time.
EXACT_MAX_DOCS = 2_000
COUNT_TTL_S = 60.0


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
            try:
                n_scope = self.engine.count(alias, scope, routing)
                cached = (time.monotonic(), n_scope, self.engine.count(alias, routing=routing))
            except Exception as err:  # a missing index: the event search will say so
                if not _missing_index(err):
                    raise
                return 0, 0
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
