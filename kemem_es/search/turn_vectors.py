"""The dialogue window's vector from its turns' own vectors (``context_vector="turns"``).

The joint window (the earlier turns and the utterance embedded as one text) is the longest text
a chat query embeds: 6–7× the utterance's tokens with six earlier turns, so the model's time
grows as much. Under mean pooling the joint window's vector is close to the mean of its
tokens' states, that is to the token-count-weighted mean of each piece's own vector (the
states lose only the context across turns). Each turn's vector is embedded once: the vector of
an utterance goes into a cache, and when that utterance comes back as an earlier turn of the
next query, it is read from there; an agent's reply is embedded in the query's one model call
(with the utterance and its sentences) or, when the app calls ``prepare_context`` after the
reply, before the user speaks. A chat turn then embeds about what a bare utterance does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from kemem_es.bounded import Bounded

# Query-side vectors of the texts said in dialogues (a few KB each: 2 KB for 512 dims):
# thousands of live conversations' recent turns.
TURN_CACHE_SIZE = 8_192


def turn_key(text: str) -> str:
    """The cache's key for a text: its words (a turn's own line breaks became spaces in the
    context's line; whitespace does not change the model's tokens)."""
    return " ".join(text.split())


class TurnCache:
    """Vectors of turn texts by their words, the most recently used kept (``Bounded``: safe to
    share between the server's threads, never locked around a model call)."""

    def __init__(self, size: int = TURN_CACHE_SIZE) -> None:
        self.size = max(1, size)
        self._vectors: Bounded[str, np.ndarray] = Bounded(self.size)

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and turn_key(text) in self._vectors

    def found(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``texts`` (by text), each marked as just used. Read once into
        the caller's dict: another thread may evict an entry right after."""
        out: dict[str, np.ndarray] = {}
        for text in texts:
            vec = self._vectors.get(turn_key(text))
            if vec is not None:
                out[text] = vec
        return out

    def put(self, text: str, vector: np.ndarray) -> None:
        key = turn_key(text)
        if key:
            self._vectors.put(key, vector)


def weighted_mean(vectors: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Σ wᵢ·vᵢ, renormalised to unit length: the window's vector from its pieces' vectors,
    each weighted by its share of the window (its tokens)."""
    w = np.asarray([max(float(x), 0.0) for x in weights], dtype=np.float64)
    if not len(vectors):
        raise ValueError("no vectors to combine")
    if w.sum() <= 0:
        w = np.ones(len(vectors), dtype=np.float64)
    vec = (np.asarray(vectors, dtype=np.float64) * w[:, None]).sum(axis=0)
    return vec / max(float(np.linalg.norm(vec)), 1e-12)


def missing_turns(
    texts: Sequence[str], cache: TurnCache
) -> tuple[dict[str, np.ndarray], list[str]]:
    """(the cached vectors of ``texts``, the texts to embed: each missing one once, in order)."""
    found = cache.found(texts)
    todo = [t for t in dict.fromkeys(texts) if t not in found and turn_key(t)]
    return found, todo


def turn_pieces(
    utterance: tuple[str, np.ndarray],
    turns: Sequence[str],
    vectors: dict[str, np.ndarray],
    length: Callable[[str], int],
) -> tuple[list[np.ndarray], list[float]]:
    """The window's pieces: the utterance's and each kept turn's vector, with its tokens
    (``length``). A turn without a vector (nothing to embed: blank) is left out."""
    text, u = utterance
    pieces = [(u, length(text))]
    pieces += [(vectors[t], length(t)) for t in turns if t in vectors]
    return [v for v, _ in pieces], [float(n) for _, n in pieces]


def window_from_turns(
    utterance: tuple[str, np.ndarray],
    turns: Sequence[str],
    vectors: dict[str, np.ndarray],
    length: Callable[[str], int],
) -> np.ndarray:
    """The window's vector: the utterance's and each kept turn's vector weighted by its tokens
    (``length``), renormalised."""
    return weighted_mean(*turn_pieces(utterance, turns, vectors, length))
