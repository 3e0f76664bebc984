"""The query options as keyword arguments, typed: ``Kemem.query(text, **options)`` and
``Kemem.search`` take ``Unpack`` of these, so a type checker sees every option's name and type
and flags a misspelt one (at run time ``QueryParams`` refuses it: ``extra="forbid"``). What each
option means: ``QueryParams`` (contract/params.py), whose fields these mirror exactly (a unit
test keeps them in step). The types are what a caller may pass: a mapping where a sub-model is
expected, a date string or a datetime for ``now``, a list of turns for ``context``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict

from kemem_es.contract.params import EntityWeights, Mode, Path_, Weights

WeightsInput = Weights | Mapping[str, float]
EntityWeightsInput = EntityWeights | Mapping[str, float]
Turn = str | Mapping[str, Any]


class SearchOptions(TypedDict, total=False):
    """Options of ``Kemem.search`` beyond its own keywords (``limit``, ``filters``,
    ``threshold``, ``session_id``); ``top_k`` is refused there (it is not the number of
    results)."""

    entity_limit: int | None
    bridge_threshold: float
    entity_threshold: float
    score_threshold: float
    mode: Mode
    path: Path_
    weights: WeightsInput
    latin_weights: WeightsInput
    latin_vec_floor: float
    latin_vec_ceil: float
    half_life_days: float
    bm25_k: float
    vec_floor: float
    vec_ceil: float
    entity_vec_floor: float
    entity_vec_ceil: float
    entity_weights: EntityWeightsInput
    latin_entity_weights: EntityWeightsInput
    utterance_weight: float
    utterance_share_weight: float
    context_decay: float
    context_turns: int
    context_vector: Literal["joint", "earlier", "turns", "split"]
    sentence_weight: float
    max_sentences: int
    prefilter: bool
    rewrite: bool
    strength_k: float
    now: datetime | str | None
    exclude_ids: list[str]
    past: bool | None  # facts that change (docs/facts.md)
    slot_boost: float
    period_boost: float  # time-aware questions (docs/facts.md)
    context: str | Sequence[Turn]
    user_name: str | None
    agent_name: str | None
    max_words: int
    strategy: Literal[0, 1]
    filter_levels: list[int]
    expand: bool
    expansion_share: float
    proximity_share: float
    latin_proximity_share: float
    anchor_weight: float
    latin_anchor_weight: float
    anchor_floor: float
    anchor_gate: float
    anchor_window: int
    memory_sentence_weight: float
    latin_memory_sentence_weight: float
    contiguity_weight: float
    latin_contiguity_weight: float
    contiguity_scale: float
    contiguity_window: int
    expand_candidates: int
    expand_min_cos: float
    explain: bool
    ann_k: int
    kw_window: int
    rrf_k: int
    two_stage_window: int
    vector_candidates: bool
    latin_vector_candidates: bool
    context_words_gate: float
    context_words_gate_words: int
    latin_context_words_gate: float


class QueryOptions(SearchOptions, total=False):
    """Options of ``Kemem.query`` (every ``QueryParams`` field but the scope)."""

    limit: int
    filters: Mapping[str, Any] | None
    top_k: int  # base words of the keyword expansion, not results
