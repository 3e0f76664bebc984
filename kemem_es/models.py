"""Memory records as they arrive (docs/SPEC.md §1), validated before anything is written."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from kemem_es.literals import Database as Database  # re-exported: the records name them here
from kemem_es.literals import MemoryKind as MemoryKind
from kemem_es.record_fields import (
    DATE_TEXT,
    MAX_ID_BYTES,
    MAX_METADATA_ITEMS,
    MAX_METADATA_KEYS,
    MAX_OFFSET,
    MAX_STRENGTH,
    MAX_TERM_BYTES,
    MAX_TEXT_CHARS,
    MAX_YEAR,
    META_KEY,
    MIN_YEAR,
    UNIT_TOLERANCE,
    MemoryId,
    MetaValue,
    NonEmptyTerm,
    OptText,
    ScopeId,
    Term,
    Text,
    Time,
    check_metadata,
    check_time,
    check_utf8,
    check_vector,
    has_visible_text,
    metadata_utf8,
    parse_time,
    read_date_text,
)

__all__ = [
    "DATE_TEXT",
    "MAX_ID_BYTES",
    "MAX_METADATA_ITEMS",
    "MAX_METADATA_KEYS",
    "MAX_OFFSET",
    "MAX_STRENGTH",
    "MAX_TERM_BYTES",
    "MAX_TEXT_CHARS",
    "MAX_YEAR",
    "META_KEY",
    "MIN_YEAR",
    "RECORD_TYPES",
    "UNIT_TOLERANCE",
    "Database",
    "EntityKind",
    "EntityRecord",
    "EntityType",
    "EventRecord",
    "MemoryId",
    "MemoryKind",
    "MemoryRecord",
    "ScopeId",
    "Time",
    "check_metadata",
    "check_time",
    "check_utf8",
    "check_vector",
    "has_visible_text",
    "parse_time",
    "read_date_text",
    "split_keywords",
]

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


def split_keywords(text: str) -> list[str]:
    """Keywords given as one string: upstream extractors often send "a,b,c" or "a、b"."""
    return [p.strip() for p in text.replace("，", ",").replace("、", ",").split(",") if p.strip()]


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
    metadata: Annotated[
        dict[str, MetaValue], AfterValidator(check_metadata), BeforeValidator(metadata_utf8)
    ] = Field(default_factory=dict)
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
        return split_keywords(v) if isinstance(v, str) else v

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
    slot: Term | None = Field(
        default=None,
        description="the attribute this fact is about (居住地, 工作…), when the extractor names "
        "one; else derived from the text and keyword (docs/facts.md)",
    )

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
