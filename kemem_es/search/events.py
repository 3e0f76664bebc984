"""Event recall: one engine request per database, every candidate scored by one fused formula.

score = w_kw·kw + w_vec·vec + w_time·0.5^(age/half_life) + w_str·s/(s+k_s), where

- kw  = keyword coverage: the share of the query's weighted words the memory holds (see
        ``clauses.coverage_clauses``), capped at 1 — relative to what this query could achieve,
        independent of other tenants' BM25 statistics. (The bm25 and rrf modes keep BM25,
        saturated as bm25/(bm25+k).) A query with ``proximity_share`` (latin script by default)
        adds up to that much for pairs of its strongest words found close together in the
        memory's text (``clauses.proximity_clauses``).
- vec = (cos − floor)/(ceil − floor): the cosine placed on the model's own scale (m3e: 0.62 is
        what unrelated text scores, 0.84 a close paraphrase). The engine's vector function gives
        (1+cos)/2; an affine map of it is the function's weight plus a constant ``offset`` that
        the caller subtracts (and adds to min_score) — the order is the engine's either way.

- For a multi-sentence utterance the vector term is (1 − s)·vec(whole query) + s·max_j
  vec(sentence j) (s = ``sentence_weight``): the engine takes the max in a nested
  function_score (score_mode max) added as a query clause, so the offset stays the same.

All terms are computed by the engine inside a function_score (score_mode sum); the query
vector, words, ``now`` and constants travel as params / query values, never as script source.

Native scoring (``dialect.scoring == "native"``: KEMEM_SCORING, or a cluster without Painless)
computes the same sum without any script: the vector term is a ``knn`` query clause (its score
is (1+cos)/2 on Elasticsearch, 1+cos on OpenSearch's inner-product graph: the clause's boost
carries the scale), exact over every candidate because its filter holds at most
``Dialect.NATIVE_K`` of them (the engine then compares them all rather than walking the graph);
strength is a ``distance_feature`` on ``strength_key`` (a date SCALE/s ms after the epoch:
pivot/(pivot + SCALE/s) = s/(s+k) with pivot SCALE/k); keyword coverage and the time decay
were script-free already. See docs/engines.md for where the two can differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.models import Database
from kemem_es.search.calibration import (
    calibrated,
    saturated,
    sentence_share,
    vec_offset,
    vec_scale,
)
from kemem_es.search.candidates import (
    ANN_BOOST,
    candidate_query,
    exact_scopes,
    window_query,
    window_scopes,
)
from kemem_es.search.event_scope import (
    exclusion,
    keyword_filter,
    query_scope,
    request_filters,
    routing,
    scope_filters,
)
from kemem_es.search.fused_score import _function_score, fused
from kemem_es.search.signals import (
    COVERAGE_SCRIPT,
    EPOCH,
    FUNCTION_ORDER,
    KW_SCRIPT,
    NATIVE_TERMS,
    STRENGTH_SCRIPT,
    KnnScopes,
    engine_instant,
    native,
    native_clauses,
    sentence_clause,
    signal_functions,
    strength_clause,
    vector_clauses,
)

# The scoring parts live in their own modules (#38); every name stays importable from here.
__all__ = [
    "ANN_BOOST",
    "COVERAGE_SCRIPT",
    "EPOCH",
    "FUNCTION_ORDER",
    "KW_SCRIPT",
    "NATIVE_TERMS",
    "SOURCE_FIELDS",
    "STRENGTH_SCRIPT",
    "KnnScopes",
    "_function_score",
    "calibrated",
    "candidate_query",
    "engine_instant",
    "event_body",
    "exact_scopes",
    "exclusion",
    "fused",
    "keyword_filter",
    "native",
    "native_clauses",
    "query_scope",
    "request_filters",
    "routing",
    "saturated",
    "scope_filters",
    "sentence_clause",
    "sentence_share",
    "signal_functions",
    "strength_clause",
    "two_stage_body",
    "vec_offset",
    "vec_scale",
    "vector_clauses",
    "window_query",
    "window_scopes",
]

# What assembling an EventHit reads, and nothing else: the hits' JSON stays small.
SOURCE_FIELDS = [
    "id",
    "description",
    "deepinsight",
    "keywords",
    "place",
    "scene",
    "created_at",
    "updatetime",
    "slots",
    "subject",
    "superseded_by",
]


def event_body(
    dialect: Dialect,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float],
    now: datetime,
    approx: bool,
    weights: dict[str, float] | None = None,
    size: int | None = None,
    min_score: float | None = None,
    require_keyword: bool = False,
    coverage: bool = True,
    ann_filtered: bool = True,
    parts: Sequence[Sequence[float]] = (),
    proximity: Sequence[dict[str, Any]] = (),
    earlier: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The search body for one database (``clauses``: coverage clauses when ``coverage``, else
    BM25 clauses; ``proximity``: word-pair clauses that add to the coverage of the memories
    scored, but do not choose the approximate path's keyword window: over a heavy user's scope
    they would cost more than the rest of the request; ``earlier``: the earlier turns' coverage
    clauses, the same — the utterance's words and the window vector (which holds the earlier
    turns) choose the window, unless the utterance has no word of its own).

    Exact: one function_score over the whole scope, ``min_score`` as the threshold (on the
    calibrated score: the vector offset is added here).
    Approximate: the window query picks candidates; the engine's rescore gives each of them the
    same fused score (query_weight 0, so only the fused score counts). The caller applies the
    threshold, since the engine's min_score acts before rescoring."""
    weights = weights or params.weights.model_dump()
    body: dict[str, Any] = {
        "size": size or params.limit,
        "track_total_hits": False,
        "_source": SOURCE_FIELDS,
    }
    scored = [*clauses, *earlier]
    if approx:
        use_ann = weights.get("vec", 0.0) > 0 and not require_keyword
        # the earlier turns' words match much of a heavy user's scope (+45-55 % of a chat
        # turn's event search at 100k, bench/results/2026-11-29-scale §3)
        picks = clauses if clauses else scored
        first, window = window_query(
            dialect, db, params, picks, vector, use_ann, ann_filtered, size or params.limit
        )
        # match_all in filter context: window docs that match no word still get scored.
        bm25 = {"bool": {"filter": [{"match_all": {}}], "should": [*scored, *proximity]}}
        body["query"] = first
        scopes = window_scopes(dialect, db, params, picks, use_ann, ann_filtered, size)
        body["rescore"] = {
            "window_size": max(window, size or params.limit),
            "query": {
                "rescore_query": fused(
                    dialect, params, vector, now, weights, bm25, coverage, parts, scopes
                ),
                "query_weight": 0.0,
                "rescore_query_weight": 1.0,
                "score_mode": "total",
            },
        }
    else:
        query = candidate_query(db, params, [*scored, *proximity], require_keyword)
        scopes = exact_scopes(dialect, db, params, scored if require_keyword else None)
        body["query"] = fused(dialect, params, vector, now, weights, query, coverage, parts, scopes)
        if min_score is not None and min_score > 0:
            body["min_score"] = min_score + vec_offset(params, weights)
            if native(dialect) and not coverage and set(weights) == {"kw"} and min_score < 1:
                # bm25 / (bm25 + k) >= t  <=>  bm25 >= k t / (1 - t)
                body["min_score"] = params.bm25_k * min_score / (1.0 - min_score)
    if params.explain:
        body["explain"] = True
    return body


def two_stage_body(
    dialect: Dialect,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float],
    now: datetime,
    approx: bool,
    parts: Sequence[Sequence[float]] = (),
    proximity: Sequence[dict[str, Any]] = (),
    size: int | None = None,
) -> dict[str, Any]:
    """Keywords choose the candidates: a memory must share a word with the query (as in bm25),
    and keywords + time (+ strength) rank them without the vector; the engine's rescore then
    adds the semantic term to the top ``two_stage_window`` only (``approx`` is moot: stage one
    is already cheap). A memory the keywords miss never surfaces, in a scope of any size: that
    is what sets it apart from fusion (without the requirement, a scope no larger than the
    window gave fusion's own list). Scores outside the window lack the vector term
    (calibrated, they read 0)."""
    w = params.weights.model_dump()
    stage1 = {k: v for k, v in w.items() if k != "vec"}
    body = event_body(
        dialect, db, params, clauses, vector, now, False, weights=stage1, size=size,
        proximity=proximity, require_keyword=True,
    )  # fmt: skip
    body["rescore"] = {
        "window_size": max(params.two_stage_window, params.limit, size or 0),
        "query": {
            "rescore_query": fused(
                dialect,
                params,
                vector,
                now,
                {"vec": w["vec"]},
                {"match_all": {}},
                parts=parts,
                scopes=exact_scopes(dialect, db, params, clauses),
            ),
            "query_weight": 1.0,
            "rescore_query_weight": 1.0,
            "score_mode": "total",
        },
    }
    return body
