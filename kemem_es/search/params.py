"""Query parameters: what a caller may set per request, validated once."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Mode = Literal["fusion", "bm25", "vector", "rrf", "two_stage"]
Path_ = Literal["auto", "exact", "approx"]


class Weights(BaseModel):
    """Fusion weights; they must sum to 1 so the fused score stays in [0, 1]."""

    kw: float = Field(0.35, ge=0)
    vec: float = Field(0.45, ge=0)
    time: float = Field(0.12, ge=0)
    strength: float = Field(0.08, ge=0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> Weights:
        total = self.kw + self.vec + self.time + self.strength
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (got {total:.4f})")
        return self


class QueryParams(BaseModel):
    """One query's knobs (SPEC §2); defaults follow the ES generation of the old service.
    An unknown knob is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1)
    user_id: str = Field(min_length=1)
    limit: int = Field(5, ge=1, le=100)
    entity_limit: int = Field(10, ge=0, le=100)
    score_threshold: float = Field(0.5, ge=0, le=1)
    mode: Mode = "fusion"
    path: Path_ = "auto"
    weights: Weights = Field(default_factory=Weights)
    half_life_days: float = Field(180.0, gt=0)
    bm25_k: float = Field(4.0, gt=0, description="kw = bm25 / (bm25 + k)")
    strength_k: float = Field(30.0, gt=0, description="str = s / (s + k)")
    now: datetime | None = None
    exclude_ids: list[str] = Field(default_factory=list)
    filters: dict[str, Any] | None = Field(
        default=None, description="memory filters (store.filters), applied to every candidate"
    )
    context: str = ""
    user_name: str | None = None
    agent_name: str | None = None
    # ≤ 200 keeps words × fields under the engines' default 1024-clause limit.
    max_words: int = Field(100, ge=0, le=200)
    strategy: Literal[0, 1] = 1
    filter_levels: list[int] = Field(default_factory=lambda: [0])
    top_k: int = Field(10, ge=1, le=50)
    expand: bool = True
    explain: bool = False
    ann_k: int = Field(50, ge=1, le=1000, description="ANN candidates on the approximate path")
    kw_window: int = Field(50, ge=1, le=1000, description="best keyword candidates added to them")
    rrf_k: int = Field(60, ge=1)
    two_stage_window: int = Field(50, ge=1, le=1000)
