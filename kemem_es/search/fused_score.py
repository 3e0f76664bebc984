"""The fused score over a query whose own score is the keyword evidence: the signal
functions summed with it, the sentence and native clauses added (see ``events``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.search.calibration import sentence_share
from kemem_es.search.signals import (
    KnnScopes,
    native,
    native_clauses,
    sentence_clause,
    signal_functions,
)


def fused(
    dialect: Dialect,
    params: QueryParams,
    vector: Sequence[float],
    now: datetime,
    weights: dict[str, float],
    query: dict[str, Any],
    coverage: bool = True,
    parts: Sequence[Sequence[float]] = (),
    scopes: KnnScopes = (),
) -> dict[str, Any]:
    """The fused score over ``query``, whose own score is the keyword evidence.

    Coverage needs no script: the query's own score, scaled by its boost to w_kw, is summed with
    the other functions (``boost_mode: sum``), so no painless runs per document for it. BM25
    (bm25/rrf modes) keeps its saturation script. ``parts``: the sentence vectors, whose best
    match takes ``sentence_weight`` of the vector term as a query clause (summed by the bool).
    ``scopes``: where native scoring's vector clauses look (every candidate of ``query``)."""
    w_kw = weights.get("kw", 0.0)
    if native(dialect) and not coverage and set(weights) == {"kw"}:
        return query  # raw BM25: saturated by the caller (``saturated``), the order is the same
    share = sentence_share(params, weights, parts)
    if share and not coverage and w_kw > 0:
        share = 0.0  # the BM25 script reads the query's own score: no clause may add to it
    weights = dict(weights)
    extra: list[dict[str, Any]] = []  # clauses summed with the query's score
    if share:
        extra.append(sentence_clause(dialect, params, parts, weights["vec"] * share, scopes))
        weights["vec"] *= 1.0 - share
    if native(dialect):
        extra += native_clauses(dialect, params, vector, weights, scopes)
    if coverage and w_kw > 0:
        rest = {k: v for k, v in weights.items() if k != "kw"}
        functions = signal_functions(dialect, params, vector, now, rest, coverage)
        scored: dict[str, Any] = {"bool": {"must": [query], "boost": w_kw}}
        if extra:
            scored = {"bool": {"must": [scored], "should": extra}}
        return _function_score(scored, functions, "sum")
    functions = signal_functions(dialect, params, vector, now, weights, coverage)
    if extra:  # the query only selects; the clauses are its score, summed
        return _function_score({"bool": {"filter": [query], "should": extra}}, functions, "sum")
    return _function_score(query, functions, "replace")


def _function_score(
    query: dict[str, Any], functions: list[dict[str, Any]], boost_mode: str
) -> dict[str, Any]:
    """``query`` with ``functions`` summed (``boost_mode`` sum) or instead of its score
    (replace); without functions, the query itself (with sum) or a constant 0 (replace)."""
    if not functions:
        if boost_mode == "sum":
            return query
        return {"constant_score": {"filter": query, "boost": 0.0}}
    return {
        "function_score": {
            "query": query,
            "functions": functions,
            "score_mode": "sum",
            "boost_mode": boost_mode,
        }
    }
