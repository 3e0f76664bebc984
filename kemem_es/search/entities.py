"""Entity recall in SPEC §2 step 6's priority tiers, newest first within a tier.

All four tiers are one search over the user's and the official entity indices: a function_score
gives each hit its tier's constant weight, and the sort is (tier weight, updatetime desc). Fields
that only some tiers search (descriptions for tier 2, entity names for tier 3) sit in clauses
filtered to those tiers' kinds. A hit reports which search words matched it, read off its
stored tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.search.clauses import SearchWord, keyword_clauses
from kemem_es.search.params import QueryParams
from kemem_es.store.filters import compile_filters
from kemem_es.store.scope import any_of, query_scopes

SOURCE_EXCLUDES = ["vector", "metadata"]  # the *_tok fields tell which words matched


@dataclass(frozen=True)
class Tier:
    rank: int
    kinds: tuple[str, ...]
    fields: dict[str, float]


# 用户关系 (the user's relations to others) rides with the user's attributes in tier 2: SPEC's
# tiers name it nowhere, and the prompt shows both right after each other (§5).
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
TIER_OF_KIND: dict[str, Tier] = {kind: tier for tier in TIERS for kind in tier.kinds}


def entity_body(params: QueryParams, words: Sequence[SearchWord]) -> dict[str, Any] | None:
    """The one search body for entity recall, or None when there is nothing to search."""
    shared = {f: TIERS[0].fields[f] for f in SHARED_FIELDS}
    should = keyword_clauses(words, shared)
    for tier in TIERS:
        extra = {f: w for f, w in tier.fields.items() if f not in SHARED_FIELDS}
        clauses = keyword_clauses(words, extra) if extra else []
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
    if not should:
        return None
    query: dict[str, Any] = {
        "filter": [
            *entity_scope(params.agent_id, params.user_id),
            *compile_filters(params.filters),
            {"terms": {"kind": list(TIER_OF_KIND)}},
        ],
        "should": should,
        "minimum_should_match": 1,
    }
    if params.exclude_ids:
        query["must_not"] = [{"terms": {"id": params.exclude_ids}}]
    tier_weight = [
        {"filter": {"terms": {"kind": list(t.kinds)}}, "weight": float(len(TIERS) + 1 - t.rank)}
        for t in TIERS
    ]
    return {
        "size": params.entity_limit,
        "track_total_hits": False,
        "sort": ["_score", {"updatetime": {"order": "desc"}}],
        "_source": {"excludes": SOURCE_EXCLUDES},
        "query": {
            "function_score": {
                "query": {"bool": query},
                "functions": tier_weight,
                "score_mode": "first",
                "boost_mode": "replace",
            }
        },
    }
