"""Query parameters: what a caller may set per request, validated once."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from kemem_es.errors import InvalidInput
from kemem_es.models import MAX_TEXT_CHARS, Time, check_utf8
from kemem_es.store.filters import compile_filters
from kemem_es.text.dialogue import context_lines

Mode = Literal["fusion", "bm25", "vector", "rrf", "two_stage"]
Path_ = Literal["auto", "exact", "approx"]
MAX_EXCLUDE_IDS = 10_000  # one terms clause; the engine refuses more than 65,536 terms
# A chat turn and its earlier turns, in characters: the query's CPU stages (jieba, expansion,
# the model) grow with the text, and a 500 KB utterance held a core for 70 s.
MAX_QUERY_CHARS = 4_000
MAX_CONTEXT_CHARS = MAX_TEXT_CHARS


class Weights(BaseModel):
    """Fusion weights; they must sum to 1 so the fused score stays in [0, 1].

    Calibrated on the dialogue dev sets (bench/dialogue/) and MemDaily: meaning (vector) and
    keyword evidence carry the score; time and strength only break near-ties (a memory a year
    older loses at most ``time``/2 = 0.015). How they were measured: docs/calibration.md."""

    model_config = ConfigDict(allow_inf_nan=False)  # NaN would pass the sum check below

    kw: float = Field(0.48, ge=0)
    vec: float = Field(0.47, ge=0)
    time: float = Field(0.03, ge=0)
    strength: float = Field(0.02, ge=0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> Weights:
        total = self.kw + self.vec + self.time + self.strength
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (got {total:.4f})")
        return self


class EntityWeights(BaseModel):
    """Entity evidence = kw·coverage + vec·(calibrated cosine) + name (when a search word is
    the entity's name: 外婆, 年糕, Linda), capped at 1. Not a sum to 1: the latin profile scales
    coverage alone (coverage 0.16 of an English query's words is evidence 0.4, the default
    ``entity_threshold``) and adds 0.2 for the name, one word of many in a long turn. Entity
    dev set (bench/entities), chosen on half a: Chinese recall 0.514 → 0.537 with the name,
    precision 0.865 → 0.858, turns about nothing still get nothing."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kw: float = Field(0.6, gt=0)
    vec: float = Field(0.4, ge=0)
    name: float = Field(0.1, ge=0)


_TEXT = {"type": "string"}
# A chat message's content: its text, null (a tool call), or parts whose text parts are read.
_CONTENT = {"anyOf": [_TEXT, {"type": "null"}, {"type": "array", "items": {"type": "object"}}]}
# What ``context`` accepts, for the request schema (OpenAPI): the validator turns a list of turns
# into the lines the field holds, so the field stays a string for every reader.
CONTEXT_INPUT: dict[str, Any] = {
    "anyOf": [
        _TEXT,
        {
            "type": "array",
            "items": {
                "anyOf": [
                    _TEXT,
                    {
                        "type": "object",
                        "properties": {k: _TEXT for k in ("role", "speaker", "name", "text")}
                        | {"content": _CONTENT},
                    },
                ]
            },
        },
    ]
}


class QueryParams(BaseModel):
    """One query's knobs (docs/SPEC.md §2); defaults follow the ES generation of the old service.
    An unknown knob is an error, never silently ignored; so is a NaN or infinite number (an
    infinite half-life overflowed the time decay)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    agent_id: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    limit: int = Field(5, ge=1, le=100)
    entity_limit: int | None = Field(
        None,
        ge=0,
        le=100,
        description="entities returned at most (None: the same as limit); the events do not "
        "depend on it (the entity bridge ranks its own window)",
    )
    # 0.34, not the 0.35 first set on the shipped int8 file's vectors: the README's dog example
    # bridges at 0.348 with the int8-channel file on a VNNI host; 0.30–0.37 move at most one
    # dialogue dev-set query with either file (bench/results/2026-12-01-auto).
    bridge_threshold: float = Field(
        0.34, ge=0, le=1, description="entity evidence that makes its name an event search word"
    )
    entity_threshold: float = Field(
        0.4, ge=0, le=1, description="least evidence (0.6·coverage + 0.4·vec) an entity needs"
    )
    score_threshold: float = Field(0.5, ge=0, le=1)
    mode: Mode = "fusion"
    path: Path_ = "auto"
    weights: Weights = Field(default_factory=Weights)
    # m3e (the reference model) is a Chinese model: on English text its cosines barely separate
    # the memory a query means from the others, so a query written mostly in latin script
    # leans on its words; English cosines sit higher, so its scale starts lower (so that 0.5
    # means what it means in Chinese). Used unless the caller sets ``weights`` or the event
    # cosine scale. Measurements: docs/calibration.md.
    latin_weights: Weights = Field(
        default_factory=lambda: Weights(kw=0.82, vec=0.13),
        description="fusion weights for a query in latin script (English), see script_params",
    )
    latin_vec_floor: float = Field(0.45, ge=-1, lt=1, description="latin script: cosine scored 0")
    latin_vec_ceil: float = Field(0.63, gt=-1, le=1, description="latin script: cosine scored 1")
    half_life_days: float = Field(
        365.0, gt=0, le=36_500, description="time decay's half-life (at most 100 years)"
    )
    bm25_k: float = Field(4.0, gt=0, description="bm25 mode only: bm25 / (bm25 + k)")
    # vec = (cos - floor) / (ceil - floor): m3e-small's cosines cluster in 0.6-0.75 for unrelated
    # text and reach ~0.85 for a paraphrase; the span (0.18) places "unrelated" near 0 and "same
    # meaning" near 1. The ranking depends only on w_kw : w_vec/(ceil − floor); the floor shifts
    # every event score, i.e. it sets what score_threshold means: here a memory with no word in
    # common but the same meaning (「胃疼」 → 木木's gastritis) still clears 0.5. Entities keep
    # their own scale (entity_vec_*). Measurements: docs/calibration.md.
    vec_floor: float = Field(0.593, ge=-1, lt=1, description="event cosine scored 0")
    vec_ceil: float = Field(0.773, gt=-1, le=1, description="event cosine scored 1")
    # The entity evidence (0.6·coverage + 0.4·vec) and its thresholds (entity_threshold,
    # bridge_threshold) were set on this scale; it does not move with the events' calibration.
    entity_vec_floor: float = Field(
        0.62, ge=-1, lt=1, description="entity evidence: cosine scored 0"
    )
    entity_vec_ceil: float = Field(
        0.80, gt=-1, le=1, description="entity evidence: cosine scored 1"
    )
    entity_weights: EntityWeights = Field(default_factory=EntityWeights)
    # m3e scores an English chat turn 0.70–0.83 against unrelated English entities, about what
    # it gives the related ones, so the cosine put an unrelated entity in front of 62 % of
    # unrelated English chat turns (entity dev set, bench/entities). English entity evidence is
    # keyword coverage, plus a bonus for a named entity (docs/calibration.md).
    latin_entity_weights: EntityWeights = Field(
        default_factory=lambda: EntityWeights(kw=2.5, vec=0.0, name=0.2),
        description="entity evidence for a query in latin script (English), see script_params",
    )
    # Dialogue queries: the current utterance and the earlier turns (newest weighs most). In a
    # long conversation the last turn is often vague ("对啊，跟那次一样") and the topic sits a few
    # turns back, so the window's turns share the vector and the keywords (docs/calibration.md).
    # The utterance's weight is its share of the dialogue (utterance_share_weight); this floor
    # only keeps it from vanishing behind a long context. 0.2 (chosen before the share rule)
    # lifted a vague last turn above its share: 0.05 measured better on the sets chosen on and
    # the check sets, most in stores with more memories (bench/results/2026-11-30-uw).
    utterance_weight: float = Field(
        0.05, ge=0, le=1, description="query vector = w·utterance + (1−w)·dialogue window"
    )
    # A long last turn that tells the episode itself ("那回一转身他就从软垫上栽下来…") carries
    # its memory; the window then mostly holds what was said before, often another memory of
    # the same thread. 0.7: fusion implied nDCG@10 +0.008, topic shift +0.035, every other dev
    # set within ±0.005 (paired intervals, bench/results/2026-11-29-quality).
    utterance_share_weight: float = Field(
        0.7,
        ge=0,
        le=1,
        description="utterance weight at least this × the utterance's share of the dialogue's "
        "characters (0: off, utterance_weight alone)",
    )
    context_decay: float = Field(
        0.7, ge=0, le=1, description="keyword weight of a turn k turns back: decay^k"
    )
    context_turns: int = Field(8, ge=0, le=20, description="earlier turns used (newest first)")
    # How the dialogue window becomes a vector (search.query_text): "joint" embeds the earlier
    # turns and the utterance as one text (the calibration's choice, one long model call per
    # query); "earlier" embeds the earlier turns alone, a text known before the user speaks:
    # its vector is cached (Kemem.prepare_context computes it off the request path), so a
    # chat turn costs about what a bare utterance does; "turns" makes the joint window's
    # vector from each turn's and the utterance's own vector, weighted by their tokens, and
    # caches each turn's (an utterance's vector is reused when it becomes an earlier turn;
    # search.turn_vectors); "split" rebuilds the joint window from two parts, the earlier
    # turns' window (cached and prepared as for "earlier") and the utterance, weighted by
    # their tokens (the utterance keeps its share of the window: a short dialogue's window is
    # mostly the utterance).
    context_vector: Literal["joint", "earlier", "turns", "split"] = Field(
        "joint",
        description="dialogue window vector: turns + utterance as one text (joint), the earlier "
        "turns alone (earlier), each turn's own cached vector weighted by its tokens (turns), "
        "or the earlier turns' and the utterance's vectors weighted by their tokens (split)",
    )
    # A multi-sentence utterance: part of the vector term goes to its best-matching sentence
    # (MemDaily, 2,954 queries: fusion R@5 per user 0.861 → 0.869, nDCG@10 0.925 → 0.933,
    # pooled R@5 0.309 → 0.319; the dialogue dev set, whose utterances are mostly one sentence:
    # unchanged; bench/results/2026-11-26-quality). Costs one more embedding call.
    sentence_weight: float = Field(
        0.5, ge=0, le=1, description="vector term = (1−w)·whole query + w·best sentence"
    )
    max_sentences: int = Field(
        4, ge=0, le=8, description="newest sentences of the utterance embedded on their own"
    )
    prefilter: bool = Field(True, description="skip the search for pure small talk (你好, 嗯嗯)")
    rewrite: bool = Field(
        False,
        description="an LLM rewrites the utterance and recent turns into one self-contained "
        "search text first (KEMEM_REWRITE_MODEL; a slow or failing rewriter: the plain query)",
    )
    strength_k: float = Field(30.0, gt=0, description="str = s / (s + k)")
    # the records' time rule (year 1000–9999, offset within ±18:00): the engine computes with it
    now: Time | None = None  # the records' time rule: a date string or datetime, no bare number
    exclude_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDE_IDS,
        description="ids (each event hit's index) of the user's events the prompt already shows "
        "(the overview timeline), left out of the answer; the agent's official events and the "
        "entities are never left out by them (an id is unique only within its index)",
    )
    filters: dict[str, Any] | None = Field(
        default=None, description="memory filters (store.filters), applied to every candidate"
    )
    # Facts that change (docs/facts.md).
    past: bool | None = Field(
        None,
        description="recall superseded facts too, older first within a slot (a question about "
        "the past); None: when the utterance asks about the past (以前, 之前, 那时候, 原来…)",
    )
    slot_boost: float = Field(
        0.7,
        ge=0,
        le=1,
        description="keyword evidence a memory gains when its slot is the one the utterance asks "
        "about (「我现在住哪」 → 居住地); memories without a slot are unaffected",
    )
    period_boost: float = Field(
        0.5,
        ge=0,
        le=4,
        description="time-aware questions (docs/facts.md): a returned memory of the period the "
        "utterance names (去年, 上个月, 上周, 前天, 小时候…) ranks as if its score were (1 + this) "
        "times higher (half that for 最近 / 这几天 / 现在); 0: off. Never lets a memory past "
        "the threshold",
    )
    context: Annotated[str, WithJsonSchema(CONTEXT_INPUT, mode="validation")] = Field(
        "",
        max_length=MAX_CONTEXT_CHARS,
        description="earlier turns, oldest first: one per line (speaker：text allowed), or a "
        f"list of turns (strings or {{role|speaker, content|text}} objects: system, developer "
        "and tool messages and a null content are left out, a content of parts gives its text "
        f"parts); at most {MAX_CONTEXT_CHARS:,} characters as lines",
    )
    user_name: str | None = None
    agent_name: str | None = None
    # ≤ 200 keeps words × fields under the engines' default 1024-clause limit.
    max_words: int = Field(100, ge=0, le=200)
    strategy: Literal[0, 1] = 1
    filter_levels: list[int] = Field(default_factory=lambda: [0])
    top_k: int = Field(10, ge=1, le=50)
    expand: bool = True
    # Expansions add nothing to the events' keyword term by default: on the dialogue dev set and
    # MemDaily pooled, every share > 0 measured equal or worse (bench/results/*-quality). They
    # still widen the entity candidates and are listed in additional_info.
    expansion_share: float = Field(
        0.0, ge=0, le=1, description="most that expansions add to the events' keyword coverage"
    )
    # Term proximity (fusion, two_stage): pairs of the utterance's strongest words found close
    # together in a memory's text add up to this much to the keyword coverage. Long English
    # memories (session summaries) mention many of a question's words far apart; the one that
    # tells the story has them together. Short (Chinese) memories gain nothing from it, so it is
    # off unless a query is latin script (docs/calibration.md).
    proximity_share: float = Field(
        0.0, ge=0, le=1, description="most that word pairs found close together add to coverage"
    )
    latin_proximity_share: float = Field(
        0.4, ge=0, le=1, description="proximity_share for a query in latin script (English)"
    )
    # Anchor feedback (fusion, two_stage; search.anchor): when the best memory leads the second
    # by ``anchor_gate``, the memories whose vectors are close to it (cosine above
    # ``anchor_floor``) gain up to ``anchor_weight``, among the ``anchor_window`` best. The gate
    # leaves a question with one clear memory as it was (docs/calibration.md).
    anchor_weight: float = Field(
        0.2, ge=0, le=1, description="most a memory close to a confident best hit gains"
    )
    # m3e's cosines between English memories all sit near 0.95, so closeness to the anchor says
    # nothing there: English dev set, dialogues 0.870 → 0.863 with it, sessions and questions
    # unchanged. Off for a latin-script query.
    latin_anchor_weight: float = Field(
        0.0, ge=0, le=1, description="anchor_weight for a query in latin script (English)"
    )
    anchor_floor: float = Field(
        0.7, ge=-1, lt=1, description="cosine to the best hit below which nothing is gained"
    )
    anchor_gate: float = Field(
        0.1, ge=0, le=1, description="lead over the second hit that makes the best an anchor"
    )
    anchor_window: int = Field(
        10, ge=1, le=100, description="best hits that closeness in meaning to the anchor raises"
    )
    # A memory of several sentences (search.best_sentence): its cosine moves this far toward
    # its best sentence's when that is closer to the query. Fusion, paired, 0 → 0.25: the
    # implied-memory dialogues with 15× distractors R@5 +0.037, nDCG@10 +0.020; the hard set
    # R@5 +0.016; no interval below zero on any set. 0.5 lost nDCG@10 with distractors
    # (fresh −0.025). bench/results/2026-11-30-sentences.
    memory_sentence_weight: float = Field(
        0.25, ge=0, le=1, description="how far a memory's cosine moves toward its best sentence's"
    )
    # m3e's cosines between English texts all sit near 0.95, so an English sentence's lead
    # over its memory is noise there (English dev set: one query fewer on two of the three
    # sets, nDCG@10 −0.003): off for a latin-script query, as the anchor is. A model that
    # reads English (all-MiniLM-L6-v2: sessions R@5 +0.013 with 0.25) can set it.
    latin_memory_sentence_weight: float = Field(
        0.0, ge=0, le=1, description="memory_sentence_weight for a query in latin script"
    )
    # Temporal contiguity (search.anchor): a confident anchor also raises the memories close to
    # it in time, "close" measured against the user's own timeline (docs/calibration.md).
    contiguity_weight: float = Field(
        0.2, ge=0, le=1, description="most a memory close in time to a confident best hit gains"
    )
    # English dialogue dev set: 0.870 → 0.857 with it (sessions and questions unchanged), as
    # with the closeness in meaning: off for a latin-script query.
    latin_contiguity_weight: float = Field(
        0.0, ge=0, le=1, description="contiguity_weight for a query in latin script (English)"
    )
    contiguity_scale: float = Field(
        0.1,
        gt=0,
        le=1,
        description="half-life of that gain: this share of the median time between the best "
        "hit and the others in the window",
    )
    contiguity_window: int = Field(
        20, ge=1, le=100, description="best hits that closeness in time to the anchor raises"
    )
    expand_candidates: int = Field(
        30, ge=1, le=200, description="expansions (by level) checked against the query's meaning"
    )
    # Meaning-aware pruning is off by default: on the dialogue dev set it changed R@5 by +0.002
    # (0.75) while embedding new words costs tens of ms on a cold cache (bench/results).
    expand_min_cos: float = Field(
        -1.0, ge=-1, le=1, description="keep an expansion whose cosine to the query reaches this"
    )
    explain: bool = False
    ann_k: int = Field(50, ge=1, le=1000, description="ANN candidates on the approximate path")
    kw_window: int = Field(50, ge=1, le=1000, description="best keyword candidates added to them")
    rrf_k: int = Field(60, ge=1)
    two_stage_window: int = Field(20, ge=1, le=1000)
    # Who nominates fusion's candidates. A model that tells a script's meanings apart well (its
    # calibration's AUC, embed.calibrate) lets a memory no search word matches rank by its
    # vector alone; one that does so poorly (m3e on English) only rescores what the words
    # find: those memories come first, and the vector's own picks fill the limit after them.
    # The calibration sets both per model (bench/results/2026-11-29-en).
    vector_candidates: bool = Field(
        True,
        description="fusion: a memory no search word matches ranks by its vector among the "
        "others (False: after every memory a word matches, filling the limit)",
    )
    latin_vector_candidates: bool = Field(
        False, description="vector_candidates for a query in latin script (English)"
    )
    # Topic shift (search.topic_shift): the earlier turns often name one memory and the last
    # turn moves on to another of the same thread; their words then lift the one the
    # conversation already holds. A returned memory whose cosine to the utterance's own vector
    # sits more than this (calibrated vector units) below the best returned memory's loses the
    # earlier turns' keyword coverage. 0.2 (fusion, paired against 0): implied topic shift
    # nDCG@10 0.726 → 0.813 (fusion now above vector's 0.784), main implied part +0.003, hard,
    # fresh, short, long and check within ±0.003 with no interval below zero; 0.3 gave
    # 0.795 (bench/results/2026-11-29-shift). 0: off.
    context_words_gate: float = Field(
        0.2,
        ge=0,
        le=5,
        description="earlier turns' words count only for a memory whose calibrated cosine to "
        "the utterance is within this of the best hit's (0: off)",
    )
    # ... and only for a last turn that tells its own episode: one with at least this many
    # search words of its own (TF-IDF base words, at most top_k). A short or vague last turn
    # ("对啊，跟那次一样", "做饭呢") leaves the topic to the earlier turns, whose words keep
    # counting (the share of the dialogue's characters did not tell them apart: a one-turn
    # context makes any utterance a large share).
    context_words_gate_words: int = Field(
        8,
        ge=0,
        le=50,
        description="the gate applies to an utterance with at least this many search words "
        "of its own",
    )
    # Off for latin script, as anchor feedback is: m3e's cosines between English texts all sit
    # near the top of its scale, so "far from the utterance" means little there.
    latin_context_words_gate: float = Field(
        0.0, ge=0, le=5, description="context_words_gate for a query in latin script (English)"
    )

    @field_validator("context", mode="before")
    @classmethod
    def _context_as_lines(cls, value: object) -> object:
        if value is None:
            return ""
        if isinstance(value, list | tuple):
            value = context_lines(value)
        if isinstance(value, str):  # before the length check, which says less about such text
            check_utf8(value)
        return value

    @field_validator("agent_id", "user_id", "user_name", "agent_name", "exclude_ids")
    @classmethod
    def _utf8(cls, value: str | list[str] | None) -> str | list[str] | None:
        for text in value if isinstance(value, list) else [value]:
            if text is not None:
                check_utf8(text)
        return value

    @field_validator("filters")
    @classmethod
    def _filters_compile(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Checked now, as ``get_all`` checks them, so a bad filter is an invalid option
        before anything uses it (a filter nested 2,000 deep broke even its own repr)."""
        try:
            compile_filters(value)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _calibration(self) -> QueryParams:
        if self.vec_ceil <= self.vec_floor:
            raise ValueError("vec_ceil must be above vec_floor")
        if self.entity_vec_ceil <= self.entity_vec_floor:
            raise ValueError("entity_vec_ceil must be above entity_vec_floor")
        if self.latin_vec_ceil <= self.latin_vec_floor:
            raise ValueError("latin_vec_ceil must be above latin_vec_floor")
        return self


def prepared_default() -> str:
    """The dialogue window vector ``prepare_context`` prepares when not told, and a session's
    recall asks for: the default's, unless the default (``"joint"``) has nothing to prepare;
    then ``"split"``, which prepares what ``"earlier"`` does (the earlier turns' window) and
    recalls as well as joint where ``"earlier"`` fell behind (short dialogues, a last turn that
    tells its episode: bench/results/2026-11-29-turns)."""
    default = str(QueryParams.model_fields["context_vector"].default)
    return "split" if default == "joint" else default
