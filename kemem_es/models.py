"""Memory records as they arrive (docs/SPEC.md §1), validated before anything is written."""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from datetime import date, datetime
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

Database = Literal["user", "official"]
MemoryKind = Literal["events", "entities"]

EntityType = Literal["主体", "客体", "具体实体", "泛化实体"]
"""主体 the agent · 客体 the user · 具体实体 a concrete other entity · 泛化实体 a generic one."""

EntityKind = Literal[
    "用户属性",
    "用户关系",
    "与主体和客体的关系",
    "特殊实体属性",
    "与其它实体的关系",
    "记忆画面",
]

MAX_ID_BYTES = 200
MAX_TERM_BYTES = 4096  # keyword-typed values; Lucene refuses a term over 32,766 bytes
MAX_TEXT_CHARS = 20_000
MAX_STRENGTH = 1e6  # strength is a float32 in the engine; far above any real reinforcement
MAX_METADATA_KEYS = 32
MIN_YEAR, MAX_YEAR = 1000, 9999  # the engine's date formats need a four-digit year
META_KEY = re.compile(r"^[A-Za-z0-9_\-\u4e00-\u9fff]{1,64}$")
DATE_TEXT = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)

MetaScalar = str | bool | int | float
MetaValue = MetaScalar | list[MetaScalar]


_CONTROL = re.compile(r"[\x00-\x1f]")


def _utf8_at_most(limit: int) -> Any:
    def check(v: str | None) -> str | None:
        if v is not None and len(v.encode()) > limit:
            raise ValueError(f"is {len(v.encode())} bytes in UTF-8; at most {limit} allowed")
        if v is not None and _CONTROL.search(v):
            raise ValueError("must not contain control characters")
        return v

    return AfterValidator(check)


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character a reader would see: not only spaces, control
    characters (NUL) or invisible format characters (zero-width space), which strip() keeps."""
    return any(unicodedata.category(c)[0] not in "CZ" for c in text)


def _visible(v: str) -> str:
    if not has_visible_text(v):
        raise ValueError("has no visible text (only spaces, control or zero-width characters)")
    return v


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Text = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT_CHARS),
    AfterValidator(_visible),
]
OptText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_TEXT_CHARS)]
Term = Annotated[str, StringConstraints(strip_whitespace=True), _utf8_at_most(MAX_TERM_BYTES)]
NonEmptyTerm = Annotated[Term, StringConstraints(min_length=1)]
ScopeId = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1), _utf8_at_most(MAX_ID_BYTES)
]
MemoryId = ScopeId


def parse_time(v: Any) -> Any:
    """Dates must be written as dates: ``2025-06-01``, ``2025-06-01 12:00[:00]`` or ISO 8601
    with an optional offset. Bare numbers (20250601, -1) would be read as Unix seconds, so they
    are refused rather than guessed."""
    if v is None or isinstance(v, datetime):
        return v
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day)
    if isinstance(v, bool | int | float):
        raise ValueError("give a date string like 2025-06-01 12:00:00 (numbers are ambiguous)")
    if isinstance(v, str):
        text = v.strip()
        if not DATE_TEXT.match(text):
            raise ValueError(
                "not a date: use YYYY-MM-DD, YYYY-MM-DD HH:MM:SS or ISO 8601 with an offset"
            )
        if len(text) == 10:
            text += "T00:00:00"
        return text
    raise ValueError("not a date")


def check_year(v: datetime | None) -> datetime | None:
    if v is not None and not MIN_YEAR <= v.year <= MAX_YEAR:
        raise ValueError(f"year {v.year} is outside {MIN_YEAR}–{MAX_YEAR}")
    return v


Time = Annotated[datetime, BeforeValidator(parse_time), AfterValidator(check_year)]


def check_metadata(v: dict[str, Any]) -> dict[str, Any]:
    """Flat keys → a scalar or a list of scalars: what the typed metadata fields can hold."""
    if len(v) > MAX_METADATA_KEYS:
        raise ValueError(f"{len(v)} keys; at most {MAX_METADATA_KEYS}")
    for key, value in v.items():
        if not META_KEY.match(key):
            raise ValueError(f"key {key!r}: use 1–64 letters, digits, _ or - (no dots)")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"{key}: numbers must be finite")
            if isinstance(item, str) and len(item.encode()) > MAX_TERM_BYTES:
                raise ValueError(f"{key}: a value over {MAX_TERM_BYTES} bytes")
            if isinstance(item, int) and not isinstance(item, bool) and abs(item) > 2**53:
                raise ValueError(f"{key}: integer beyond ±2^53 (not exact as a number)")
    return v


UNIT_TOLERANCE = 1e-3  # a vector this close to length 1 is stored as given


def check_vector(v: list[float] | None) -> list[float] | None:
    """Finite, not all zeros, and stored at unit length: only a vector's direction means
    anything to a cosine, and the ANN graph ranks by dot product, which on unit vectors is the
    cosine at a third of the arithmetic (index_templates/dialects/opensearch.json)."""
    if v is None:
        return v
    if not v:
        raise ValueError("is empty")
    # numpy: a 512-float check in ~20 µs instead of ~150 µs (bulk loads validate every vector)
    arr = np.asarray(v, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError("has NaN or infinite values")
    if not arr.any():
        raise ValueError("is all zeros (no direction: cosine similarity is undefined)")
    norm = float(np.linalg.norm(arr))
    return v if abs(norm - 1.0) <= UNIT_TOLERANCE else (arr / norm).round(7).tolist()


class _Record(BaseModel):
    """Fields shared by every memory: scope, names, strength.

    Everything the engine would refuse is refused here, naming the field, so a file that
    validates is written whole."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: MemoryId | None = None
    agent_id: ScopeId
    user_id: ScopeId | None = None
    user_name: Term | None = None
    agent_name: Term | None = None
    session_id: Term | None = None
    strength: float = Field(default=0.0, ge=0, le=MAX_STRENGTH, allow_inf_nan=False)
    metadata: Annotated[dict[str, MetaValue], AfterValidator(check_metadata)] = Field(
        default_factory=dict
    )
    vector: Annotated[list[float] | None, AfterValidator(check_vector)] = Field(
        default=None, description="a precomputed embedding; when absent the indexer embeds"
    )

    def content_key(self) -> dict[str, Any]:
        """What identifies a record when it has no id of its own (its content)."""
        raise NotImplementedError

    def memory_id(self) -> str:
        """The caller's id, else a hash of the content: re-importing a record without an id
        finds the same memory instead of adding a second one."""
        if self.id:
            return self.id
        key = json.dumps(self.content_key(), ensure_ascii=False, sort_keys=True)
        return "h" + hashlib.sha1(key.encode()).hexdigest()[:24]


class EventRecord(_Record):
    """事件记忆: a summarised episode with time, place and keywords."""

    description: Text
    deepinsight: OptText = ""
    keywords: list[NonEmptyTerm] = Field(default_factory=list, max_length=100)
    place: Term = ""
    scene: Term = ""
    created_at: Time | None = None
    updatetime: Time | None = None

    @field_validator("keywords", mode="before")
    @classmethod
    def _split_keywords(cls, v: Any) -> Any:
        # Upstream extractors often send "a,b,c" or "a、b"; accept both shapes.
        if isinstance(v, str):
            return [p for p in v.replace("，", ",").replace("、", ",").split(",") if p.strip()]
        return v

    @model_validator(mode="after")
    def _need_a_time(self) -> EventRecord:
        if self.created_at is None and self.updatetime is None:
            raise ValueError("created_at: an event needs created_at or updatetime")
        if self.updatetime is None:
            self.updatetime = self.created_at
        if self.created_at is None:
            self.created_at = self.updatetime
        return self

    @property
    def event_time(self) -> datetime:
        """The time the episode happened: what time decay is measured from."""
        assert self.created_at is not None
        return self.created_at

    def content_key(self) -> dict[str, Any]:
        return {"description": self.description, "created_at": self.event_time.isoformat()}

    def text(self) -> str:
        return self.description


class EntityRecord(_Record):
    """实体记忆: an attribute, relation or impression of an entity."""

    entity_name: NonEmptyTerm
    entity_type: EntityType
    kind: EntityKind
    keyword: Term = ""
    description: Text
    updatetime: Time

    def content_key(self) -> dict[str, Any]:
        return {
            "entity_name": self.entity_name,
            "kind": self.kind,
            "description": self.description,
        }

    def text(self) -> str:
        return self.description


MemoryRecord = EventRecord | EntityRecord

RECORD_TYPES: dict[MemoryKind, type[EventRecord] | type[EntityRecord]] = {
    "events": EventRecord,
    "entities": EntityRecord,
}
