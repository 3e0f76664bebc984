"""Topic shift: the earlier turns' words count for a memory only where the utterance itself
points near it.

In a chat, the earlier turns often name one memory in its own words ("你高数挂科那次后来补过了吧")
and the last turn moves on to another of the same thread ("专业课也有翻车的 …竹条拼的那个…").
The earlier turns' words (``QueryText.words``: context words, weight × ``context_decay`` per
turn back) then give keyword coverage to the memory the conversation already holds, which
outranks the one the last turn means. Where the last turn only continues or alludes to the
window ("对啊，跟那次一样"), those words are what finds the memory, and must stay.

What tells the two apart is the utterance's own vector: a memory the earlier turns name but
the last turn has moved away from sits far from the utterance, while the memory the last turn
means (or, for a vague last turn, every memory: a vague turn is close to none) sits near the
best. So, among the hits the engine returns (the window anchor feedback reorders), a hit whose
cosine to the utterance's own vector is more than ``context_words_gate`` (on the model's
calibrated vector scale, ``vec_floor``..``vec_ceil``) below the best hit's loses the earlier
turns' share of its keyword coverage.

The engine scores the earlier turns' coverage clauses as usual; each of their constant-score
pieces is named (``_name`` carries its word's index and its boost, numbers of this package's
own, never user text), so each hit's ``matched_queries`` says which pieces it matched and its
earlier-turn coverage is summed here exactly as the engine's ``dis_max`` did (best piece per
word). Only the exact path returns them (the approximate path's coverage is in its rescore,
whose names the engine does not report): there nothing changes. No model call, no round trip:
the utterance's vector is the one the query vector was blended from, the hits' vectors are the
int8 codes anchor feedback reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from kemem_es.contract.params import QueryParams
from kemem_es.search.calibration import calibrated
from kemem_es.search.clauses import SearchWord
from kemem_es.store import vector_code
from kemem_es.store.layout import VECTOR_CODE_FIELD

T = TypeVar("T")

NAME_PREFIX = "kemem_earlier:"


def active(params: QueryParams) -> bool:
    """The gate is on (fusion only: the mode whose earlier-turn clauses stand apart)."""
    return params.mode == "fusion" and params.context_words_gate > 0


def applies(params: QueryParams, words: Sequence[SearchWord]) -> bool:
    """The gate is on and this utterance tells its own episode: it has earlier-turn words to
    gate and at least ``context_words_gate_words`` search words of its own (TF-IDF base
    words; bridges and expansions do not count)."""
    if not active(params) or not any(w.earlier for w in words):
        return False
    own = sum(1 for w in words if w.level is None and not w.context and w.weight > 0)
    return own >= params.context_words_gate_words


def named(clauses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The earlier turns' coverage clauses (one ``dis_max`` of constant scores per word,
    ``clauses.coverage_parts``) with each constant score named ``prefix<word>:<boost>``; the
    score is unchanged."""
    out = []
    for i, clause in enumerate(clauses):
        pieces = clause.get("dis_max", {}).get("queries")
        if not pieces:
            out.append(clause)
            continue
        renamed = []
        for piece in pieces:
            inner = piece.get("constant_score")
            if inner is None:
                renamed.append(piece)
                continue
            name = f"{NAME_PREFIX}{i}:{inner['boost']}"
            renamed.append({"constant_score": {**inner, "_name": name}})
        out.append({"dis_max": {**clause["dis_max"], "queries": renamed}})
    return out


def is_named(clauses: Sequence[dict[str, Any]]) -> bool:
    """Whether ``clauses`` are the named earlier-turn clauses (``named``): the hits must
    then carry their vector codes."""
    return any(
        str(piece.get("constant_score", {}).get("_name", "")).startswith(NAME_PREFIX)
        for clause in clauses
        for piece in clause.get("dis_max", {}).get("queries", ())
    )


def earlier_coverage(hit: dict[str, Any]) -> float:
    """The earlier turns' coverage a hit holds: per word, its best matched piece's boost (the
    engine's ``dis_max``), summed over the words. 0 when the hit carries no names."""
    matched = hit.get("matched_queries") or ()
    best: dict[str, float] = {}
    for name in matched:  # a list of names (or a map name → score on engines that send one)
        if not isinstance(name, str) or not name.startswith(NAME_PREFIX):
            continue
        word, _, boost = name[len(NAME_PREFIX) :].partition(":")
        try:
            value = float(boost)
        except ValueError:
            continue
        best[word] = max(best.get(word, 0.0), value)
    return float(sum(best.values()))


def _code(hit: dict[str, Any]) -> np.ndarray | None:
    codes = hit.get("fields", {}).get(VECTOR_CODE_FIELD)
    return vector_code.decode(codes[0]) if codes else None


def gated(
    params: QueryParams,
    ranked: Sequence[tuple[T, dict[str, Any], float]],
    utterance: Sequence[float] | None,
    w_kw: float,
    offset: float,
) -> list[tuple[T, dict[str, Any], float]]:
    """``ranked`` (tag, engine hit, calibrated score), each hit far from the utterance (its
    calibrated cosine to ``utterance`` more than ``context_words_gate`` below the best hit's)
    without the earlier turns' coverage (``w_kw`` × it off its engine ``_score``, the
    calibrated score recomputed with ``offset``), re-sorted by the engine score. Unchanged
    when off, without the utterance's vector, or when the hits carry no codes or no named
    earlier-turn matches."""
    if not active(params) or utterance is None or len(ranked) < 2:
        return list(ranked)
    u = np.asarray(utterance, dtype=np.float32)
    norm = float(np.linalg.norm(u))
    if norm <= 0:
        return list(ranked)
    u = u / norm
    span = params.vec_ceil - params.vec_floor
    near: list[float | None] = []
    for _, hit, _ in ranked:
        code = _code(hit)
        near.append(None if code is None else (float(code @ u) - params.vec_floor) / span)
    known = [x for x in near if x is not None]
    if not known:
        return list(ranked)
    bar = max(known) - params.context_words_gate
    out = []
    for (tag, hit, score), x in zip(ranked, near, strict=True):
        cut = w_kw * min(earlier_coverage(hit), 1.0) if x is not None and x < bar else 0.0
        if cut > 0:
            raw = float(hit["_score"]) - cut
            hit = {**hit, "_score": raw}
            score = calibrated(raw, offset)
        out.append((tag, hit, score))
    out.sort(key=lambda r: -float(r[1]["_score"]))  # stable: ties keep the engine's order
    return out
