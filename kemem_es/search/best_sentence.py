"""A memory's best sentence: a memory of several sentences is about each of them.

One vector for 「阿哲冬天新推出腊味煲仔饭……；墨白建议他把每一煲的时间和火力都记在本子上」 averages
the two; a chat turn that alludes to one of them (「我现在每煲都记一笔了」) is closer to that
sentence than to the whole. Each sentence of a multi-sentence event is embedded on its own
when the memory is written (``BulkPrepare.sentence_codes``) and stored as int8 doc values
(``store.vector_code``). Among fusion's best ``WINDOW`` hits, a memory whose best sentence is
closer to the query than the whole memory moves ``memory_sentence_weight`` of the way there:
its cosine becomes ``cos + w · max(0, best sentence's cos − cos)``, in the score as the vector
signal holds it. It is the memory's own score (the threshold applies to it) and never lowers
one. Memories written before, or with vectors the caller supplied, have no sentence codes and
keep their score. The gain shows as ``signals.sentence`` under ``explain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kemem_es.contract.params import QueryParams
from kemem_es.models import Database
from kemem_es.search.calibration import calibrated, mode_weights, vec_scale
from kemem_es.store import vector_code
from kemem_es.store.layout import SENTENCE_CODES_FIELD, VECTOR_CODE_FIELD

WINDOW = 20  # the best hits the engine returned that are looked at
GAIN = "_sentence_gain"  # the hit's key for what its best sentence added (for explain)

Ranked = list[tuple[Database, dict[str, Any], float]]


def applies(params: QueryParams) -> bool:
    return (
        params.mode == "fusion"
        and params.memory_sentence_weight > 0
        and mode_weights(params).get("vec", 0.0) > 0
    )


def fields(params: QueryParams) -> list[str]:
    """The doc values a hit must carry for it (the whole memory's code and its sentences')."""
    return [VECTOR_CODE_FIELD, SENTENCE_CODES_FIELD] if applies(params) else []


def lifted(
    params: QueryParams, ranked: Ranked, vector: Sequence[float] | None, offset: float
) -> Ranked:
    """``ranked`` (best first, by the engine's score) with the best ``WINDOW`` hits' scores
    raised by their best sentence, best first again: the raw ``_score`` (which orders) by the
    lift, the calibrated score recomputed from it (``offset``: the raw sum's above it)."""
    if not applies(params) or vector is None or not ranked:
        return ranked
    q = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm == 0:
        return ranked
    q = q / norm
    _, span = vec_scale(params)
    # a cosine moves the engine's (1 + cos) / 2 scale by half as much
    per_cos = mode_weights(params)["vec"] * params.memory_sentence_weight / (2.0 * span)
    out: Ranked = []
    for i, (db, hit, score) in enumerate(ranked):
        gain = _gain(hit, q) if i < WINDOW else 0.0
        if gain > 0:
            lift = per_cos * gain
            raw = float(hit["_score"]) + lift
            hit = {**hit, "_score": raw, GAIN: lift}
            score = calibrated(raw, offset)
        out.append((db, hit, score))
    return sorted(out, key=lambda r: -float(r[1]["_score"]))


def _gain(hit: dict[str, Any], q: np.ndarray) -> float:
    """How much closer to ``q`` the hit's best sentence is than the whole memory (≥ 0)."""
    got = hit.get("fields", {})
    whole, parts = got.get(VECTOR_CODE_FIELD), got.get(SENTENCE_CODES_FIELD)
    if not whole or not parts:
        return 0.0
    sentences = vector_code.decode_many(parts[0], len(q))
    if not len(sentences):
        return 0.0
    return max(0.0, float((sentences @ q).max()) - float(vector_code.decode(whole[0]) @ q))
