"""Recall prefers the current fact (docs/facts.md).

- Superseded memories are left out unless the question asks about the past (``past``; by
  default when the utterance says 以前 / 之前 / 那时候 / 原来 …).
- A memory whose slot is the one the utterance asks about (「我现在住哪」 → 居住地) gains
  ``slot_boost`` of keyword evidence: 「我搬到杭州了」 shares no word with the question.
- Of memories about the same subject and slot that are both returned, the newer comes first;
  for a question about the past, the older.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kemem_es.contract.params import QueryParams
from kemem_es.memory.supersede import keys, time_of
from kemem_es.store.facts import current_only
from kemem_es.store.layout import SLOTS_FIELD, SUBJECT_FIELD
from kemem_es.text.facts import asks_about_past, question_slots

T = TypeVar("T")


def resolve_past(params: QueryParams, utterance: str) -> QueryParams:
    """``params`` with ``past`` decided from the utterance when the caller left it unset."""
    if params.past is not None:
        return params
    return params.model_copy(update={"past": asks_about_past(utterance)})


def recall_filters(params: QueryParams) -> list[dict[str, Any]]:
    """What keeps superseded facts out of a current question's candidates."""
    return [] if params.past else [current_only()]


def slot_clauses(params: QueryParams, utterance: str) -> list[dict[str, Any]]:
    """Keyword evidence for memories of the slots the utterance asks about."""
    if params.slot_boost <= 0 or not utterance:
        return []
    slots = question_slots(utterance)
    if not slots:
        return []
    return [
        {"constant_score": {"filter": {"terms": {SLOTS_FIELD: slots}}, "boost": params.slot_boost}}
    ]


def slot_order(items: Sequence[T], source: Callable[[T], dict[str, Any]], past: bool) -> list[T]:
    """``items`` with any two memories of the same subject and a shared slot in time order
    (newest first; oldest first when ``past``), each keeping the other's position; everything
    else stays in place."""
    out = list(items)

    def key(item: T) -> tuple[str, set[str]]:
        src = source(item)
        return str(src.get(SUBJECT_FIELD) or ""), set(keys(src.get(SLOTS_FIELD) or []))

    for _ in range(len(out)):
        swapped = False
        for i in range(len(out)):
            si, ki = key(out[i])
            if not si or not ki:
                continue
            for j in range(i + 1, len(out)):
                sj, kj = key(out[j])
                if sj != si or not ki & kj:
                    continue
                ti, tj = time_of(source(out[i])), time_of(source(out[j]))
                if (tj > ti) if not past else (tj < ti):
                    out[i], out[j] = out[j], out[i]
                    swapped = True
                    break
        if not swapped:
            break
    return out
