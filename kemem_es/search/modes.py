"""What each query mode sends and what its scores are made of: fusion and two_stage score
keyword coverage, bm25 and rrf keep BM25 (saturated), vector scores the cosine alone; rrf sends
one list per signal and merges them by rank (``fusion.rrf_merge``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.models import Database
from kemem_es.search import anchor, topic_shift
from kemem_es.search import events as ev

# Hits in each list that rrf fuses, the same at every limit up to it (as Elasticsearch's
# rank_window_size): a memory ranked 30th in one list gets its share at limit 3 as at limit 20,
# so the answer for limit k is the first k of a larger limit's. 40 is what limit 10, the
# benchmark's, fused before (4·limit).
RRF_WINDOW = 40


class BodyArgs(NamedTuple):
    """What every event body of one database is built from (``events.event_body``'s
    positional arguments)."""

    dialect: Dialect
    db: Database
    params: QueryParams
    clauses: list[dict[str, Any]]
    vector: Sequence[float]
    now: datetime
    approx: bool


def words_first(params: QueryParams, has_words: bool) -> bool:
    """Fusion whose words nominate the candidates (``vector_candidates`` off: a model that
    tells this script's meanings apart poorly, by its calibration): one body for the memories
    a word matches, and one whose hits not among them fill the limit after them
    (``event_search.rank_events``). A query without a word has only the vector to go by."""
    return params.mode == "fusion" and not params.vector_candidates and has_words


def vector_only_reach(params: QueryParams) -> float:
    """The best calibrated score a memory that no search word matches can reach: its vector
    term at cosine 1, the time and strength terms at their most."""
    w = params.weights
    lo, hi = params.vec_floor, params.vec_ceil
    return w.vec * (1.0 - lo) / (hi - lo) + w.time + w.strength


def mode_bodies(
    args: BodyArgs,
    parts: Sequence[Sequence[float]] = (),
    ann_filtered: bool = True,
    proximity: Sequence[dict[str, Any]] = (),
    earlier: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The event search bodies of one database for the chosen mode. Every mode with a vector
    term gets the sentence vectors (``parts``); the coverage modes (fusion, two_stage) the
    proximity clauses, and the window and vector codes that anchor feedback reorders
    (``anchor``); fusion the earlier turns' coverage clauses (``earlier``) apart from the
    utterance's (``args.clauses``), the others have them among ``args.clauses``."""
    params, db = args.params, args.db
    threshold = params.score_threshold
    size = anchor.request_size(params, db)
    if params.mode == "fusion":
        # words first: the memories a word matches, then (a second body, only when a memory
        # no word matches could clear the threshold) the vector's picks filling the limit
        requires = [False]
        if words_first(params, bool(args.clauses or earlier)):
            requires = [True, False] if threshold <= vector_only_reach(params) else [True]
        return [
            ev.event_body(
                *args,
                size=size,
                min_score=threshold,
                parts=parts,
                ann_filtered=ann_filtered,
                proximity=proximity,
                earlier=earlier,
                require_keyword=require,
            )
            | anchor.code_fields(params, db, topic_shift.is_named(earlier))
            for require in requires
        ]
    if params.mode == "bm25":
        kw_only = {"kw": 1.0}
        return [
            ev.event_body(
                *args, weights=kw_only, min_score=threshold, require_keyword=True, coverage=False
            )
        ]
    if params.mode == "vector":
        return [
            ev.event_body(
                *args,
                weights={"vec": 1.0},
                min_score=threshold,
                parts=parts,
                ann_filtered=ann_filtered,
            )
        ]
    if params.mode == "two_stage":
        body = ev.two_stage_body(*args, parts=parts, proximity=proximity, size=size)
        return [body | anchor.code_fields(params, db)]
    window = max(RRF_WINDOW, params.limit)
    return [
        ev.event_body(
            *args, weights={"kw": 1.0}, size=window, require_keyword=True, coverage=False
        ),
        ev.event_body(
            *args, weights={"vec": 1.0}, size=window, parts=parts, ann_filtered=ann_filtered
        ),
    ]
