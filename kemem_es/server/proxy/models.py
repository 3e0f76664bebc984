"""The proxy's request and answer models: what the OpenAPI description shows, and what
``memory_config`` / ``memory_context`` are validated by."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enable_memory: bool = True
    memory_depth: int | None = Field(None, ge=1, le=100, description="recalled details at most")
    relevance_threshold: float | None = Field(None, ge=0, le=1)
    auto_store: bool = True
    max_tokens: int | None = Field(None, ge=1, le=100_000, description="the memory's budget")
    position: Literal["system_end", "system_start", "before_last_user"] | None = None


class MemoryContext(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(None, min_length=1, max_length=512)
    agent_id: str | None = Field(None, min_length=1, max_length=512)
    session_id: str | None = Field(None, min_length=1, max_length=512)


class MemoryInfo(BaseModel):
    """What the memory step did for this request."""

    enabled: bool
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    injected: bool = False
    memories: list[dict[str, Any]] = Field(
        default_factory=list, description="the recalled memories: id, memory, score, kind"
    )
    tokens: dict[str, int] = Field(default_factory=dict, description="the memory text's tokens")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    stored: bool | None = Field(None, description="auto_store: the turn will be stored")
    degraded: str | None = Field(None, description="why no memories were used")


class ChatCompletionRequest(BaseModel):
    """An OpenAI chat-completions request (every field of the upstream's API passes through),
    plus ``memory_config`` and ``memory_context``, which stay here."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]]
    stream: bool | None = None
    memory_config: MemoryConfig | None = None
    memory_context: MemoryContext | None = None


class ResponsesRequest(BaseModel):
    """An OpenAI Responses request (passed through), plus ``memory_config`` and
    ``memory_context``; ``previous_response_id`` continues the session that id answered in
    (a response of the same agent and user only: another's is a 404)."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = Field(None, min_length=1, max_length=512)
    stream: bool | None = None
    memory_config: MemoryConfig | None = None
    memory_context: MemoryContext | None = None


class ProxyAnswer(BaseModel):
    """The upstream's answer as it came, plus ``memory_info`` (a stream: the
    X-Kemem-Memory-Info header, JSON)."""

    model_config = ConfigDict(extra="allow")

    memory_info: MemoryInfo | None = None


class UsageRow(BaseModel):
    agent_id: str
    user_id: str = Field(description="empty: requests without a user")
    requests: int
    prompt_tokens: int
    completion_tokens: int
    memory_tokens: int


class UsageList(BaseModel):
    results: list[UsageRow]
    degraded: str | None = Field(
        None, description="the stored counts could not be read: this process's counts only"
    )


PROXY_ERRORS: dict[int | str, dict[str, Any]] = {
    502: {"description": "upstream_unavailable: the upstream model is unreachable"},
    504: {"description": "upstream_timeout: the upstream model did not answer in time"},
}
