"""Entity recall in SPEC §2 step 6's priority tiers, newest first within a tier.

Each tier is one search over the user's and the official entity indices (the four go in one
msearch); a hit reports which search words matched it, read off its stored tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.search.clauses import SearchWord, keyword_clauses
from kemem_es.search.params import QueryParams

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
    return [
        {"term": {"agent_id": agent_id}},
        {
            "bool": {
                "should": [
                    {
                        "bool": {
                            "filter": [{"term": {"db": "user"}}, {"term": {"user_id": user_id}}]
                        }
                    },
                    {"term": {"db": "official"}},
                ],
                "minimum_should_match": 1,
            }
        },
    ]


def tier_bodies(
    params: QueryParams, words: Sequence[SearchWord], tokenize: Callable[[str], list[str]]
) -> list[tuple[Tier, dict[str, Any]]]:
    """One search body per tier; tiers with no clause (no words) are left out."""
    out = []
    for tier in TIERS:
        clauses = keyword_clauses(words, tier.fields, tokenize)
        if not clauses:
            continue
        query: dict[str, Any] = {
            "filter": [
                *entity_scope(params.agent_id, params.user_id),
                {"terms": {"kind": list(tier.kinds)}},
            ],
            "should": clauses,
            "minimum_should_match": 1,
        }
        if params.exclude_ids:
            query["must_not"] = [{"ids": {"values": params.exclude_ids}}]
        out.append(
            (
                tier,
                {
                    "size": params.entity_limit,
                    "track_total_hits": False,
                    "track_scores": True,
                    "sort": [{"updatetime": {"order": "desc"}}, "_score"],
                    "_source": {"excludes": SOURCE_EXCLUDES},
                    "query": {"bool": query},
                },
            )
        )
    return out


def merge_tiers(
    results: Sequence[tuple[Tier, list[dict[str, Any]]]], limit: int
) -> list[tuple[Tier, dict[str, Any]]]:
    """Tier order first, the engine's newest-first order within a tier; each memory once."""
    seen: set[str] = set()
    merged = []
    for tier, hits in results:
        for hit in hits:
            if hit["_id"] in seen:
                continue
            seen.add(hit["_id"])
            merged.append((tier, hit))
            if len(merged) >= limit:
                return merged
    return merged
