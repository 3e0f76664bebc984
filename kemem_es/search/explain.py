"""Per-signal breakdown of a fused score, read from the engine's own explanation.

A function_score explanation lists one "product of" node per function: [function value, weight].
The function is recognised by what its description names (our fixed script sources, the knn
script, the decay field), so the numbers shown are the engine's, not a re-computation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kemem_es.contract.response import Signals
from kemem_es.store.layout import TIME_FIELD


def _nodes(node: dict[str, Any], in_max: bool = False) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every node, and whether it sits under a score_mode max function_score (the sentence
    vectors' clause, see events.sentence_clause)."""
    yield node, in_max
    in_max = in_max or "score mode [max]" in str(node.get("description", ""))
    for child in node.get("details", []):
        yield from _nodes(child, in_max)


def _which(description: str) -> str | None:
    if "_score / (_score" in description or "Math.min(_score" in description:
        return "kw"
    if "knn_score" in description or "cosineSimilarity" in description:
        return "vec"
    if f"field {TIME_FIELD}" in description:
        return "time"
    if "doc['strength']" in description:
        return "strength"
    return None


def _native_terms(explanation: dict[str, Any]) -> tuple[float, float]:
    """Native scoring's (vec, strength) contributions: the ``knn`` clauses' scores (a dis_max
    of them counts its value, the best one) and the ``distance_feature`` clause's."""
    vec = strength = 0.0
    stack = [explanation]
    while stack:
        node = stack.pop()
        description = str(node.get("description", ""))
        details = node.get("details", [])
        if description.startswith("within top"):
            vec += float(node["value"])
        elif description.startswith("Distance score"):
            strength += float(node["value"])
        elif description.startswith("max ") and any(
            str(d.get("description", "")).startswith("within top") for d in details
        ):
            vec += float(node["value"])  # one scope's / the best sentence's clause
        else:
            stack.extend(details)
    return vec, strength


def signals_from_explanation(
    explanation: dict[str, Any], native: tuple[float, float] | None = None
) -> Signals:
    """The raw [0, 1] value of each signal (0 for a signal whose weight was 0) and the BM25.

    With sentence vectors, ``vec`` is the term the score holds: the whole query's and the best
    sentence's values averaged by their weights, (1 − s)·whole + s·best. ``native``: (the vec
    clauses' total boost × knn scale, the strength weight) under native scoring, where vec and
    strength are query clauses (``knn``, ``distance_feature``), not functions."""
    values = {"kw": 0.0, "vec": 0.0, "time": 0.0, "strength": 0.0}
    bm25 = 0.0
    whole: tuple[float, float] | None = None  # (value, weight) of the whole query's vector
    best: tuple[float, float] | None = None  # the best sentence's
    for node, in_max in _nodes(explanation):
        details = node.get("details", [])
        if node.get("description") != "product of:" or not details:
            continue
        name = _which(details[0].get("description", ""))
        if name is None:
            continue
        values[name] = float(details[0]["value"])
        if name == "vec":
            weight = float(details[1]["value"]) if len(details) > 1 else 1.0
            pair = (values[name], weight)
            if not in_max:
                whole = pair
            elif best is None or pair[0] > best[0]:
                best = pair
        if name == "kw":
            inner = details[0].get("details", [])
            bm25 = float(inner[0]["value"]) if inner else 0.0
    if native is not None:
        vec, strength = _native_terms(explanation)
        values["vec"] = vec / native[0] if native[0] > 0 else 0.0
        values["strength"] = strength / native[1] if native[1] > 0 else 0.0
    elif best is not None:
        parts = [p for p in (whole, best) if p is not None]
        total = sum(w for _, w in parts)
        values["vec"] = sum(v * w for v, w in parts) / total if total > 0 else 0.0
    return Signals(bm25=round(bm25, 4), **{k: round(v, 4) for k, v in values.items()})
