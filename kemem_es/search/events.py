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


def scope_filters(db: Database, agent_id: str, user_id: str) -> list[dict[str, Any]]:
    """User memories are per (agent, user); official ones are shared by the agent's users."""
    if db == "user":
        return [{"term": {"agent_id": agent_id}}, {"term": {"user_id": user_id}}]
    return [{"term": {"agent_id": agent_id}}, {"term": {"db": "official"}}]


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
    engine: Engine,
    db: Database,
    params: QueryParams,
    clauses: list[dict[str, Any]],
    vector: Sequence[float] | None,
    approx: bool,
    require_keyword: bool = False,
) -> dict[str, Any]:
    """Which memories get scored. Exact: every memory in scope (keyword-only and vector-only hits
    both surface). Approximate: the union of ANN neighbours and keyword matches."""
    filters = scope_filters(db, params.agent_id, params.user_id)
    should = list(clauses)
    if approx and vector is not None:
        # Boost 0: ANN only adds candidates; it must not leak into the BM25 signal.
        ann = engine.ann_query(VECTOR_FIELD, vector, params.ann_k, filters)
        should.append({"constant_score": {"filter": ann, "boost": 0.0}})
    query: dict[str, Any] = {"filter": filters, "should": should}
    if params.exclude_ids:
        query["must_not"] = [{"ids": {"values": params.exclude_ids}}]
    if approx or require_keyword:
        query["minimum_should_match"] = 1
    return {"bool": query}


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
    """The full search body for one database."""
    body: dict[str, Any] = {
        "size": size or params.limit,
        "track_total_hits": False,
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {
            "function_score": {
                "query": candidate_query(
                    engine, db, params, clauses, vector, approx, require_keyword
                ),
                "functions": signal_functions(
                    engine, params, vector, now, weights or params.weights.model_dump()
                ),
                "score_mode": "sum",
                "boost_mode": "replace",
            }
        },
    }
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
    """Keywords + time (+ strength) pick the survivors; the engine's rescore then adds the
    semantic term to the top ``two_stage_window`` of them only."""
    w = params.weights.model_dump()
    stage1 = {k: v for k, v in w.items() if k != "vec"}
    body = event_body(engine, db, params, clauses, vector, now, approx, weights=stage1)
    body["rescore"] = {
        "window_size": max(params.two_stage_window, params.limit),
        "query": {
            "rescore_query": {
                "function_score": {
                    "query": {"match_all": {}},
                    "functions": signal_functions(engine, params, vector, now, {"vec": w["vec"]}),
                    "score_mode": "sum",
                    "boost_mode": "replace",
                }
            },
            "query_weight": 1.0,
            "rescore_query_weight": 1.0,
            "score_mode": "total",
        },
    }
    return body
