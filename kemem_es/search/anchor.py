"""Anchor feedback: when one memory clearly answers a query, the memories close to it in
meaning or in time rise with it (a guarded form of pseudo-relevance feedback).

A dialogue often concerns a thread of memories, not one: the hot pot on the birthday and the
other hot pot with the same friends, the first vet visit and the second, the breakup and the
night of deleting photos after it. The query names one of them; the others share little of its
wording. Two things tie them to the one that matched:

- **meaning**: their vectors sit close to it. Every other hit among the ``anchor_window`` best
  gains ``anchor_weight · max(0, cos(hit, anchor) − anchor_floor) / (1 − anchor_floor)``;
- **time** (temporal contiguity: recalling an episode brings back what happened around it):
  every other memory of the user's among the ``contiguity_window`` best gains
  ``contiguity_weight · 0.5^(|t(hit) − t(anchor)| / h)``, with the half-life ``h`` a share
  (``contiguity_scale``) of the median time between the anchor and those hits. Relative to the
  user's own timeline, "close" is about ten weeks in 2.5 years of companion memories and a few
  hours in a week of messages, and a scope whose memories all carry one time gains nothing.

Both apply only when the best hit leads the second by at least ``anchor_gate`` (a confident
anchor); the anchor stays first. Without the gate, feedback from a wrong anchor cost MemDaily (one
memory per question) 0.009 R@5 offline; with it, nothing measurable. On the engine (rounds 11 and
13 of bench/results/2026-11-26-quality): meaning lifted the long dialogue set's R@5 0.689 → 0.725
and the short set 0.934 → 0.937; time lifted the whole dialogue dev set 0.867 → 0.875; neither
moved the blind check set or MemDaily per user.

The engine cannot compare two hits of one request, so the comparison runs here, on the window
the engine returned (each hit with its vector's int8 code and, for the user's own memories, its
time as doc values: ``store.vector_code``). It only reorders and raises memories that already
cleared the score threshold, so what the threshold means does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from kemem_es.contract.params import QueryParams
from kemem_es.models import Database
from kemem_es.search import best_sentence
from kemem_es.store import vector_code
from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD

T = TypeVar("T")

FEEDBACK_MODES = ("fusion", "two_stage")
DAY_MS = 86_400_000.0


def _by_meaning(params: QueryParams) -> bool:
    return params.anchor_weight > 0


def _by_time(params: QueryParams) -> bool:
    return params.contiguity_weight > 0


def active(params: QueryParams) -> bool:
    return params.mode in FEEDBACK_MODES and (_by_meaning(params) or _by_time(params))


def _timed(params: QueryParams, db: Database) -> bool:
    """Closeness in time is looked for among the user's own memories: the agent's official
    ones happen on the agent's timeline, not in the user's episodes (and each hit more that a
    request returns costs about 0.05 ms on the 100k store)."""
    return _by_time(params) and db == "user"


def request_size(params: QueryParams, db: Database) -> int | None:
    """How many hits ``db``'s event search returns: the feedback's windows when it is on (the
    hits it may raise into the answer), else the engine's default (the limit)."""
    if not active(params):
        return None
    meaning = params.anchor_window if _by_meaning(params) else 0
    time = params.contiguity_window if _timed(params, db) else 0
    return max(params.limit, meaning, time)


def code_fields(params: QueryParams, db: Database, codes: bool = False) -> dict[str, Any]:
    """What ``db``'s event search body adds so that hits carry their vector codes and times
    (``codes``: the codes in any case, for the topic-shift gate, search.topic_shift)."""
    fields: list[str | dict[str, str]] = []
    if (active(params) and _by_meaning(params)) or codes:
        fields.append(VECTOR_CODE_FIELD)
    fields += [f for f in best_sentence.fields(params) if f not in fields]
    if active(params) and _timed(params, db):
        fields.append({"field": TIME_FIELD, "format": "epoch_millis"})
    return {"docvalue_fields": fields} if fields else {}


def _vector(hit: dict[str, Any]) -> np.ndarray | None:
    codes = hit.get("fields", {}).get(VECTOR_CODE_FIELD)
    return vector_code.decode(codes[0]) if codes else None


def _days(hit: dict[str, Any]) -> float | None:
    values = hit.get("fields", {}).get(TIME_FIELD)
    return float(values[0]) / DAY_MS if values else None


def half_life(params: QueryParams, anchor: float, times: Sequence[float | None]) -> float:
    """The contiguity half-life in days for an anchor at ``anchor`` (days) among hits at
    ``times``: ``contiguity_scale`` × their median distance to it; 0 (no gain) when they carry
    no times or all share the anchor's."""
    gaps = [abs(t - anchor) for t in times if t is not None]
    return params.contiguity_scale * float(np.median(gaps)) if gaps else 0.0


def feedback(
    params: QueryParams, ranked: Sequence[tuple[T, dict[str, Any], float]]
) -> list[tuple[T, dict[str, Any], float, float]]:
    """``ranked`` (tag, engine hit, calibrated score), best first, with each hit's gain added
    to its score and the hits re-sorted: (tag, hit, score, gain). The anchor keeps its place and
    score; no other hit's score passes the anchor's, and ``gain`` is what was applied after
    that cap (explain's ``signals.anchor``: the signals add up to the score). Hits without a
    code or a time (written before they existed) gain nothing by it; nothing changes when the
    anchor lacks both."""
    out = [(tag, hit, score, 0.0) for tag, hit, score in ranked]
    if not active(params) or len(out) < 2 or out[0][2] - out[1][2] < params.anchor_gate:
        return out
    first = out[0][1]
    anchor = _vector(first) if _by_meaning(params) else None
    when = _days(first) if _by_time(params) else None
    # the window's times, read once: they set the half-life and then each hit's gain
    times: list[float | None] = []
    h = 0.0
    if when is not None:
        times = [_days(hit) for _, hit, _, _ in out[1 : params.contiguity_window]]
        h = half_life(params, when, times)
    if anchor is None and h <= 0:
        return out
    top = out[0][2]
    span = 1.0 - params.anchor_floor
    rest = []
    for rank, (tag, hit, score, _) in enumerate(out[1:], 1):
        gain = 0.0
        if anchor is not None and rank < params.anchor_window:
            vec = _vector(hit)
            cos = float(vec @ anchor) if vec is not None else params.anchor_floor
            gain += params.anchor_weight * max(0.0, cos - params.anchor_floor) / span
        t = times[rank - 1] if h > 0 and rank <= len(times) else None
        if t is not None and when is not None:
            gain += params.contiguity_weight * 0.5 ** (abs(t - when) / h)
        raised = min(score + gain, top)
        rest.append((tag, hit, raised, raised - score))
    rest.sort(key=lambda r: -r[2])  # stable: equal scores keep the engine's order
    return [out[0], *rest]
