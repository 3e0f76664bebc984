"""A memory's best sentence (search.best_sentence): its codes, how a memory splits, and the
lift among fusion's best hits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search import best_sentence
from kemem_es.search.calibration import vec_scale
from kemem_es.store import vector_code
from kemem_es.store.layout import SENTENCE_CODES_FIELD, VECTOR_CODE_FIELD
from kemem_es.text.dialogue import memory_sentences

P = QueryParams(agent_id="a", user_id="u")
RNG = np.random.default_rng(7)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _hit(name: str, whole: np.ndarray, parts: list[np.ndarray], score: float) -> Any:
    fields = {VECTOR_CODE_FIELD: [vector_code.encode(whole).rstrip("=")]}
    if parts:  # the engine returns binary doc values without base64 padding
        fields[SENTENCE_CODES_FIELD] = [vector_code.encode_many(parts).rstrip("=")]
    return ("user", {"_id": name, "_score": score, "fields": fields}, score - 0.1)


def test_several_codes_come_back_in_order_and_another_models_are_refused() -> None:
    vs = [_unit(RNG.normal(size=16)) for _ in range(3)]
    back = vector_code.decode_many(vector_code.encode_many(vs), 16)
    assert back.shape == (3, 16)
    assert np.all(np.sum(back * np.stack(vs), axis=1) > 0.999)
    assert vector_code.decode_many(vector_code.encode_many(vs), 10).shape == (0, 10)


def test_a_memory_splits_into_its_sentences_and_at_most_four_runs() -> None:
    text = "阿哲新推出腊味煲仔饭；墨白建议他把火力记在本子上。"
    assert memory_sentences(text, 4) == ["阿哲新推出腊味煲仔饭", "墨白建议他把火力记在本子上"]
    assert memory_sentences("阿哲周末带女儿去海边捡贝壳。", 4) == []
    many = "。".join(f"第{i}件事情发生了" for i in range(9))
    runs = memory_sentences(many, 4)
    assert len(runs) <= 4 and "第0件事情发生了" in runs[0] and "第8件事情发生了" in runs[-1]
    assert sum(r.count("事情") for r in runs) == 9  # every sentence in some run


def test_the_memory_whose_sentence_the_turn_is_about_moves_up_by_its_gain() -> None:
    q = _unit(RNG.normal(size=32))
    noise = [_unit(RNG.normal(size=32)) for _ in range(4)]
    close = _unit(q + 0.3 * noise[0])  # one sentence about the turn
    whole = _unit(close + noise[1] + noise[2])  # the memory: that sentence and others
    other = _unit(q * 0.6 + noise[3])  # a memory of one sentence, closer as a whole
    ranked = [
        _hit("other", other, [], 0.80),
        _hit("multi", whole, [close, _unit(noise[1] + noise[2])], 0.78),
    ]
    out = best_sentence.lifted(P, ranked, q, 0.1)
    assert [r[1]["_id"] for r in out] == ["multi", "other"]
    gain = float(close @ q - vector_code.decode(vector_code.encode(whole)) @ q)
    _, span = vec_scale(P)
    lift = P.weights.vec * P.memory_sentence_weight * gain / (2 * span)
    assert out[0][1][best_sentence.GAIN] == pytest.approx(lift, rel=0.02)
    assert out[0][1]["_score"] == pytest.approx(0.78 + lift, rel=1e-3)
    assert out[0][2] == pytest.approx(min(1.0, 0.68 + lift), rel=1e-3)  # calibrated, clamped
    assert best_sentence.GAIN not in out[1][1]  # a memory of one sentence keeps its score
    # the calibrated score stays within [0, 1]: a clamped one stays clamped
    top = [_hit("multi", whole, [close, _unit(noise[1] + noise[2])], 1.3)]
    assert best_sentence.lifted(P, top, q, 0.1)[0][2] == 1.0


def test_it_never_lowers_a_memory_and_stays_out_of_other_modes_and_when_off() -> None:
    q = _unit(RNG.normal(size=32))
    far = _unit(RNG.normal(size=32))  # a sentence farther from the turn than its memory
    ranked = [_hit("m", q, [far, far], 0.9)]
    assert best_sentence.lifted(P, ranked, q, 0.1)[0][1]["_score"] == 0.9
    near = [_hit("m", far, [q, far], 0.5)]
    for params in (
        P.model_copy(update={"memory_sentence_weight": 0.0}),
        P.model_copy(update={"mode": "vector"}),
        P.model_copy(update={"mode": "two_stage"}),
    ):
        assert best_sentence.lifted(params, near, q, 0.1) is near
    assert best_sentence.fields(P.model_copy(update={"mode": "rrf"})) == []
    # beyond the window the engine's order stands
    deep = [_hit(f"h{i}", far, [], 1.0 - i / 100) for i in range(best_sentence.WINDOW)]
    deep.append(_hit("late", far, [q, far], 0.5))
    assert best_sentence.lifted(P, deep, q, 0.1)[-1][1]["_score"] == 0.5
