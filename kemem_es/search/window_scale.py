"""A dialogue window rebuilt from its pieces' vectors, scored on the joint window's scale.

The vector floor and ceiling (and so what ``score_threshold`` 0.5 means) were calibrated with
the joint window: the earlier turns and the utterance embedded as one text, one vector of the
model. A window rebuilt from its pieces (``context_vector="split"``: the earlier turns' window
and the utterance; ``"turns"``: each turn) is their token-weighted mean ``r`` of unit
vectors, whose length ``n`` is below 1 (the pieces point apart), renormalised: ``d = r/n``.
That division lifts every cosine of the window by ``1/n`` — unrelated memories as much as the
one it means — because an embedding model's vectors share a large common direction (m3e: any
two texts have cosine ~0.6), which the mean keeps whole while the pieces' specific parts
cancel. So a session's recall (split) scored higher than the same query with the joint window:
at threshold 0.5 a non-relevant memory passed in 66 % of the Chinese long dialogues instead of
39 %.

The two bounds: read without the renormalisation (``r·m``, the pieces' mean cosine), every
memory scores below what the joint window gives it, the memories the dialogue is about most
(the joint encoding of the whole dialogue adds what its pieces mean together); fully
renormalised, every memory is lifted above it. The window's cosines are read between the two, at
``n^γ`` of their renormalised value, ``γ = GAMMA · s`` with ``s`` the earlier turns' share of
the window's tokens (on the log scale, the share of the lift taken back: a window that is
mostly the utterance keeps most of its lift, as the joint encoding of a short dialogue does),
and blended with the utterance as before: ``(w·u·m + (1 − w)·n^γ·d·m) / |w·u + (1 − w)·d|``.
That is the engine's cosine ``c`` of the unit vector along ``w·u + (1 − w)·n^γ·d``, times
``f = |w·u + (1 − w)·n^γ·d| / |w·u + (1 − w)·d|`` (≤ 1): the query's vector floor and ceiling
are divided by ``f`` (``rescaled``), so the engine's script, the threshold, the signals
``explain`` shows and the entity evidence read the score on joint's scale with no other
change, no extra model call and no extra request. ``n``, ``s`` and ``f`` are ratios, so the
rule holds on any model's cosine scale (its floor and ceiling come from its own
calibration, embed.calibrate). The query path applies it to ``"split"`` only: ``"turns"``
(many pieces, a smaller ``n``) keeps its lift until it is measured (bench/results/2026-11-29-lift:
offline the same rule takes its relevant memories' cosines 0.017–0.029 below joint's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kemem_es.contract.params import QueryParams

# The share of the renormalisation's lift (1/n) taken back, on the log scale, per unit of the
# window that is not the utterance: γ = GAMMA × (the earlier turns' share of the window's
# tokens). Measured on the Chinese dialogue sets with m3e (bench/results/2026-11-29-lift): a
# constant γ fits either the short dialogues (~0.15: the utterance is most of the window) or the
# long ones (~0.4), the same GAMMA × share fits both.
GAMMA = 0.5


def pieces_mean(vectors: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """``r``: the pieces' unit vectors weighted by their shares (weights summing to 1), not
    renormalised (its length ``n`` ≤ 1 says how far apart the pieces point)."""
    if not len(vectors):
        raise ValueError("no vectors to combine")
    w = np.asarray([max(float(x), 0.0) for x in weights], dtype=np.float64)
    if w.sum() <= 0:
        w = np.ones(len(vectors), dtype=np.float64)
    units = np.asarray(vectors, dtype=np.float64)
    units = units / np.maximum(np.linalg.norm(units, axis=1, keepdims=True), 1e-12)
    out: np.ndarray = (units * (w / w.sum())[:, None]).sum(axis=0)
    return out


def rebuilt_blend(
    u: np.ndarray, r: np.ndarray, w: float, share: float, gamma: float = GAMMA
) -> tuple[np.ndarray, float]:
    """The query vector of a window rebuilt as ``r`` (``pieces_mean``), blended with ``u`` (the
    utterance's or a sentence's vector) at weight ``w``; ``share``: the part of the window's
    tokens that are not the utterance's. Returns the unit vector to send and the factor its
    engine cosine is read at (1: nothing to rescale)."""
    g = gamma * min(max(share, 0.0), 1.0)
    u = np.asarray(u, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    n = float(np.linalg.norm(r))
    if n <= 1e-12:  # nothing to blend with
        return u / max(float(np.linalg.norm(u)), 1e-12), 1.0
    d = r / n
    plain = w * u + (1.0 - w) * d
    sent = w * u + (1.0 - w) * min(n, 1.0) ** g * d
    size, full = float(np.linalg.norm(sent)), float(np.linalg.norm(plain))
    if size <= 1e-12 or full <= 1e-12:
        return plain / max(full, 1e-12), 1.0
    factor = size / full
    return sent / size, (1.0 if abs(factor - 1.0) < 1e-9 else factor)


def rescaled(params: QueryParams, factor: float) -> QueryParams:
    """``params`` whose vector floor and ceiling (events' and entities') read the engine's
    cosine ``c`` as ``f·c``: (f·c − floor) / (ceil − floor) = (c − floor/f) / (ceil/f −
    floor/f). The caller's chosen fields stay marked as theirs."""
    if factor == 1.0 or factor <= 0:
        return params
    out = params.model_copy(
        update={
            "vec_floor": params.vec_floor / factor,
            "vec_ceil": params.vec_ceil / factor,
            "entity_vec_floor": params.entity_vec_floor / factor,
            "entity_vec_ceil": params.entity_vec_ceil / factor,
        }
    )
    object.__setattr__(out, "__pydantic_fields_set__", set(params.model_fields_set))
    return out
