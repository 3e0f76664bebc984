"""Engine hits → the response's event and entity hits (with their prompt log lines)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from kemem_es.contract.response import EntityHit, EventHit, Signals, iso_instant
from kemem_es.prompt import entity_log, event_log
from kemem_es.search.clauses import SearchWord, matched_words
from kemem_es.search.entities import TIER_OF_KIND


def fmt_time(value: str | None) -> str:
    """The response's time: the stored wall clock, ``YYYY-MM-DD HH:MM:SS`` (docs/SPEC.md §4)."""
    return (value or "").replace("T", " ")[:19]


def instant(value: object) -> float:
    """A stored time as its instant (seconds), for ordering by time: the offset counts
    (10:00+08:00 is before 05:00Z, though its wall clock reads later) and a naive time is UTC,
    as the engine reads it; 0 when missing or unreadable."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        return 0.0
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def event_hit(
    i: int, db: str, hit: dict[str, Any], score: float, signals: Signals | None, now: datetime
) -> EventHit:
    """Empty where the source has null (a field an older version's update cleared) or nothing."""
    src = hit["_source"]
    out = EventHit(
        id=i,
        score=round(score, 4),
        index=str(src.get("id", hit["_id"])),
        db=db,
        description=src.get("description") or "",
        deepinsight=src.get("deepinsight") or "",
        updatetime=fmt_time(src.get("updatetime")),
        created_at=fmt_time(src.get("created_at")),
        place=src.get("place") or "",
        scene=src.get("scene") or "",
        keyword=src.get("keywords") or [],
        signals=signals,
        superseded_by=src.get("superseded_by"),
        created_at_iso=iso_instant(src.get("created_at")),
        updatetime_iso=iso_instant(src.get("updatetime")),
    ).keep_stored_times(src.get("created_at"), src.get("updatetime"))
    out.log = event_log(out, now)
    return out


def entity_hit(i: int, hit: dict[str, Any], score: float, words: Sequence[SearchWord]) -> EntityHit:
    """``matched_keywords``: the search words the entity holds, read off its tier's fields."""
    src = hit["_source"]
    tier = TIER_OF_KIND[src["kind"]]
    fields = [*tier.fields, "description_tok"]
    matched = matched_words(src, words, list(dict.fromkeys(fields)))
    out = EntityHit(
        id=i,
        kind=src.get("kind") or "",
        score=round(score, 4),
        index={"index": str(src.get("id", hit["_id"]))},
        db=src.get("db", "user"),
        entity_name=src.get("entity_name") or "",
        entity_type=src.get("entity_type") or "",
        description=src.get("description") or "",
        updatetime=fmt_time(src.get("updatetime")),
        matched_keywords=matched,
        keyword=src.get("keyword") or "",
        tier=tier.rank,
        superseded_by=src.get("superseded_by"),
        updatetime_iso=iso_instant(src.get("updatetime")),
    )
    out.log = entity_log(out)
    return out
