"""A fake embedding model for the query-vector unit tests: a unit vector per text from its hash,
every call and its texts counted, a token per character."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Counting:
    """Counts the model calls a query makes (``calls``: the texts of each call)."""

    name = "counting"
    dim = 16

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def _vec(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        v = rng.standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self._vec(t) for t in texts])

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]
