"""A prepared window vector as a record another process can adopt (docs/sessions.md).

Each process keeps the window vectors it prepared in memory (``QueryText``); a server of
several workers, or several servers, answers a session's next message in whichever process
gets it. A session therefore also writes its prepared vector onto its state document, and a
context whose process did not prepare it adopts it from the state it reads anyway. The record
names the window by a digest of its text (the vector is only ever used for that exact window)
and the model that computed it (another model's vector is never mixed in)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

DIGITS = 7  # a stored component's decimals: below what the query vector keeps (5)


def digest(window: str) -> str:
    return hashlib.sha256(window.encode("utf-8")).hexdigest()[:32]


def record(window: str, vector: np.ndarray, model: str) -> dict[str, Any]:
    return {
        "digest": digest(window),
        "model": model,
        "vector": [round(float(x), DIGITS) for x in vector],
    }


def vector_of(rec: Mapping[str, Any], window: str, model: str, dim: int) -> np.ndarray | None:
    """The record's vector when it is this window's, by this model, of this dimension."""
    vec = rec.get("vector")
    if (
        rec.get("digest") != digest(window)
        or rec.get("model") != model
        or not isinstance(vec, list)
        or len(vec) != dim
    ):
        return None
    try:
        out = np.asarray(vec, dtype=float)
    except (TypeError, ValueError):
        return None
    return out if np.all(np.isfinite(out)) else None
