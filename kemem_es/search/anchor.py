"""Anchor feedback: when one memory clearly answers a query, the memories close to it in
meaning rise with it (a guarded form of pseudo-relevance feedback).

A dialogue often concerns a thread of memories, not one: the hot pot on the birthday and the
other hot pot with the same friends, the first vet visit and the second. The query names one of
them; the others share little of its wording, but their vectors sit close to the one that
matched. So when the best hit leads the second by at least ``anchor_gate`` (a confident
anchor), every other hit of the answer's window gains

    anchor_weight · max(0, cos(hit, anchor) − anchor_floor) / (1 − anchor_floor)

and the anchor stays first. Without the gate, feedback from a wrong anchor cost MemDaily (one
memory per question) 0.009 R@5 offline; with it, nothing measurable. On the engine (round 11 of
bench/results/2026-11-26-quality): long dialogue set R@5 0.689 → 0.725, short set 0.934 →
0.937, the blind check set unchanged.

The engine cannot compare two hits of one request, so the comparison runs here, on the window
the engine returned (``anchor_window`` hits, each with its vector's int8 code as a doc value:
``store.vector_code``). It only reorders and raises memories that already cleared the score
threshold, so what the threshold means does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from kemem_es.search.params import QueryParams
from kemem_es.store import vector_code
from kemem_es.store.layout import VECTOR_CODE_FIELD

T = TypeVar("T")

FEEDBACK_MODES = ("fusion", "two_stage")


def active(params: QueryParams) -> bool:
    return params.anchor_weight > 0 and params.mode in FEEDBACK_MODES


def request_size(params: QueryParams) -> int | None:
    """How many hits the event search returns: the feedback's window when it is on (the hits
    it may raise into the answer), else the engine's default (the limit)."""
    return max(params.limit, params.anchor_window) if active(params) else None


def code_fields(params: QueryParams) -> dict[str, Any]:
    """What the event search body adds so that hits carry their vector codes."""
    return {"docvalue_fields": [VECTOR_CODE_FIELD]} if active(params) else {}


def _vector(hit: dict[str, Any]) -> np.ndarray | None:
    codes = hit.get("fields", {}).get(VECTOR_CODE_FIELD)
    return vector_code.decode(codes[0]) if codes else None


def feedback(
    params: QueryParams, ranked: Sequence[tuple[T, dict[str, Any], float]]
) -> list[tuple[T, dict[str, Any], float, float]]:
    """``ranked`` (tag, engine hit, calibrated score), best first, with each hit's gain added
    to its score and the hits re-sorted: (tag, hit, score, gain). The anchor keeps its place and
    score; no other hit's score passes the anchor's. Hits without a code (written before codes
    existed) gain nothing; nothing changes when the anchor has none."""
    out = [(tag, hit, score, 0.0) for tag, hit, score in ranked]
    if not active(params) or len(out) < 2 or out[0][2] - out[1][2] < params.anchor_gate:
        return out
    anchor = _vector(out[0][1])
    if anchor is None:
        return out
    top = out[0][2]
    span = 1.0 - params.anchor_floor
    rest = []
    for tag, hit, score, _ in out[1:]:
        vec = _vector(hit)
        cos = float(vec @ anchor) if vec is not None else params.anchor_floor
        gain = params.anchor_weight * max(0.0, cos - params.anchor_floor) / span
        rest.append((tag, hit, min(score + gain, top), gain))
    rest.sort(key=lambda r: -r[2])  # stable: equal scores keep the engine's order
    return [out[0], *rest]
