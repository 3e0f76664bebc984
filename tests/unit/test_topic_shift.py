"""Topic shift (issue 39, search.topic_shift): the earlier turns' words count for a returned
memory only when its cosine to the utterance's own vector is near the best hit's, and only for
an utterance that has words of its own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search import topic_shift
from kemem_es.search.calibration import calibrated
from kemem_es.search.clauses import SearchWord, coverage_parts
from kemem_es.store import vector_code
from kemem_es.store.layout import VECTOR_CODE_FIELD

W_KW = 0.48


def params(**kw: Any) -> QueryParams:
    return QueryParams(agent_id="a", user_id="u", **kw)


def words(own: int, earlier: int = 2) -> list[SearchWord]:
    out = [SearchWord(f"词{i}", None, False, None, 1.0) for i in range(own)]
    out += [SearchWord(f"旧{i}", 4, False, None, 0.7, (), True, True) for i in range(earlier)]
    return out


def unit(*xs: float) -> np.ndarray:
    v = np.zeros(512, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def hit(doc: str, raw: float, vec: np.ndarray | None, matched: list[str]) -> dict[str, Any]:
    h: dict[str, Any] = {"_id": doc, "_score": raw, "matched_queries": matched}
    if vec is not None:
        h["fields"] = {VECTOR_CODE_FIELD: [vector_code.encode(vec)]}
    return h


def test_on_by_default_and_only_for_fusion() -> None:
    assert params().context_words_gate == pytest.approx(0.2)
    assert params().context_words_gate_words == 8
    assert topic_shift.active(params())
    assert not topic_shift.active(params(context_words_gate=0))
    assert not topic_shift.active(params(context_words_gate=0.2, mode="two_stage"))


def test_applies_only_to_an_utterance_with_words_of_its_own() -> None:
    p = params(context_words_gate=0.2, context_words_gate_words=8)
    assert topic_shift.applies(p, words(own=8))
    assert not topic_shift.applies(p, words(own=7))  # short or vague: the topic is earlier
    assert not topic_shift.applies(p, words(own=10, earlier=0))  # nothing to gate
    bridge = SearchWord("豆包", 4, False, None, 1.0, (), context=True)
    assert not topic_shift.applies(p, [*words(own=7), bridge])  # a bridge is not its own
    assert not topic_shift.applies(params(context_words_gate=0), words(own=10))


def test_named_clauses_keep_their_boosts_and_name_word_and_boost() -> None:
    ws = [
        SearchWord("火锅", None, False, None, 1.0),
        SearchWord("生日", 4, False, None, 0.7, ("生", "日"), True, True),
        SearchWord("朋友", 4, False, None, 0.49, (), True, True),
    ]
    _, earlier = coverage_parts(ws, expansion_share=0.0)
    named = topic_shift.named(earlier)
    assert len(named) == len(earlier) == 2
    for before, after in zip(earlier, named, strict=True):
        pieces = after["dis_max"]["queries"]
        assert len(pieces) == len(before["dis_max"]["queries"])
        for old, new in zip(before["dis_max"]["queries"], pieces, strict=True):
            inner = dict(new["constant_score"])
            name = inner.pop("_name")
            assert inner == old["constant_score"]  # the same filter and boost: same score
            assert name.startswith(topic_shift.NAME_PREFIX)
            assert name.endswith(f":{old['constant_score']['boost']}")
    # the two words carry different indices
    first = {p["constant_score"]["_name"].split(":")[1] for p in named[0]["dis_max"]["queries"]}
    second = {p["constant_score"]["_name"].split(":")[1] for p in named[1]["dis_max"]["queries"]}
    assert first == {"0"} and second == {"1"}


def test_earlier_coverage_sums_the_best_piece_of_each_word() -> None:
    p = topic_shift.NAME_PREFIX
    h = {"matched_queries": [f"{p}0:0.3", f"{p}0:0.21", f"{p}1:0.12", "other", f"{p}2:x"]}
    assert topic_shift.earlier_coverage(h) == pytest.approx(0.3 + 0.12)
    scored = {"matched_queries": {f"{p}0:0.3": 0.3}}  # the map form some engines send
    assert topic_shift.earlier_coverage(scored) == pytest.approx(0.3)
    assert topic_shift.earlier_coverage({}) == 0.0


def test_gate_takes_the_earlier_words_off_a_hit_far_from_the_utterance() -> None:
    p = params(context_words_gate=0.2)
    span = p.vec_ceil - p.vec_floor
    u = unit(1.0)
    # cosines to u: gold on the ceiling (calibrated 1.0); the sibling the earlier turns name
    # half a span lower (0.5): more than 0.2 below the best, so its earlier words go
    gold_vec = unit(p.vec_ceil, float(np.sqrt(1 - p.vec_ceil**2)))
    c = p.vec_floor + 0.5 * span
    sibling_vec = unit(c, float(np.sqrt(1 - c**2)))
    offset = 1.0
    pre = topic_shift.NAME_PREFIX
    sibling = hit("sibling", offset + 0.80, sibling_vec, [f"{pre}0:0.25", f"{pre}1:0.15"])
    gold = hit("gold", offset + 0.70, gold_vec, [])
    ranked = [("user", sibling, 0.80), ("user", gold, 0.70)]
    out = topic_shift.gated(p, ranked, u.tolist(), W_KW, offset)
    assert [h["_id"] for _, h, _ in out] == ["gold", "sibling"]
    cut = W_KW * 0.40
    assert out[1][2] == pytest.approx(calibrated(offset + 0.80 - cut, offset), abs=1e-6)
    assert out[1][1]["_score"] == pytest.approx(offset + 0.80 - cut)
    assert sibling["_score"] == offset + 0.80  # the engine's hit is not changed in place
    # a wider gate keeps them
    wide = topic_shift.gated(params(context_words_gate=0.6), ranked, u.tolist(), W_KW, offset)
    assert [h["_id"] for _, h, _ in wide] == ["sibling", "gold"]


def test_gate_changes_nothing_without_what_it_needs() -> None:
    p = params(context_words_gate=0.2)
    pre = topic_shift.NAME_PREFIX
    a = hit("a", 1.8, unit(0.0, 1.0), [f"{pre}0:0.3"])
    b = hit("b", 1.7, unit(1.0), [])
    ranked = [("user", a, 0.8), ("user", b, 0.7)]
    u = unit(1.0).tolist()
    off = params(context_words_gate=0)
    assert topic_shift.gated(off, ranked, u, W_KW, 1.0) == ranked  # off
    assert topic_shift.gated(p, ranked, None, W_KW, 1.0) == ranked  # no utterance vector
    uncoded = [("user", hit("a", 1.8, None, [f"{pre}0:0.3"]), 0.8), ("user", b, 0.7)]
    # a hit without a code is never cut (it cannot be placed); b is the best coded one
    assert [h["_id"] for _, h, _ in topic_shift.gated(p, uncoded, u, W_KW, 1.0)] == ["a", "b"]
    assert topic_shift.gated(p, ranked[:1], u, W_KW, 1.0) == ranked[:1]


def test_latin_script_turns_it_off_unless_chosen() -> None:
    from kemem_es.search.profile import script_params

    texts = ["we went hiking last spring and it rained the whole way", "oh really"]
    on = params().model_copy(update={"context_words_gate": 0.2})
    # a default of 0.2 (as calibrate.apply leaves it), not the caller's choice
    object.__setattr__(on, "__pydantic_fields_set__", set(params().model_fields_set))
    latin, profile = script_params(on, texts)
    assert profile == "latin" and latin.context_words_gate == 0.0
    chosen, _ = script_params(params(context_words_gate=0.2), texts)
    assert chosen.context_words_gate == 0.2
    zh, _ = script_params(on, ["专业课也有翻车的 我们拿竹条拼的那个"])
    assert zh.context_words_gate == 0.2


def test_named_clauses_ask_for_the_codes_even_without_anchor_feedback() -> None:
    from datetime import datetime

    from kemem_es.engine.dialect import OpenSearch
    from kemem_es.search.modes import BodyArgs, mode_bodies

    p = params(anchor_weight=0.0, contiguity_weight=0.0, memory_sentence_weight=0.0)
    _, earlier = coverage_parts(words(own=8), expansion_share=0.0)
    args = BodyArgs(OpenSearch(), "user", p, [], [0.1], datetime(2025, 1, 1), False)
    assert not topic_shift.is_named(earlier)
    (plain,) = mode_bodies(args, earlier=earlier)
    assert "docvalue_fields" not in plain
    named = topic_shift.named(earlier)
    assert topic_shift.is_named(named)
    (gated,) = mode_bodies(args, earlier=named)
    assert gated["docvalue_fields"] == [VECTOR_CODE_FIELD]
