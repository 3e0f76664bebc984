"""The fused score's terms as the engine computes them: function_score functions (keyword
coverage or BM25, vector, time decay, strength) or, in native scoring, script-free query
clauses for the vector and strength terms (see ``events`` for the formula)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.search.calibration import vec_scale
from kemem_es.store.layout import (
    STRENGTH_KEY_FIELD,
    STRENGTH_KEY_SCALE,
    TIME_FIELD,
    VECTOR_FIELD,
)

# Painless sources are constants: user input only ever reaches them through params.
KW_SCRIPT = "_score / (_score + params.k)"  # BM25, saturated (bm25 / rrf modes)
COVERAGE_SCRIPT = "Math.min(_score, 1.0)"  # keyword coverage (fusion, two_stage)
STRENGTH_SCRIPT = (
    "double s = doc['strength'].size() == 0 ? 0.0 : doc['strength'].value; "
    "return s / (s + params.k);"
)
FUNCTION_ORDER = ("kw", "vec", "time", "strength")
NATIVE_TERMS = ("vec", "strength")  # query clauses, not functions, in native scoring
EPOCH = "0"  # the epoch in the field's format (epoch_millis)
# (filters, k) of the vector clauses of native scoring: a candidate's cosine comes from the
# first clause that holds it (dis_max: every clause gives a document the same value).
KnnScopes = Sequence[tuple[list[dict[str, Any]], int]]


def native(dialect: Dialect) -> bool:
    return dialect.native


def vector_clauses(
    dialect: Dialect,
    params: QueryParams,
    vectors: Sequence[Sequence[float]],
    weight: float,
    scopes: KnnScopes,
) -> dict[str, Any]:
    """Native scoring: a clause worth ``weight`` × the best vector's (1+cos)/2 / span over the
    candidates of ``scopes`` (script-free ``vector_function``, max over ``vectors``)."""
    _, span = vec_scale(params)
    clauses = [
        dialect.vector_clause(VECTOR_FIELD, v, k, filters, weight / span)
        for v in vectors
        for filters, k in scopes
    ]
    return clauses[0] if len(clauses) == 1 else {"dis_max": {"queries": clauses}}


def strength_clause(params: QueryParams, weight: float) -> dict[str, Any]:
    """Native scoring: ``weight`` × s / (s + k) from the strength's key (store.documents)."""
    pivot = max(round(STRENGTH_KEY_SCALE / params.strength_k), 1)
    return {
        "distance_feature": {
            "field": STRENGTH_KEY_FIELD,
            "origin": EPOCH,
            "pivot": f"{pivot}ms",
            "boost": weight,
        }
    }


def native_clauses(
    dialect: Dialect,
    params: QueryParams,
    vector: Sequence[float],
    weights: dict[str, float],
    scopes: KnnScopes,
) -> list[dict[str, Any]]:
    """The vec and strength terms as query clauses (native scoring), for positive weights."""
    out = []
    if weights.get("vec", 0.0) > 0:
        out.append(vector_clauses(dialect, params, [vector], weights["vec"], scopes))
    if weights.get("strength", 0.0) > 0:
        out.append(strength_clause(params, weights["strength"]))
    return out


def sentence_clause(
    dialect: Dialect,
    params: QueryParams,
    parts: Sequence[Sequence[float]],
    weight: float,
    scopes: KnnScopes = (),
) -> dict[str, Any]:
    """A query clause worth ``weight`` × the best sentence's vec (before the offset): one vector
    function per sentence, the engine keeps the max."""
    if native(dialect):
        return vector_clauses(dialect, params, parts, weight, scopes)
    _, span = vec_scale(params)
    return {
        "function_score": {
            "query": {"match_all": {}},
            "functions": [dialect.vector_function(VECTOR_FIELD, p, weight / span) for p in parts],
            "score_mode": "max",
            "boost_mode": "replace",
        }
    }


def engine_instant(t: datetime) -> str:
    """``t`` as records are stored: an aware time keeps its offset and the engine computes its
    instant (never cut off: 03:00+08:00 once decayed from 03:00 UTC), a naive one is read as
    UTC. Not converted here: at the time rule's edges the UTC instant leaves years 1000–9999
    (9999-12-31T23:00-01:00 overflowed Python's datetime, 1000-01-01T00:00+18:00 became year
    999, which the engine cannot parse), while the engine takes both, as it takes records."""
    return t.isoformat(timespec="seconds")


def signal_functions(
    dialect: Dialect,
    params: QueryParams,
    vector: Sequence[float],
    now: datetime,
    weights: dict[str, float],
    coverage: bool = True,
) -> list[dict[str, Any]]:
    """The function_score functions for the signals with a positive weight, in FUNCTION_ORDER
    (native scoring: vec and strength are query clauses instead, ``native_clauses``)."""
    out = []
    skip = NATIVE_TERMS if native(dialect) else ()
    for name in FUNCTION_ORDER:
        if weights.get(name, 0.0) <= 0 or name in skip:
            continue
        if name == "kw":
            script = (
                {"source": COVERAGE_SCRIPT}
                if coverage
                else {"source": KW_SCRIPT, "params": {"k": params.bm25_k}}
            )
            out.append({"script_score": {"script": script}, "weight": weights[name]})
        elif name == "vec":
            _, span = vec_scale(params)
            out.append(dialect.vector_function(VECTOR_FIELD, vector, weights[name] / span))
        elif name == "time":
            decay = {
                "origin": engine_instant(now),
                "scale": f"{max(round(params.half_life_days * 24), 1)}h",
                "decay": 0.5,
            }
            out.append({"exp": {TIME_FIELD: decay}, "weight": weights[name]})
        elif name == "strength":
            out.append(
                {
                    "script_score": {
                        "script": {"source": STRENGTH_SCRIPT, "params": {"k": params.strength_k}}
                    },
                    "weight": weights[name],
                }
            )
    return out
