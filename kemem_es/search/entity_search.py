"""The entity search of a query (both databases' indices in one request), its scored hits in
tier order, and the entities the answer shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.client import Search
from kemem_es.engine.errors import raise_engine_error
from kemem_es.search import events as ev
from kemem_es.search.clauses import SearchWord
from kemem_es.search.entities import TIER_OF_KIND, entity_body, entity_offset, shown_limit
from kemem_es.search.event_search import EventSearch
from kemem_es.search.hits import instant
from kemem_es.store.layout import DATABASES, index_alias


def shown_entities(
    params: QueryParams, scored: Sequence[tuple[dict[str, Any], float]]
) -> list[tuple[dict[str, Any], float]]:
    """The entities the answer shows: the best ``entity_limit`` (``limit`` when unset) by
    evidence among those reaching ``entity_threshold``, in ``scored``'s (tier) order. The
    rest of ``scored`` is the bridge's window only."""
    eligible = [hs for hs in scored if hs[1] >= params.entity_threshold]
    best = sorted(eligible, key=lambda hs: -float(hs[0]["_score"]))[: shown_limit(params)]
    keep = {id(hs[0]) for hs in best}
    return [hs for hs in eligible if id(hs[0]) in keep]


class EntitySearch(EventSearch):
    """The entity search of a query and its scored hits."""

    def search_entities(
        self, params: QueryParams, words: Sequence[SearchWord], vector: Sequence[float]
    ) -> list[tuple[dict[str, Any], float]]:
        """(hit, score) for the entities of the search's window whose evidence reaches
        ``entity_threshold`` or ``bridge_threshold``, in tier order (docs/SPEC.md §2 step 6),
        best evidence first within a tier, then newest: the bridge's candidates
        (``shown_entities`` picks what the answer shows)."""
        search = self.entity_search(params, words, vector)
        if search is None:
            return []
        return self.score_entities(params, self.engine.msearch([search])[0])

    def entity_search(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        slots: Sequence[dict[str, Any]] = (),
    ) -> Search | None:
        """The entity search of a query (both databases' indices, a missing one skipped), or
        None when there is nothing to search. It runs even when no entity is to be shown
        (``entity_limit=0``): the bridge still needs its window."""
        if not words:
            return None
        body = entity_body(params, words, self.engine.dialect, vector, slots)
        if body is None:
            return None
        prefix = self.engine.settings.index_prefix
        indices = ",".join(index_alias(prefix, db, "entities") for db in DATABASES)
        routing = ",".join(ev.routing(db, params) for db in DATABASES)
        return (indices, body, routing, True)

    def score_entities(
        self, params: QueryParams, resp: dict[str, Any]
    ) -> list[tuple[dict[str, Any], float]]:
        """``search_entities``' answer from the response to ``entity_search``."""
        if "error" in resp:
            raise_engine_error(resp)
        offset = entity_offset(params, with_vector=True)
        scored = []
        for hit in resp["hits"]["hits"]:
            score = ev.calibrated(float(hit["_score"]), offset)
            if score >= min(params.entity_threshold, params.bridge_threshold) and score > 0:
                scored.append((hit, score))
        scored.sort(
            key=lambda hs: (
                TIER_OF_KIND[hs[0]["_source"]["kind"]].rank,
                -round(hs[1], 4),
                -instant(hs[0]["_source"].get("updatetime")),
            )
        )
        return scored
