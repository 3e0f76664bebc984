"""explain under native scoring: the vec and strength signals read from the ``knn`` and
``distance_feature`` clauses of the engine's explanation (shapes as OpenSearch 3.5 and
Elasticsearch 8.18 return them), not from script functions."""

from __future__ import annotations

from typing import Any

import pytest

from kemem_es.search.explain import signals_from_explanation


def node(value: float, description: str, *details: dict[str, Any]) -> dict[str, Any]:
    return {"value": value, "description": description, "details": list(details)}


def keyword_part() -> dict[str, Any]:
    return node(
        0.3,
        "sum of:",
        node(0.3, "max of:", node(0.3, "ConstantScore(description_tok:失眠)^0.3")),
        node(0.0, "match on required clause, product of:", node(0.0, "# clause")),
    )


def time_part(value: float = 0.94, weight: float = 0.03) -> dict[str, Any]:
    return node(
        value * weight,
        "min of:",
        node(
            value * weight,
            "product of:",
            node(value, "Function for field event_time:", node(value, "exp(- MIN[...])")),
            node(weight, "weight"),
        ),
    )


@pytest.mark.parametrize("knn", ["within top 3 docs", "within top 10000"])
def test_native_vec_and_strength_come_from_the_query_clauses(knn: str) -> None:
    vec_boost, w_str = 0.55 / 0.09, 0.02  # w_vec / span, the strength weight
    half_cos, strength = 0.91, 0.5  # (1 + cos) / 2, s / (s + k)
    explanation = node(
        1.0,
        "sum of:",
        node(
            1.0,
            "sum of",
            node(
                1.0,
                "sum of:",
                keyword_part(),
                node(vec_boost * half_cos, knn),
                node(w_str * strength, "Distance score, computed as weight * pivot / ..."),
            ),
            time_part(),
        ),
    )
    got = signals_from_explanation(explanation, (vec_boost, w_str))
    assert got.vec == pytest.approx(half_cos, abs=1e-4)
    assert got.strength == pytest.approx(strength, abs=1e-4)
    assert got.time == pytest.approx(0.94, abs=1e-4)


def test_a_dis_max_of_knn_clauses_counts_its_best_one() -> None:
    """Sentence vectors (or several scopes): a dis_max of knn clauses adds its max only."""
    whole, best = 0.8 * 0.5, 0.9 * 0.5  # two halves of the vec weight (sentence_weight 0.5)
    explanation = node(
        whole + best,
        "sum of:",
        keyword_part(),
        node(whole, "within top 3 docs"),
        node(
            best, "max of:", node(0.7 * 0.5, "within top 3 docs"), node(best, "within top 3 docs")
        ),
    )
    got = signals_from_explanation(explanation, (1.0, 0.0))
    assert got.vec == pytest.approx(0.85, abs=1e-4)  # (1 − s)·whole + s·best
    assert got.strength == 0.0


def test_script_explanations_are_read_as_before() -> None:
    """Without ``native`` the knn clause is not a signal (script scoring has none)."""
    explanation = node(0.5, "sum of:", node(0.5, "within top 3 docs"), time_part())
    got = signals_from_explanation(explanation)
    assert got.vec == 0.0
    assert got.time == pytest.approx(0.94, abs=1e-4)
