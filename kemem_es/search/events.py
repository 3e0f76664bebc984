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
from kemem_es.search.facts import recall_filters
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import (
    STRENGTH_KEY_FIELD,
    STRENGTH_KEY_SCALE,
    TIME_FIELD,
    VECTOR_FIELD,
)
from kemem_es.store.scope import Scope

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
ANN_BOOST = 1000.0  # ANN neighbours sort ahead of keyword-only candidates in the window


def query_scope(db: Database, agent_id: str, user_id: str) -> Scope:
    """User memories are per (agent, user); official ones are shared by the agent's users
    (the rule itself lives in the store's Scope)."""
    return Scope.of(agent_id=agent_id, user_id=user_id if db == "user" else None, db=db)


def scope_filters(db: Database, agent_id: str, user_id: str) -> list[dict[str, Any]]:
    return query_scope(db, agent_id, user_id).filters()


def routing(db: Database, params: QueryParams) -> str:
    """The shard(s) of the query's scope in ``db``'s indices."""
    return query_scope(db, params.agent_id, params.user_id).routing


def request_filters(db: Database, params: QueryParams) -> list[dict[str, Any]]:
    """The scope plus the caller's filters: every candidate, ANN ones included, obeys both."""
    return [
        *scope_filters(db, params.agent_id, params.user_id),
        *compile_filters(params.filters),
        *recall_filters(params),  # superseded facts: only for a question about the past
    ]


def exclusion(db: Database, params: QueryParams) -> list[dict[str, Any]]:
    """The user's events the prompt already shows (docs/SPEC.md §2: the overview timeline), by
    the ids returned in each hit's ``index``. Only in the user's database: an id is unique
    within its index, so the agent's official event with the same id is another memory."""
    return [{"terms": {"id": params.exclude_ids}}] if params.exclude_ids and db == "user" else []


def vec_scale(params: QueryParams, entity: bool = False) -> tuple[float, float]:
    """(lo, span) on the engine's (1+cos)/2 scale: vec = (s − lo) / span (``entity``: the
    entity evidence's own calibration)."""
    floor, ceil = (
        (params.entity_vec_floor, params.entity_vec_ceil)
        if entity
        else (params.vec_floor, params.vec_ceil)
    )
    lo = (1.0 + floor) / 2.0
    return lo, (1.0 + ceil) / 2.0 - lo


def vec_offset(params: QueryParams, weights: dict[str, float]) -> float:
    """What the engine's raw sum carries above the calibrated score (subtract it)."""
    w = weights.get("vec", 0.0)
    if w <= 0:
        return 0.0
    lo, span = vec_scale(params)
    return w * lo / span


def saturated(raw: float, k: float) -> float:
    """Native scoring's raw BM25 as the script scores it: bm25 / (bm25 + k)."""
    return raw / (raw + k) if raw > 0 else 0.0


def calibrated(raw: float, offset: float) -> float:
    """The engine's raw fused score → the calibrated score in [0, 1]."""
    return min(max(raw - offset, 0.0), 1.0)


def sentence_share(
    params: QueryParams, weights: dict[str, float], parts: Sequence[Sequence[float]]
) -> float:
    """The share of the vector weight that goes to the best sentence (0: no sentences)."""
    return params.sentence_weight if parts and weights.get("vec", 0.0) > 0 else 0.0


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


def keyword_filter(clauses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Matches what at least one of the keyword clauses matches (none: no filter)."""
    if not clauses:
        return []
    return [{"bool": {"should": list(clauses), "minimum_should_match": 1}}]


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
) -> dict[str, Any]:
    """The search body for one database (``clauses``: coverage clauses when ``coverage``, else
    BM25 clauses; ``proximity``: word-pair clauses that add to the coverage of the memories
    scored, but do not choose the approximate path's keyword window: over a heavy user's scope
    they would cost more than the rest of the request).

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
    if approx:
        use_ann = weights.get("vec", 0.0) > 0 and not require_keyword
        first, window = window_query(
            dialect, db, params, clauses, vector, use_ann, ann_filtered, size or params.limit
        )
        # match_all in filter context: window docs that match no word still get scored.
        bm25 = {"bool": {"filter": [{"match_all": {}}], "should": [*clauses, *proximity]}}
        body["query"] = first
        scopes = window_scopes(dialect, db, params, clauses, use_ann, ann_filtered, size)
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
        query = candidate_query(db, params, [*clauses, *proximity], require_keyword)
        scopes = exact_scopes(dialect, db, params, clauses if require_keyword else None)
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
