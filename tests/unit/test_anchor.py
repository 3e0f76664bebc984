"""Anchor feedback and the vector codes it reads (pure logic; the engine test is in
test_query_engine)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.engine.dialect import OpenSearch
from kemem_es.search import anchor
from kemem_es.search.modes import BodyArgs, mode_bodies
from kemem_es.store import vector_code
from kemem_es.store.layout import SENTENCE_CODES_FIELD, TIME_FIELD, VECTOR_CODE_FIELD


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_a_code_keeps_the_cosine_to_a_thousandth() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = unit(rng.normal(size=512)), unit(rng.normal(size=512) + 2 * rng.normal(size=1))
        da, db = (
            vector_code.decode(vector_code.encode(a)),
            vector_code.decode(vector_code.encode(b)),
        )
        assert float(da @ db) == pytest.approx(float(a @ b), abs=2e-3)
        assert len(vector_code.encode(a)) == 684  # 512 bytes in base64
    # the engine returns binary doc values without padding; an all-zero vector stays zero
    code = vector_code.encode([0.0] * 4)
    assert not vector_code.decode(code.rstrip("=")).any()


def hit(name: str, vec) -> dict:
    return {"_id": name, "fields": {VECTOR_CODE_FIELD: [vector_code.encode(vec).rstrip("=")]}}


def order(rows) -> list[str]:
    return [r[1]["_id"] for r in rows]


# The anchor; a memory close to it (cosine 0.91); one far from it (cosine 0.2).
A = unit([1.0, 0.0, 0.0, 0.0])
NEAR = unit([0.91, np.sqrt(1 - 0.91**2), 0.0, 0.0])
FAR = unit([0.2, 0.0, np.sqrt(1 - 0.04), 0.0])
P = QueryParams(agent_id="a", user_id="u")
# Meaning alone: the hits of these tests carry no times, and a hit without one gains nothing.


def test_a_confident_anchor_raises_the_memories_close_to_it() -> None:
    ranked = [("user", hit("a", A), 0.80), ("user", hit("far", FAR), 0.60),
              ("user", hit("near", NEAR), 0.55)]  # fmt: skip
    out = anchor.feedback(P, ranked)
    assert order(out) == ["a", "near", "far"]
    gain = {r[1]["_id"]: r[3] for r in out}
    assert gain["near"] == pytest.approx(0.2 * (0.91 - 0.7) / 0.3, abs=3e-3)
    assert gain["far"] == 0.0 and gain["a"] == 0.0
    assert out[1][2] == pytest.approx(0.55 + gain["near"])


def test_no_feedback_without_a_clear_lead_or_a_code_or_in_other_modes() -> None:
    close_call = [("user", hit("a", A), 0.62), ("user", hit("far", FAR), 0.60),
                  ("user", hit("near", NEAR), 0.55)]  # fmt: skip
    assert order(anchor.feedback(P, close_call)) == ["a", "far", "near"]
    uncoded = [("user", {"_id": "a"}, 0.8), ("user", hit("far", FAR), 0.6),
               ("user", hit("near", NEAR), 0.55)]  # fmt: skip
    assert order(anchor.feedback(P, uncoded)) == ["a", "far", "near"]
    ranked = [("user", hit("a", A), 0.8), ("user", hit("far", FAR), 0.6),
              ("user", {"_id": "old"}, 0.55)]  # fmt: skip
    assert [r[3] for r in anchor.feedback(P, ranked)] == [0.0, 0.0, 0.0]
    for mode in ("bm25", "vector", "rrf"):
        params = P.model_copy(update={"mode": mode})
        assert not anchor.active(params) and anchor.code_fields(params, "user") == {}
    assert anchor.active(P.model_copy(update={"anchor_weight": 0.0}))  # time alone
    assert not anchor.active(P.model_copy(update={"anchor_weight": 0.0, "contiguity_weight": 0}))


def test_no_memory_passes_the_anchor() -> None:
    twin = unit([0.999, 0.0447, 0.0, 0.0])
    ranked = [("user", hit("a", A), 0.70), ("user", hit("twin", twin), 0.58)]
    out = anchor.feedback(P, ranked)
    assert order(out) == ["a", "twin"] and out[1][2] == pytest.approx(0.70)
    # the gain reported (explain's signals.anchor) is the one applied, after the cap: the
    # signals add up to the score
    assert out[1][3] == pytest.approx(0.70 - 0.58)


def test_fused_bodies_return_the_window_with_codes() -> None:
    dialect = OpenSearch()
    base = P.model_copy(update={"memory_sentence_weight": 0.0})  # the anchor's fields alone
    clauses = [{"term": {"keywords": "x"}}]
    args = BodyArgs(dialect, "user", base, clauses, [0.1], datetime(2025, 1, 1), False)
    (fusion,) = mode_bodies(args)
    assert fusion["size"] == base.contiguity_window > base.anchor_window > base.limit
    time = {"field": TIME_FIELD, "format": "epoch_millis"}
    assert fusion["docvalue_fields"] == [VECTOR_CODE_FIELD, time]
    meaning = base.model_copy(update={"contiguity_weight": 0.0})
    (m,) = mode_bodies(args._replace(params=meaning))
    assert m["size"] == base.anchor_window and m["docvalue_fields"] == [VECTOR_CODE_FIELD]
    timed = base.model_copy(update={"anchor_weight": 0.0})
    (t,) = mode_bodies(args._replace(params=timed))
    assert t["size"] == base.contiguity_window and t["docvalue_fields"] == [time]
    # the agent's official memories are not the user's episodes: no times, no wider window
    (official,) = mode_bodies(args._replace(db="official", params=base))
    assert official["size"] == base.anchor_window and official["docvalue_fields"] == [
        VECTOR_CODE_FIELD
    ]
    (o,) = mode_bodies(args._replace(db="official", params=timed))
    assert o["size"] == base.limit and "docvalue_fields" not in o
    staged = base.model_copy(update={"mode": "two_stage", "limit": 30})
    (two,) = mode_bodies(args._replace(params=staged))
    assert two["size"] == 30 and two["rescore"]["window_size"] >= 30
    off = base.model_copy(update={"anchor_weight": 0.0, "contiguity_weight": 0.0})
    (plain,) = mode_bodies(args._replace(params=off))
    assert plain["size"] == base.limit and "docvalue_fields" not in plain
    for mode in ("bm25", "vector", "rrf"):
        other = base.model_copy(update={"mode": mode})
        for body in mode_bodies(args._replace(params=other)):
            assert "docvalue_fields" not in body
    # a memory's best sentence (search.best_sentence): fusion's hits carry both codes
    sentences = meaning.model_copy(update={"memory_sentence_weight": 0.5})
    (sent,) = mode_bodies(args._replace(params=sentences))
    assert sent["docvalue_fields"] == [VECTOR_CODE_FIELD, SENTENCE_CODES_FIELD]


DAY = 86_400_000
TIME = QueryParams(agent_id="a", user_id="u", anchor_weight=0.0)  # time alone


def timed(name: str, day: float) -> dict:
    return {"_id": name, "fields": {TIME_FIELD: [str(int(day * DAY))]}}


def test_a_confident_anchor_raises_the_memories_close_to_it_in_time() -> None:
    """The day after the anchor gains almost all of contiguity_weight (0.2), a memory 500 days
    away under 1 % of it; "close" is a share (0.1) of the median distance, so the same
    timeline stretched tenfold gains the same."""
    w, share = TIME.contiguity_weight, TIME.contiguity_scale
    assert (w, share) == (0.2, 0.1)
    days = {"a": 1000, "far1": 100, "far2": 300, "far3": 1800, "far4": 1500, "next": 1001}
    scores = {"a": 0.8, "far1": 0.6, "far2": 0.58, "far3": 0.57, "far4": 0.56, "next": 0.5}
    for stretch in (1, 10):
        ranked = [("user", timed(k, days[k] * stretch), scores[k]) for k in days]
        out = anchor.feedback(TIME, ranked)
        h = share * 700 * stretch  # the median of 900, 700, 800, 500, 1 days
        gain = {r[1]["_id"]: r[3] for r in out}
        assert gain["next"] == pytest.approx(w * 0.5 ** (stretch / h), abs=1e-9)
        assert gain["next"] > 0.19
        assert gain["far4"] == pytest.approx(w * 0.5 ** (500 * stretch / h), abs=1e-9)
        assert gain["far4"] < 0.01 * w
        assert order(out)[:2] == ["a", "next"] and out[1][2] == pytest.approx(0.5 + gain["next"])


def test_no_time_gain_without_a_spread_a_time_or_inside_the_window() -> None:
    same = [("user", timed(k, 500), s) for k, s in (("a", 0.8), ("b", 0.6), ("c", 0.5))]
    assert [r[3] for r in anchor.feedback(TIME, same)] == [0.0, 0.0, 0.0]  # nothing is closer
    untimed = [("user", {"_id": "a"}, 0.8), ("user", timed("b", 1), 0.6),
               ("user", timed("c", 900), 0.5)]  # fmt: skip
    assert [r[3] for r in anchor.feedback(TIME, untimed)] == [0.0, 0.0, 0.0]
    ranked = [("user", timed("a", 1000), 0.8), ("user", timed("b", 1), 0.6),
              ("user", {"_id": "old"}, 0.55), ("user", timed("c", 1001), 0.5)]  # fmt: skip
    gains = {r[1]["_id"]: r[3] for r in anchor.feedback(TIME, ranked)}
    assert gains["old"] == 0.0 and gains["c"] > 0.19
    narrow = TIME.model_copy(update={"contiguity_window": 3})  # c is the 4th hit
    assert {r[1]["_id"]: r[3] for r in anchor.feedback(narrow, ranked)}["c"] == 0.0
    close_call = [("user", timed("a", 1000), 0.62), *ranked[1:]]
    assert [r[3] for r in anchor.feedback(TIME, close_call)] == [0.0] * 4
