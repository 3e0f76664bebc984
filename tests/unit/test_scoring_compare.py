"""scripts/scoring_compare.py: what counts as the same answer, and the dev sets it asks."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sc() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "scoring_compare", ROOT / "scripts/scoring_compare.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_order_within_the_tolerance_is_the_same_answer(sc) -> None:
    ok, diff = sc.compare([("a", 0.9), ("b", 0.5)], [("a", 0.900003), ("b", 0.5)], 1e-5)
    assert ok and diff == pytest.approx(3e-6)


def test_a_score_beyond_the_tolerance_or_another_order_differs(sc) -> None:
    assert not sc.compare([("a", 0.9)], [("a", 0.9001)], 1e-5)[0]
    assert not sc.compare([("a", 0.9), ("b", 0.5)], [("b", 0.9), ("a", 0.5)], 1e-5)[0]
    assert not sc.compare([("a", 0.9), ("b", 0.5)], [("a", 0.9), ("c", 0.5)], 1e-5)[0]


def test_tied_scores_may_come_in_either_order(sc) -> None:
    ok, diff = sc.compare([("a", 0.7), ("b", 0.7)], [("b", 0.7), ("a", 0.700001)], 1e-5)
    assert ok and diff == pytest.approx(1e-6)


@pytest.mark.parametrize("name", ["dialogue", "check", "fresh", "hard", "en", "entities", "facts"])
def test_every_dev_set_has_queries_with_a_scope(sc, name: str) -> None:
    load, queries = sc.dev_set(name, None)
    assert callable(load) and len(queries) >= 100
    for _, text, opts in queries:
        assert text and opts["user_id"] and opts["agent_id"] and opts["limit"] == 10
