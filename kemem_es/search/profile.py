"""A query's profile: a mostly latin-script dialogue runs with the ``latin_*`` settings (the
English weights, cosine scale, proximity and anchor feedback) unless the caller chose them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kemem_es.contract.params import QueryParams

_HAN = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def mostly_latin(text: str) -> bool:
    """English rather than Chinese: more latin words than half its Han characters (a word
    carries about two characters' meaning), so 我用iPhone拍的 stays Chinese."""
    return len(_LATIN_WORD.findall(text)) * 2 > len(_HAN.findall(text))


CALIBRATION = frozenset({"weights", "vec_floor", "vec_ceil"})
ENTITY_CALIBRATION = frozenset({"entity_weights", "entity_vec_floor", "entity_vec_ceil"})


def script_params(params: QueryParams, texts: Sequence[str]) -> tuple[QueryParams, str]:
    """The parameters a query runs with, and its profile: ``latin`` (``latin_weights`` on
    the ``latin_vec_*`` scale, and ``latin_vector_candidates`` unless the caller chose
    ``vector_candidates``) when the utterance and the turns used are mostly latin script and
    the caller chose none of the weights or the event cosine scale; else ``default``.
    A latin-script query's entities take ``latin_entity_weights`` unless the caller set the
    entity weights or the entity cosine scale, and its events ``latin_proximity_share`` and
    ``latin_anchor_weight``, ``latin_contiguity_weight`` and ``latin_memory_sentence_weight``
    (and ``latin_context_words_gate``) unless the caller set ``proximity_share``,
    ``anchor_weight``, ``contiguity_weight`` or ``memory_sentence_weight`` (or
    ``context_words_gate``)."""
    if not mostly_latin("\n".join(texts)):
        return params, "default"
    chosen = params.model_fields_set
    update: dict[str, object] = {}
    if not ENTITY_CALIBRATION & chosen:
        update["entity_weights"] = params.latin_entity_weights
    if "proximity_share" not in chosen:
        update["proximity_share"] = params.latin_proximity_share
    if "anchor_weight" not in chosen:
        update["anchor_weight"] = params.latin_anchor_weight
    if "contiguity_weight" not in chosen:
        update["contiguity_weight"] = params.latin_contiguity_weight
    if "memory_sentence_weight" not in chosen:
        update["memory_sentence_weight"] = params.latin_memory_sentence_weight
    if "context_words_gate" not in chosen:  # search.topic_shift: m3e's English cosines
        update["context_words_gate"] = params.latin_context_words_gate
    profile = "default"
    if not CALIBRATION & chosen:
        update.update(
            weights=params.latin_weights,
            vec_floor=params.latin_vec_floor,
            vec_ceil=params.latin_vec_ceil,
        )
        if "vector_candidates" not in chosen:  # part of the profile: the vector is as weak
            update["vector_candidates"] = params.latin_vector_candidates
        profile = "latin"
    return (params.model_copy(update=update) if update else params), profile
