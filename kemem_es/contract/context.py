"""What ``Kemem.context`` returns: the three parts of a chat turn's memory context (the dialogue
with its summary, the overview timeline, the recalled details), the rendered prompt text and
the token count of each part (docs/sessions.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from kemem_es.contract.response import EntityHit, EventHit


class DialogueTurn(BaseModel):
    """One message of the session window (``seq`` None: the current message, not stored)."""

    seq: int | None = None
    role: str
    name: str | None = None
    content: str
    at: str | None = None


class OverviewEvent(BaseModel):
    """An event of the overview timeline (前情提要), as the prompt shows it (``text``)."""

    id: str
    description: str
    created_at: str = ""
    place: str = ""
    session_id: str | None = None
    text: str


class ContextTokens(BaseModel):
    """Tokens of each part as rendered (headers included) and of the whole ``text``."""

    dialogue: int = 0
    summary: int = 0
    overview: int = 0
    details: int = 0
    total: int = 0


class ContextResult(BaseModel):
    session_id: str | None = None
    dialogue: list[DialogueTurn] = Field(
        default_factory=list,
        description="the window's turns verbatim, oldest first; the current message last",
    )
    summary: str = Field("", description="the running summary of older turns")
    overview: list[OverviewEvent] = Field(
        default_factory=list, description="newest extracted events of this user, in time order"
    )
    entities: list[EntityHit] = Field(default_factory=list, description="recalled, by tier")
    events: list[EventHit] = Field(default_factory=list, description="recalled, not repeated")
    text: str = Field("", description="the rendered prompt text of all parts")
    tokens: ContextTokens = Field(default_factory=ContextTokens)
    budget: int = Field(description="max_tokens: text never counts more")
    tokenizer: str = Field("", description="what counted the tokens")
    degraded: str | None = Field(None, description="why a part is missing (engine down…)")
    notes: list[str] = Field(
        default_factory=list,
        description="what the budget left out (older turns dropped or summarised, memories)",
    )
    pending_batches: int = Field(0, description="batches of this session not yet extracted")
    timings_ms: dict[str, float] = Field(
        default_factory=dict,
        description="where the call's time went: session (window read) and overview (run "
        "together), recall (embedding and search), assemble (fitting and counting), total",
    )


class Batch(BaseModel):
    """Turns handed to extraction together (``reason``: trigger, scene, end or idle)."""

    first_seq: int
    last_seq: int
    reason: str


class SessionInfo(BaseModel):
    """One session of a user: its size and where its window is."""

    session_id: str
    messages: int = Field(description="messages stored (the next sequence number)")
    window_from: int = Field(description="first turn not yet handed to extraction")
    open_batches: int = Field(0, description="batches handed over and not yet done")
    last_at: str | None = None
    has_summary: bool = False


class Appended(BaseModel):
    """What ``add(..., session_id=…)`` or ``end_session`` did to the session."""

    session_id: str
    seqs: list[int] = Field(default_factory=list, description="the messages' sequence numbers")
    stored: int = Field(0, description="new messages (one sent again is stored once)")
    batches: list[Batch] = Field(default_factory=list, description="handed to extraction now")
