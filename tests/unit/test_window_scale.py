"""A dialogue window rebuilt from its pieces, read on the joint window's scale
(search.window_scale): the factor and the sent vector give exactly the intended score for any
memory, the renormalisation's lift is taken back by ``n^γ`` (γ = GAMMA × the earlier turns'
share), the floor and ceiling divided by the factor give the vector term the intended cosine
would, and the query path uses it for split only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search.query_text import QueryText
from kemem_es.search.turn_vectors import weighted_mean
from kemem_es.search.window_scale import GAMMA, pieces_mean, rebuilt_blend, rescaled
from kemem_es.text.dialogue import context_turns
from kemem_es.text.tokenizer import Tokenizer
from tests.counting_model import Counting

DIM = 64


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _cone(rng: np.random.Generator, mu: np.ndarray, k: float = 0.8) -> np.ndarray:
    """A vector with a common part ``k`` along ``mu`` (an embedding model's shared direction)."""
    s = rng.standard_normal(DIM)
    s -= (s @ mu) * mu
    return k * mu + math.sqrt(1 - k * k) * _unit(s)


@pytest.mark.parametrize("gamma", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("w", [0.2, 0.5, 0.9])
def test_sent_vector_times_factor_is_the_intended_score(gamma: float, w: float) -> None:
    """f·cos(sent, m) = (w·u·m + (1 − w)·n^γ·d·m) / |w·u + (1 − w)·d| for every memory m."""
    rng = np.random.default_rng(5)
    mu = _unit(rng.standard_normal(DIM))
    u, e = _cone(rng, mu), _cone(rng, mu)
    r = pieces_mean([u, e], [4, 9])
    n = float(np.linalg.norm(r))
    d = r / n
    sent, f = rebuilt_blend(u, r, w, 1.0, gamma)
    assert math.isclose(float(np.linalg.norm(sent)), 1.0, rel_tol=1e-9)
    assert 0 < f <= 1.0
    for _ in range(5):
        m = _cone(rng, mu, 0.86)
        want = (w * (u @ m) + (1 - w) * n**gamma * (d @ m)) / np.linalg.norm(w * u + (1 - w) * d)
        assert f * float(sent @ m) == pytest.approx(float(want), abs=1e-12)


def test_gamma_zero_is_the_plain_split_and_one_the_pieces_mean_cosine() -> None:
    rng = np.random.default_rng(8)
    mu = _unit(rng.standard_normal(DIM))
    u, e = _cone(rng, mu), _cone(rng, mu)
    r = pieces_mean([u, e], [3, 5])
    sent, f = rebuilt_blend(u, r, 0.2, 1.0, gamma=0.0)
    assert f == 1.0
    assert np.allclose(sent, _unit(0.2 * u + 0.8 * weighted_mean([u, e], [3, 5])))
    # γ = 1, the window alone (w = 0): the pieces' token-weighted mean cosine, no lift
    m = _cone(rng, mu, 0.86)
    sent, f = rebuilt_blend(u, r, 0.0, 1.0, gamma=1.0)
    assert f * float(sent @ m) == pytest.approx(3 / 8 * float(u @ m) + 5 / 8 * float(e @ m))


def test_the_renormalised_mean_lifts_unrelated_memories_and_gamma_takes_it_back() -> None:
    """Why: the mean keeps the common direction whole while the specific parts cancel, so the
    renormalised window's cosine to an unrelated memory rises by 1/n; read at n^γ of it, the
    lift left is n^(γ−1)."""
    rng = np.random.default_rng(7)
    mu = _unit(rng.standard_normal(DIM))
    u, e = _cone(rng, mu), _cone(rng, mu)
    r = pieces_mean([u, e], [1, 1])
    n = float(np.linalg.norm(r))
    mems = [_cone(rng, mu, 0.86) for _ in range(400)]
    unrelated = 0.8 * 0.86
    plain = np.mean([float(r / n @ m) for m in mems])
    sent, f = rebuilt_blend(u, r, 0.0, 1.0)  # the window alone, all of it earlier turns
    read = np.mean([f * float(sent @ m) for m in mems])
    assert plain == pytest.approx(unrelated / n, abs=0.01)
    assert read == pytest.approx(unrelated * n ** (GAMMA - 1), abs=0.01)
    assert unrelated < read < plain
    # a window that is mostly the utterance keeps more of its lift: γ = GAMMA × share
    sent, f = rebuilt_blend(u, r, 0.0, 0.25)
    assert f * float(sent @ mems[0]) == pytest.approx(float(r / n @ mems[0]) * n ** (GAMMA / 4))
    assert rebuilt_blend(u, r, 0.0, 0.0)[1] == 1.0


def test_one_piece_or_identical_pieces_change_nothing() -> None:
    rng = np.random.default_rng(2)
    u = _unit(rng.standard_normal(DIM))
    sent, f = rebuilt_blend(u, pieces_mean([u, u], [2, 7]), 0.3, 7 / 9)
    assert np.allclose(sent, u)
    assert f == 1.0
    sent, f = rebuilt_blend(u, np.zeros(DIM), 0.3, 0.5)  # nothing to blend with
    assert np.allclose(sent, u) and f == 1.0


def test_pieces_mean_weighs_unit_vectors_by_their_shares() -> None:
    a, b = np.array([2.0, 0.0]), np.array([0.0, 1.0])  # normalised first
    assert np.allclose(pieces_mean([a, b], [3, 1]), [0.75, 0.25])
    assert np.allclose(pieces_mean([a, b], [0, 0]), [0.5, 0.5])
    with pytest.raises(ValueError):
        pieces_mean([], [])


def test_rescaled_floor_and_ceiling_give_the_factored_cosines_vector_term() -> None:
    p = QueryParams(agent_id="a", user_id="u", vec_ceil=0.8)
    f = 0.97
    q = rescaled(p, f)
    for cos in (0.55, 0.7, 0.83):
        want = (f * cos - p.vec_floor) / (p.vec_ceil - p.vec_floor)
        assert (cos - q.vec_floor) / (q.vec_ceil - q.vec_floor) == pytest.approx(want)
        want_e = (f * cos - p.entity_vec_floor) / (p.entity_vec_ceil - p.entity_vec_floor)
        got_e = (cos - q.entity_vec_floor) / (q.entity_vec_ceil - q.entity_vec_floor)
        assert got_e == pytest.approx(want_e)
    assert q.model_fields_set == p.model_fields_set  # the caller's choices stay theirs
    assert rescaled(p, 1.0) is p
    # a negative floor (a model whose unrelated cosines sit near 0) moves the same way
    m = QueryParams(agent_id="a", user_id="u", vec_floor=-0.02, vec_ceil=0.3)
    mq = rescaled(m, f)
    assert (0.1 - mq.vec_floor) / (mq.vec_ceil - mq.vec_floor) == pytest.approx(
        (f * 0.1 + 0.02) / 0.32
    )


# -- the query path ------------------------------------------------------------------------------
CONTEXT = "用户：我今天好累\n助手：怎么啦？\n用户：老板又让加班\n助手：辛苦了，吃饭了吗？"


def _params(**kw: object) -> QueryParams:
    return QueryParams(agent_id="a", user_id="u", context=CONTEXT, **kw)  # type: ignore[arg-type]


def test_split_carries_its_factor_and_sentences_share_the_window() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params(context_vector="split")
    turns = context_turns(p.context, p.context_turns)
    text = "我想吃火锅。你还记得那家店吗？"
    out = qt.query_vectors(text, turns, p)
    assert 0 < out.scale < 1
    assert len(out.parts) == 2
    vec, _, parts = qt.query_vector(text, turns, p)  # the 3-tuple: the same vectors
    assert np.allclose(vec, out.vector) and np.allclose(parts, out.parts)


@pytest.mark.parametrize("mode", ["joint", "earlier", "turns"])
def test_other_windows_need_no_factor(mode: str) -> None:
    """One embedded window (joint, earlier) is on the calibration's scale; "turns" keeps its
    lift (the rule was measured for split only)."""
    qt = QueryText(Counting(), Tokenizer(), None)
    p = _params(context_vector=mode)
    turns = context_turns(p.context, p.context_turns)
    assert qt.query_vectors("你还记得那家店吗", turns, p).scale == 1.0
    assert qt.query_vectors("你还记得那家店吗", (), p).scale == 1.0
