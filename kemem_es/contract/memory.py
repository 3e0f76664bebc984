"""What the Memory API returns: stored memories, the action an add took, pages, history."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Action = Literal["ADD", "UPDATE", "NOOP", "DELETE", "FORGET"]


class Memory(BaseModel):
    """One stored memory as the caller sees it: its own id, its text, scope, times, strength.
    Event fields and entity fields are both here; those of the other kind stay empty."""

    id: str = Field(description="the caller's id (or the generated one), unique in its scope")
    kind: Literal["events", "entities"]
    db: Literal["user", "official"]
    agent_id: str
    user_id: str | None = None
    session_id: str | None = None
    text: str = Field(description="the memory's text (its description)")
    # events
    deepinsight: str = ""
    keywords: list[str] = Field(default_factory=list)
    place: str = ""
    scene: str = ""
    created_at: str | None = None
    # entities
    entity_name: str | None = None
    entity_type: str | None = None
    entity_kind: str | None = None
    keyword: str | None = None
    # both
    updatetime: str | None = None
    user_name: str | None = None
    agent_name: str | None = None
    strength: float = 0.0
    recall_count: int = 0
    last_recalled_at: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # facts that change (docs/facts.md)
    slots: list[str] = Field(
        default_factory=list, description="the attributes this fact is about (居住地, 饮食:辣…)"
    )
    superseded_by: str | None = Field(
        None, description="the newer memory that replaced this fact (recalled only for the past)"
    )
    superseded_at: str | None = None


class AddResult(BaseModel):
    """What one write did to one memory. ``previous`` is the text it replaced (UPDATE)."""

    id: str
    event: Action
    memory: Memory
    previous: str | None = None
    matched_id: str | None = None
    similarity: float | None = None
    superseded: list[str] = Field(
        default_factory=list,
        description="the older memories of the same subject and slot this one superseded",
    )


class MemoryPage(BaseModel):
    """One page of ``get_all``; pass ``next_cursor`` back for the next (None: the last page)."""

    results: list[Memory]
    next_cursor: str | None = None


class HistoryEntry(BaseModel):
    memory_id: str
    kind: str
    event: Action
    at: str
    actor: str
    old_text: str | None = None
    new_text: str | None = None
    matched_id: str | None = None
    similarity: float | None = None
    reason: str | None = None
