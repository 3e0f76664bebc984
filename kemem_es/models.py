"""Memory records as they arrive (SPEC §1), validated before anything is written."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
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

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
ScopeId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class _Record(BaseModel):
    """Fields shared by every memory: scope, names, strength."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: ScopeId | None = None
    agent_id: ScopeId
    user_id: ScopeId | None = None
    user_name: str | None = None
    agent_name: str | None = None
    session_id: str | None = None
    strength: float = Field(default=0.0, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = Field(
        default=None, description="a precomputed embedding; when absent the indexer embeds"
    )

    def check_scope(self, db: Database) -> None:
        """User memories belong to one user; official ones are shared by all users of the agent."""
        if db == "user" and not self.user_id:
            raise ValueError("user_id: required for the user database")
        if db == "official" and self.user_id:
            raise ValueError(
                "user_id: must be empty for the official database (shared by all users)"
            )

    def content_key(self) -> dict[str, Any]:
        """What identifies a record when it has no id of its own (scope + content)."""
        raise NotImplementedError

    def doc_id(self, db: Database) -> str:
        """Deterministic: own id, else a hash of scope + content, so re-runs never duplicate."""
        if self.id:
            return self.id
        key = {"db": db, "agent_id": self.agent_id, "user_id": self.user_id, **self.content_key()}
        digest = hashlib.sha1(json.dumps(key, ensure_ascii=False, sort_keys=True).encode())
        return digest.hexdigest()


class EventRecord(_Record):
    """事件记忆: a summarised episode with time, place and keywords."""

    description: NonEmpty
    deepinsight: str = ""
    keywords: list[NonEmpty] = Field(default_factory=list)
    place: str = ""
    scene: str = ""
    created_at: datetime | None = None
    updatetime: datetime | None = None

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


class EntityRecord(_Record):
    """实体记忆: an attribute, relation or impression of an entity."""

    entity_name: NonEmpty
    entity_type: EntityType
    kind: EntityKind
    keyword: str = ""
    description: NonEmpty
    updatetime: datetime

    def content_key(self) -> dict[str, Any]:
        return {
            "entity_name": self.entity_name,
            "kind": self.kind,
            "description": self.description,
        }


MemoryRecord = EventRecord | EntityRecord

RECORD_TYPES: dict[MemoryKind, type[EventRecord] | type[EntityRecord]] = {
    "events": EventRecord,
    "entities": EntityRecord,
}
