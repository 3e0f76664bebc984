"""Supersession on write, without an LLM (docs/facts.md).

A new memory whose subject and slot match a current memory of the same scope and kind, and
whose content differs (not a restatement: those stay dedup's NOOP / UPDATE), supersedes it:
the old memory is kept, marked ``superseded_by`` (the new id) and ``superseded_at``, recorded
in the history (an UPDATE with reason ``superseded``), and no longer recalled as a current
fact. A new memory older than the current one (an import of an old record) is itself written
as superseded by it. Pure decisions here; the lookups are in ``kemem_es.store.facts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from kemem_es.memory.dedup import normalise, word_overlap
from kemem_es.memory.strength import parse_instant
from kemem_es.store.layout import ID_FIELD, SLOTS_FIELD, SUBJECT_FIELD, SUPERSEDED_BY
from kemem_es.text.facts import EXCLUSIVE_SLOTS, Facts, same_polarity, supersedes

# Two statements of one slot sharing this much of their words say the same thing (木木不吃香菜
# / 木木不爱吃香菜): a restatement, for dedup; 住在北京 / 住在杭州 share 0.6.
RESTATEMENT_OVERLAP = 0.75
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def restatement(new_text: str, old_text: str) -> bool:
    return (
        normalise(new_text) == normalise(old_text)
        or word_overlap(new_text, old_text) >= RESTATEMENT_OVERLAP
    )


def keys(slots: Iterable[str]) -> list[str]:
    """The slots supersession compares (an object kind alone, 「饮食」, is not one)."""
    return [s for s in slots if s in EXCLUSIVE_SLOTS or ":" in s]


def time_of(source: Mapping[str, Any]) -> datetime:
    """When a stored fact was stated: an entity's updatetime, an event's created_at."""
    for f in ("created_at", "updatetime"):
        t = source.get(f)
        if isinstance(t, datetime):
            return t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        parsed = parse_instant(t) if isinstance(t, str) else None
        if parsed is not None:
            return parsed
    return _EPOCH


def same_slot(facts: Facts, source: Mapping[str, Any]) -> bool:
    """A stored memory about the same subject and (all its) slots as ``facts``."""
    return source.get(SUBJECT_FIELD) == facts.subject and supersedes(
        facts, list(source.get(SLOTS_FIELD) or [])
    )


def plan(
    facts: Facts, text: str, when: datetime, holders: Iterable[Mapping[str, Any]]
) -> tuple[list[str], str | None]:
    """(ids the new memory supersedes, id of a newer memory that supersedes it instead)."""
    if not keys(facts.slots):
        return [], None
    older: list[str] = []
    newer: tuple[datetime, str] | None = None
    seen: set[str] = set()
    for src in holders:
        mid = str(src.get(ID_FIELD) or "")
        if not mid or mid in seen or src.get(SUPERSEDED_BY):
            continue
        seen.add(mid)
        if src.get(SUBJECT_FIELD) != facts.subject:
            continue
        old_text = str(src.get("description") or "")
        shared = [k for k in keys(src.get(SLOTS_FIELD) or []) if k in facts.slots]
        if restatement(text, old_text) or same_polarity(text, old_text, shared):
            continue
        t = time_of(src)
        if t <= when:
            if supersedes(facts, list(src.get(SLOTS_FIELD) or [])):
                older.append(mid)
        else:
            theirs = Facts(facts.subject, tuple(keys(src.get(SLOTS_FIELD) or [])))
            if supersedes(theirs, facts.stored) and (newer is None or t > newer[0]):
                newer = (t, mid)
    if newer is not None:
        return [], newer[1]
    return older, None
