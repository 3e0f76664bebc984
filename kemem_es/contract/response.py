"""The response contract (docs/SPEC.md §4), kept compatible with the previous /query service."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

# The names ``检索耗时`` times its stages under (ms); every answer has ``total``.
STAGES = (
    "prefilter",
    "rewrite",
    "tokenise",
    "expand",
    "embed",
    "search_events",
    "search_entities",
    "assemble",
    "total",
)


ISO_TWIN = (
    "{} as an instant: ISO 8601 with its offset (the contract's field shows the wall clock "
    "only); a time stored without an offset is read as UTC, as the engine orders it"
)


def iso_instant(value: object) -> str | None:
    """A stored time in ISO 8601 with an offset (``Z`` read for none), None when missing or
    unreadable: the twin of the contract's wall-clock fields."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    return t.isoformat(timespec="microseconds" if t.microsecond else "seconds")


class Signals(BaseModel):
    """Each fused signal of one event hit (the explain option), as the score holds it: the
    score is ``Σ weight·signal + sentence + anchor``, clamped to [0, 1].

    ``time`` and ``strength`` lie in [0, 1]. ``kw`` does too, except that it can exceed 1 by up
    to ``proximity_share`` (word pairs found close together, latin-script queries). ``vec`` is
    the cosine on the model's scale, ``(cos − vec_floor) / (vec_ceil − vec_floor)``: 0 for
    unrelated text, 1 for the memory a short utterance typically implies, above 1 for a closer
    paraphrase, and below 0 under the floor. The engine does not clamp it, so neither does
    this."""

    kw: float
    vec: float
    time: float
    strength: float
    bm25: float = Field(description="raw BM25 of the keyword clauses, before saturation")
    anchor: float = Field(
        0.0,
        description="what closeness in meaning or time to a confident best hit added (anchor "
        "feedback), after the cap at that best hit's score",
    )
    sentence: float = Field(
        0.0,
        description="what the memory's best sentence added: its cosine moved "
        "memory_sentence_weight of the way toward that sentence's, when closer to the query",
    )


class EventHit(BaseModel):
    id: int
    score: float
    index: str = Field(description="the memory's document id")
    db: str = "user"
    description: str
    deepinsight: str = ""
    updatetime: str
    created_at: str = ""
    place: str = ""
    scene: str = ""
    keyword: list[str] = Field(default_factory=list)
    log: str = ""
    signals: Signals | None = None
    superseded_by: str | None = Field(
        None,
        description="a newer fact replaced this one (recalled for a question about the "
        "past; the prompt shows it as 以前：…)",
    )
    created_at_iso: str | None = Field(None, description=ISO_TWIN.format("created_at"))
    updatetime_iso: str | None = Field(None, description=ISO_TWIN.format("updatetime"))
    # created_at / updatetime as stored (ISO 8601, their offset kept). The contract's fields
    # show the wall clock only; the prompt needs the offset to compare an event with ``now``
    # as instants (kemem_es/prompt.py). Not part of the contract: never serialised, so a hit
    # rebuilt from JSON has none and its times are read as wall clocks.
    # default None, not a default_factory: pydantic inspects a private default_factory's
    # signature on every model built (~50 µs a hit, issue 42's profile)
    _stored_times: dict[str, str] | None = PrivateAttr(default=None)

    def keep_stored_times(self, created_at: str | None, updatetime: str | None) -> EventHit:
        """Remember the stored forms of the hit's times (see ``stored_time``)."""
        self._stored_times = {"created_at": created_at or "", "updatetime": updatetime or ""}
        return self

    def stored_time(self, field: str) -> str:
        """``created_at`` or ``updatetime`` as stored, offset included; "" when unknown or when
        the shown value no longer is that stored time's wall clock (a hook changed it)."""
        stored = (self._stored_times or {}).get(field, "")
        shown = getattr(self, field, "")
        return stored if stored and stored.replace("T", " ")[:19] == shown else ""


class EntityHit(BaseModel):
    id: int
    kind: str
    score: float
    index: dict[str, Any]
    db: str = "user"
    entity_name: str = ""
    entity_type: str = ""
    description: str
    updatetime: str
    matched_keywords: list[str] = Field(default_factory=list)
    keyword: str = ""
    tier: int = 0
    log: str = ""
    superseded_by: str | None = Field(
        None,
        description="a newer fact replaced this one (recalled for a question about the "
        "past; the prompt shows it as 以前：…)",
    )
    updatetime_iso: str | None = Field(None, description=ISO_TWIN.format("updatetime"))


class AdditionalInfo(BaseModel):
    timings_ms: dict[str, float] = Field(
        alias="检索耗时",
        description=(
            "ms per stage (STAGES), those the answer went through: prefilter (a small-talk "
            "answer's only stage), tokenise, expand, embed, search_events (the round trip that "
            "searches events and entities together, and a second event search when entity "
            "names bridge), search_entities (scoring them), assemble; and total, in every "
            "answer (a degraded one: the time until it gave up)"
        ),
    )
    query: str
    tokens: list[str] = Field(alias="分词")
    base_words: list[str] = Field(alias="给联想的基词")
    expanded_words: list[dict[str, int]] = Field(alias="扩展后联想词")
    mode: str = "fusion"
    profile: str = Field(
        "default",
        description="the fusion weights used: 'default', or 'latin' for a query written mostly "
        "in latin script (QueryParams.latin_weights)",
    )
    skipped: str | None = Field(
        None, description="why no search ran: 'small_talk' (the pre-filter; see QueryParams)"
    )
    context_words: list[str] = Field(
        default_factory=list, description="search words taken from the earlier turns"
    )
    entity_words: list[str] = Field(
        default_factory=list, description="names of entities the utterance is about, searched"
    )
    context_trimmed: bool = Field(
        False,
        description="the dialogue was longer than the model reads: earlier turns were dropped "
        "(false when only the utterance, too long alone, was cut to its end)",
    )
    degraded: bool | None = Field(
        None,
        description="the answer is partial or empty because the engine was down, slow or an "
        "index missing (only with degrade on, or a missing index); absent when all went well",
    )
    degraded_reason: str | None = Field(None, description="what degraded, and why")
    rewrite: dict[str, str] | None = Field(
        None,
        description="with rewrite on: the search text the rewriter gave ({'text': …}), or why "
        "the plain utterance was searched ({'fallback': …}); absent otherwise",
    )

    model_config = {"populate_by_name": True}


class QueryResponse(BaseModel):
    memory_events: list[EventHit] = Field(default_factory=list)
    memory_entities: list[EntityHit] = Field(default_factory=list)
    additional_info: AdditionalInfo

    def to_contract(self) -> dict[str, Any]:
        """JSON-ready dict using the contract's (Chinese) keys."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def simple(self) -> SimpleResponse:
        """Only the memory texts, in order of importance (``/query_simple``)."""
        return SimpleResponse(
            memory_events=[e.description for e in self.memory_events],
            memory_entities=[e.description for e in self.memory_entities],
        )

    @property
    def results(self) -> list[dict[str, Any]]:
        """The Memory API view: events then entities as ``{"id", "memory", "score", "kind"}``
        (what chat loops written against mem0-style APIs read)."""
        events = [
            {"id": e.index, "memory": e.description, "score": e.score, "kind": "events"}
            for e in self.memory_events
        ]
        entities = [
            {"id": n.index.get("index"), "memory": n.description, "score": n.score,
             "kind": "entities"}
            for n in self.memory_entities
        ]  # fmt: skip
        return events + entities

    def __str__(self) -> str:
        """The prompt text of these memories (as ``Kemem.prompt`` renders it with its defaults:
        this machine's clock, no names), so ``f"关于用户的记忆: \n{memories}"`` reads as the
        chat model should see it; ``repr`` stays the model's."""
        from datetime import datetime

        from kemem_es.prompt import render_prompt

        now = datetime.now().astimezone()
        return render_prompt(self.memory_events, self.memory_entities, now, None, None)

    def __getitem__(self, key: str) -> Any:
        """``resp["results"]`` and the contract's keys, for code that treats it as a dict."""
        if key == "results":
            return self.results
        return self.to_contract()[key]


class SimpleResponse(BaseModel):
    """The simplified variant: only the memory texts, in order of importance."""

    memory_events: list[str]
    memory_entities: list[str]
