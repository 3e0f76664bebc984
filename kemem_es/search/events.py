"""Event recall: one engine request per database, every candidate scored by one fused formula.

score = w_kw·bm25/(bm25+k) + w_vec·(1+cos)/2 + w_time·0.5^(age/half_life) + w_str·s/(s+k_s)

All four terms are computed by the engine inside a function_score (score_mode sum); the query
vector, words, ``now`` and constants travel as params / query values, never as script source.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.models import Database
from kemem_es.search.params import QueryParams
from kemem_es.store.filters import compile_filters
from kemem_es.store.scope import Scope

VECTOR_FIELD = "vector"
TIME_FIELD = "event_time"
SOURCE_EXCLUDES = [VECTOR_FIELD, "*_tok", "metadata"]

# Painless sources are constants: user input only ever reaches them through params.
KW_SCRIPT = "_score / (_score + params.k)"
STRENGTH_SCRIPT = (
    "double s = doc['strength'].size() == 0 ? 0.0 : doc['strength'].value; "
    "return s / (s + params.k);"
)
FUNCTION_ORDER = ("kw", "vec", "time", "strength")
ANN_BOOST = 1000.0  # ANN neighbours sort ahead of keyword-only candidates in the window


def scope_filters(db: Database, agent_id: str, user_id: str) -> list[dict[str, Any]]:
    """User memories are per (agent, user); official ones are shared by the agent's users
    (the rule itself lives in the store's Scope)."""
    return Scope.of(agent_id=agent_id, user_id=user_id if db == "user" else None, db=db).filters()


def request_filters(db: Database, params: QueryParams) -> list[dict[str, Any]]:
    """The scope plus the caller's filters: every candidate, ANN ones included, obeys both."""
    return scope_filters(db, params.agent_id, params.user_id) + compile_filters(params.filters)


def exclusion(params: QueryParams) -> list[dict[str, Any]]:
    """Memories already shown (the caller's ids, as returned in each hit's ``index``)."""
    return [{"terms": {"id": params.exclude_ids}}] if params.exclude_ids else []


def signal_functions(
    engine: Engine,
    params: QueryParams,
    vector: Sequence[float],
    now: datetime,
    weights: dict[str, float],
) -> list[dict[str, Any]]:
    """The function_score functions for the signals with a positive weight, in FUNCTION_ORDER."""
    out = []
    for name in FUNCTION_ORDER:
        if weights.get(name, 0.0) <= 0:
            continue
        if name == "kw":
            out.append(
                {
                    "script_score": {
                        "script": {"source": KW_SCRIPT, "params": {"k": params.bm25_k}}
                    },
                    "weight": weights[name],
                }
            )
        elif name == "vec":
            out.append(engine.vector_function(VECTOR_FIELD, vector, weights[name]))
        elif name == "time":
            decay = {
                "origin": now.strftime("%Y-%m-%dT%H:%M:%S"),
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
    if params.exclude_ids:
        query["must_not"] = exclusion(params)
    if require_keyword:
        query["minimum_should_match"] = 1
    return {"bool": query}


def window_query(
    engine: Engine,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float],
    use_ann: bool,
) -> tuple[dict[str, Any], int]:
    """Approximate path, first phase: the union of the ANN neighbours (boosted so that all of
    them sort first) and the best keyword matches. Returns the query and its window size."""
    filters = request_filters(db, params)
    should = list(clauses)
    window = params.kw_window if clauses else 0
    if use_ann:
        ann = engine.ann_query(VECTOR_FIELD, vector, params.ann_k, filters)
        should.append({"constant_score": {"filter": ann, "boost": ANN_BOOST}})
        window += params.ann_k
    query: dict[str, Any] = {"filter": filters, "should": should, "minimum_should_match": 1}
    if params.exclude_ids:
        query["must_not"] = exclusion(params)
    return {"bool": query}, max(window, params.limit)


def fused(
    engine: Engine,
    params: QueryParams,
    vector: Sequence[float],
    now: datetime,
    weights: dict[str, float],
    query: dict[str, Any],
) -> dict[str, Any]:
    """The fused score over ``query``, whose own score is the keyword BM25."""
    return {
        "function_score": {
            "query": query,
            "functions": signal_functions(engine, params, vector, now, weights),
            "score_mode": "sum",
            "boost_mode": "replace",
        }
    }


def event_body(
    engine: Engine,
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
) -> dict[str, Any]:
    """The search body for one database.

    Exact: one function_score over the whole scope, ``min_score`` as the threshold.
    Approximate: the window query picks candidates; the engine's rescore gives each of them the
    same fused score (query_weight 0, so only the fused score counts). The caller applies the
    threshold, since the engine's min_score acts before rescoring."""
    weights = weights or params.weights.model_dump()
    body: dict[str, Any] = {
        "size": size or params.limit,
        "track_total_hits": False,
        "_source": {"excludes": SOURCE_EXCLUDES},
    }
    if approx:
        use_ann = weights.get("vec", 0.0) > 0 and not require_keyword
        first, window = window_query(engine, db, params, clauses, vector, use_ann)
        # match_all in filter context: window docs that match no word still get scored.
        bm25 = {"bool": {"filter": [{"match_all": {}}], "should": clauses}}
        body["query"] = first
        body["rescore"] = {
            "window_size": max(window, size or params.limit),
            "query": {
                "rescore_query": fused(engine, params, vector, now, weights, bm25),
                "query_weight": 0.0,
                "rescore_query_weight": 1.0,
                "score_mode": "total",
            },
        }
    else:
        query = candidate_query(db, params, clauses, require_keyword)
        body["query"] = fused(engine, params, vector, now, weights, query)
        if min_score is not None and min_score > 0:
            body["min_score"] = min_score
    if params.explain:
        body["explain"] = True
    return body


def two_stage_body(
    engine: Engine,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float],
    now: datetime,
    approx: bool,
) -> dict[str, Any]:
    """Keywords + time (+ strength) rank the whole scope without the vector; the engine's
    rescore then adds the semantic term to the top ``two_stage_window`` only (``approx`` is
    moot: stage one is already cheap)."""
    w = params.weights.model_dump()
    stage1 = {k: v for k, v in w.items() if k != "vec"}
    body = event_body(engine, db, params, clauses, vector, now, False, weights=stage1)
    body["rescore"] = {
        "window_size": max(params.two_stage_window, params.limit),
        "query": {
            "rescore_query": fused(
                engine, params, vector, now, {"vec": w["vec"]}, {"match_all": {}}
            ),
            "query_weight": 1.0,
            "rescore_query_weight": 1.0,
            "score_mode": "total",
        },
    }
    return body
