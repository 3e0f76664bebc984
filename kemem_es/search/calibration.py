"""The vector term's scale (the model's own floor and ceiling on the engine's (1+cos)/2) and
the engine's raw scores brought back to the calibrated [0, 1] score."""

from __future__ import annotations

from collections.abc import Sequence

from kemem_es.contract.params import QueryParams


def vec_scale(params: QueryParams, entity: bool = False) -> tuple[float, float]:
    """(lo, span) on the engine's (1+cos)/2 scale: vec = (s − lo) / span (``entity``: the
    entity evidence's own calibration)."""
    floor, ceil = (
        (params.entity_vec_floor, params.entity_vec_ceil)
        if entity
        else (params.vec_floor, params.vec_ceil)
    )
    lo = (1.0 + floor) / 2.0
    return lo, (1.0 + ceil) / 2.0 - lo


def vec_offset(params: QueryParams, weights: dict[str, float]) -> float:
    """What the engine's raw sum carries above the calibrated score (subtract it)."""
    w = weights.get("vec", 0.0)
    if w <= 0:
        return 0.0
    lo, span = vec_scale(params)
    return w * lo / span


def saturated(raw: float, k: float) -> float:
    """Native scoring's raw BM25 as the script scores it: bm25 / (bm25 + k)."""
    return raw / (raw + k) if raw > 0 else 0.0


def calibrated(raw: float, offset: float) -> float:
    """The engine's raw fused score → the calibrated score in [0, 1]."""
    return min(max(raw - offset, 0.0), 1.0)


def sentence_share(
    params: QueryParams, weights: dict[str, float], parts: Sequence[Sequence[float]]
) -> float:
    """The share of the vector weight that goes to the best sentence (0: no sentences)."""
    return params.sentence_weight if parts and weights.get("vec", 0.0) > 0 else 0.0


def mode_weights(params: QueryParams) -> dict[str, float]:
    """The signal weights a mode's scores are made of (here, below the modes' bodies: the
    search steps that rescore a window read them too)."""
    if params.mode == "bm25":
        return {"kw": 1.0}
    if params.mode == "vector":
        return {"vec": 1.0}
    return params.weights.model_dump()
