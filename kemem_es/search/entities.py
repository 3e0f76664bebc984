"""Entity recall in docs/SPEC.md §2 step 6's priority tiers, scored by evidence.

All four tiers are one search over the user's and the official entity indices. Candidates are
the entities a search word matches on their tier's fields (descriptions for tier 2, entity names
for tier 3: clauses filtered to those tiers' kinds). Each candidate is scored by the engine on
the evidence that it is about this utterance — keyword coverage of the query's weighted words
over its keyword, name and description, plus the calibrated cosine of its vector (the entity
name + description) — so an entity that only an expansion touches scores low and is dropped by
``entity_threshold``. The search returns a window of at least ``BRIDGE_WINDOW`` entities, whatever
``entity_limit`` is: the entity bridge picks its names from that window, so how many entities
the caller shows never changes the events. The caller shows the best ``entity_limit`` by
evidence, ordered by tier (the prompt's order), then score. A hit reports which search words
matched it, read off its stored tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import Dialect
from kemem_es.search.clauses import SearchWord, coverage_clauses, match_clauses
from kemem_es.search.events import vec_scale
from kemem_es.search.facts import recall_filters
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import VECTOR_FIELD
from kemem_es.store.scope import any_of, query_scopes

# What assembling an EntityHit, the bridge and the time and slot orders read, and nothing else:
# fetching a hit's whole source was 12-13 % of the engine's time a request (issue 42). The
# *_tok fields tell which words matched.
SOURCE_FIELDS = [
    "id",
    "db",
    "kind",
    "entity_name",
    "entity_name_tok",
    "entity_type",
    "keyword",
    "keyword_tok",
    "description",
    "description_tok",
    "updatetime",
    "slots",
    "subject",
    "superseded_by",
]


@dataclass(frozen=True)
class Tier:
    rank: int
    kinds: tuple[str, ...]
    fields: dict[str, float]


# 用户关系 (the user's relations to others) rides with the user's attributes in tier 2: the tiers
# of docs/SPEC.md §2 name it nowhere, and the prompt shows both right after each other (§5).
TIERS: tuple[Tier, ...] = (
    Tier(1, ("与主体和客体的关系",), {"keyword": 2.0, "keyword_tok": 1.0}),
    Tier(2, ("用户属性", "用户关系"), {"keyword": 2.0, "keyword_tok": 1.0, "description_tok": 1.0}),
    Tier(
        3,
        ("特殊实体属性", "与其它实体的关系"),
        {"keyword": 2.0, "keyword_tok": 1.0, "entity_name": 2.0, "entity_name_tok": 1.0},
    ),
    Tier(4, ("记忆画面",), {"keyword": 2.0, "keyword_tok": 1.0}),
)


def entity_scope(agent_id: str, user_id: str) -> list[dict[str, Any]]:
    """This user's entities plus the agent's official (shared) ones."""
    return [any_of(list(query_scopes(agent_id, user_id)))]


SHARED_FIELDS = ("keyword", "keyword_tok")  # searched by every tier
# Evidence fields (all tiers): how much a match there counts of a word's share.
ENTITY_COVERAGE_FIELDS = {
    "keyword": 1.0,
    "keyword_tok": 1.0,
    "entity_name": 1.0,
    "entity_name_tok": 1.0,
    "description_tok": 0.9,
}
ANN_CANDIDATES = 10
RESCORE_WINDOW = 20
# Entities every query ranks for the bridge (the default limit of 10 ranked that many before).
BRIDGE_WINDOW = 10
TIER_OF_KIND: dict[str, Tier] = {kind: tier for tier in TIERS for kind in tier.kinds}


def shown_limit(params: QueryParams) -> int:
    """How many entities the answer shows: ``entity_limit``, else ``limit``."""
    return params.entity_limit if params.entity_limit is not None else params.limit


def entity_window(params: QueryParams) -> int:
    """How many entities the search returns: what is shown, and never fewer than the bridge
    ranks, so that neither limit moves the events."""
    return max(shown_limit(params), BRIDGE_WINDOW)


def entity_body(
    params: QueryParams,
    words: Sequence[SearchWord],
    dialect: Dialect | None = None,
    vector: Sequence[float] | None = None,
    slot_clauses: Sequence[dict[str, Any]] = (),
) -> dict[str, Any] | None:
    """The one search body for entity recall, or None when there is nothing to search.
    The score is kw·coverage + vec·vec (``entity_weights``, 0.6/0.4; raw: minus
    ``entity_offset``): coverage as for the events, vec on the entities' own calibration
    (``entity_vec_floor``/``entity_vec_ceil``); without a dialect/vector, or with a vector
    weight of 0 (English), coverage alone (the nearest entities in meaning are candidates
    still: a tier searched on its keyword may hold the query's words in its description)."""
    should = _keyword_candidates(words)
    if not should:
        return None
    scope = [
        *entity_scope(params.agent_id, params.user_id),
        *compile_filters(params.filters),
        {"terms": {"kind": list(TIER_OF_KIND)}},
        *recall_filters(params),  # superseded facts: only for a question about the past
    ]
    if dialect is not None and vector is not None and ANN_CANDIDATES:
        # The entities nearest in meaning are candidates too (狗 → 豆包, the user's corgi).
        should.append(dialect.ann_query(VECTOR_FIELD, vector, ANN_CANDIDATES, scope))
    candidates = {"bool": {"should": [*should, *slot_clauses], "minimum_should_match": 1}}
    query: dict[str, Any] = {
        "filter": [*scope, candidates],
        # expansions widen the candidates (above) but, as for events, add no evidence by default
        "should": [
            *coverage_clauses(words, ENTITY_COVERAGE_FIELDS, params.expansion_share),
            *slot_clauses,  # the slot the utterance asks about (search.facts)
        ],
    }
    named = sorted({t for w in words if w.weighted for t in w.toks})
    if params.entity_weights.name > 0 and named:
        # the entity the turn names ("linda won't let the movers…"): a flat bonus, within the
        # bool's boost like the coverage clauses
        bonus = params.entity_weights.name / params.entity_weights.kw
        name_match = {"terms": {"entity_name_tok": named}}
        query["should"].append({"constant_score": {"filter": name_match, "boost": bonus}})
    # kw × coverage straight from the bool query (its boost): no per-document script.
    query["boost"] = params.entity_weights.kw
    window = entity_window(params)
    body: dict[str, Any] = {
        # the best by evidence: the bridge's candidates, and the caller's to show by tier
        "size": window,
        "track_total_hits": False,
        "_source": SOURCE_FIELDS,
        "query": {"bool": query},
    }
    if dialect is not None and vector is not None and params.entity_weights.vec > 0:
        body["rescore"] = _vector_rescore(params, dialect, vector, [*scope, candidates], window)
    return body


def _keyword_candidates(words: Sequence[SearchWord]) -> list[dict[str, Any]]:
    """The keyword clauses that make an entity a candidate: the fields every tier shares, then
    each tier's own fields within its kinds."""
    # Candidates are a filter (scored by coverage and the cosine): which entities a word
    # matches, not how much, so unscored clauses, a few per field (match_clauses, issue 42)
    should = match_clauses(words, SHARED_FIELDS)
    for tier in TIERS:
        extra = [f for f in tier.fields if f not in SHARED_FIELDS]
        clauses = match_clauses(words, extra) if extra else []
        if clauses:
            should.append(
                {
                    "bool": {
                        "filter": [{"terms": {"kind": list(tier.kinds)}}],
                        "should": clauses,
                        "minimum_should_match": 1,
                    }
                }
            )
    return should


def _vector_rescore(
    params: QueryParams,
    dialect: Dialect,
    vector: Sequence[float],
    filters: list[dict[str, Any]],
    window: int,
) -> dict[str, Any]:
    """The vector term, added to the best candidates only (a rescore window): scoring it on
    every keyword candidate of a 20k-entity official database costs ~10 ms. ``filters``: the
    scope and the candidates (a native dialect's knn clause runs over every candidate)."""
    _, span = vec_scale(params, entity=True)
    weight = params.entity_weights.vec / span
    if dialect.native:  # no script: a knn clause over every candidate
        rescore = dialect.vector_clause(VECTOR_FIELD, vector, dialect.NATIVE_K, filters, weight)
    else:
        vec_fn = dialect.vector_function(VECTOR_FIELD, vector, weight)
        rescore = {
            "function_score": {
                "query": {"match_all": {}},
                "functions": [vec_fn],
                "boost_mode": "replace",
            }
        }
    return {
        "window_size": max(2 * window, RESCORE_WINDOW),
        "query": {
            "rescore_query": rescore,
            "query_weight": 1.0,
            "rescore_query_weight": 1.0,
            "score_mode": "total",
        },
    }


def entity_offset(params: QueryParams, with_vector: bool) -> float:
    if not with_vector:
        return 0.0
    lo, span = vec_scale(params, entity=True)
    return params.entity_weights.vec * lo / span
