"""Reciprocal-rank fusion of several ranked lists (the multi-path alternative to compare)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def rrf_merge(
    lists: Sequence[Sequence[tuple[T, dict[str, Any]]]], k: int = 60, paths: int = 2
) -> list[tuple[T, dict[str, Any], float]]:
    """Σ 1/(k + rank) over the lists a hit appears in, normalised so that rank 1 on all of its
    ``paths`` ranking paths (e.g. BM25 and vector) scores 1.0."""
    scores: dict[str, float] = {}
    first: dict[str, tuple[T, dict[str, Any]]] = {}
    for ranked in lists:
        for rank, (tag, hit) in enumerate(ranked, start=1):
            key = f"{hit.get('_index')}/{hit['_id']}"
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            first.setdefault(key, (tag, hit))
    best = paths / (k + 1)
    merged = [(first[key][0], first[key][1], s / best) for key, s in scores.items()]
    merged.sort(key=lambda r: -r[2])
    return merged
