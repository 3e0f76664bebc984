"""Which memories an event search scores: the exact path's whole scope, the approximate
path's window (ANN neighbours and the best keyword matches), and where native scoring's
vector clauses look on each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.models import Database
from kemem_es.search.event_scope import exclusion, keyword_filter, request_filters
from kemem_es.search.signals import KnnScopes
from kemem_es.store.layout import VECTOR_FIELD

ANN_BOOST = 1000.0  # ANN neighbours sort ahead of keyword-only candidates in the window


def candidate_query(
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    require_keyword: bool = False,
) -> dict[str, Any]:
    """Exact path: every memory in scope is a candidate (so keyword-only and vector-only hits
    both surface), the keyword clauses only add their BM25."""
    query: dict[str, Any] = {
        "filter": request_filters(db, params),
        "should": list(clauses),
    }
    if excluded := exclusion(db, params):
        query["must_not"] = excluded
    if require_keyword:
        query["minimum_should_match"] = 1
    return {"bool": query}


def window_query(
    dialect: Dialect,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float],
    use_ann: bool,
    ann_filtered: bool = True,
    size: int = 0,
) -> tuple[dict[str, Any], int]:
    """Approximate path, first phase: the union of the ANN neighbours (boosted so that all of
    them sort first) and the best keyword matches. Returns the query and its window size.
    The ANN gives at least ``size`` neighbours (the hits the request returns): with ``ann_k``
    alone, an utterance without search words got at most 50 memories whatever the limit.
    ``ann_filtered=False``: the caller knows the scope is the whole index, so the ANN clause
    goes without its (then useless, but per-query costly) copy of the scope filter."""
    filters = request_filters(db, params)
    should = list(clauses)
    window = params.kw_window if clauses else 0
    if use_ann:
        k = max(params.ann_k, size, params.limit)
        ann = dialect.ann_query(VECTOR_FIELD, vector, k, filters if ann_filtered else [])
        should.append({"constant_score": {"filter": ann, "boost": ANN_BOOST}})
        window += k
    query: dict[str, Any] = {"filter": filters, "should": should, "minimum_should_match": 1}
    if excluded := exclusion(db, params):
        query["must_not"] = excluded
    return {"bool": query}, max(window, params.limit)


def exact_scopes(
    dialect: Dialect,
    db: Database,
    params: QueryParams,
    clauses: Sequence[dict[str, Any]] | None = None,
) -> KnnScopes:
    """Native scoring, exact path: one vector clause over the request's scope (and, with
    ``clauses``, only what matches a word: every candidate of a query that requires one)."""
    filters = request_filters(db, params) + keyword_filter(clauses or [])
    return [(filters, dialect.NATIVE_K)]


def window_scopes(
    dialect: Dialect,
    db: Database,
    params: QueryParams,
    clauses: Sequence[dict[str, Any]],
    use_ann: bool,
    ann_filtered: bool,
    size: int | None,
) -> KnnScopes:
    """Native scoring, approximate path: the window's candidates are its ANN neighbours (the
    same graph search as the window's own clause, so the same documents) and keyword matches
    (every one of them, up to NATIVE_K a shard)."""
    filters = request_filters(db, params)
    scopes: list[tuple[list[dict[str, Any]], int]] = []
    if use_ann:
        k = max(params.ann_k, size or params.limit, params.limit)
        scopes.append((filters if ann_filtered else [], k))
    if clauses:
        scopes.append((filters + keyword_filter(clauses), dialect.NATIVE_K))
    return scopes or [(filters, dialect.NATIVE_K)]
