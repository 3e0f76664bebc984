"""Recall prefers the current fact (docs/facts.md).

- Superseded memories are left out unless the question asks about the past (``past``; by
  default when the utterance says 以前 / 之前 / 那时候 / 原来 …).
- A memory whose slot is the one the utterance asks about (「我现在住哪」 → 居住地) gains
  ``slot_boost`` of keyword evidence: 「我搬到杭州了」 shares no word with the question.
- Of memories about the same subject and slot that are both returned, the newer comes first;
  for a question about the past, the older.
- Time-aware questions (``text.timeframe``): of the memories returned, those of the period the
  utterance names (去年, 上个月, 上周, 前天; 小时候: a memory about one) rank as if their score
  were ``1 + period_boost`` times higher (``1 + period_boost/2`` for 最近 / 这几天 / 现在: the
  newer ones). Only an order: no memory passes the threshold by it, none is dropped by it. A
  question about a period wholly past (去年, 小时候) may recall superseded facts, like 以前.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from kemem_es.contract.params import QueryParams
from kemem_es.memory.supersede import keys, time_of
from kemem_es.store.facts import current_only
from kemem_es.store.layout import SLOTS_FIELD, SUBJECT_FIELD
from kemem_es.text.facts import asks_about_past, question_slots
from kemem_es.text.timeframe import Timeframe, timeframe_of

T = TypeVar("T")
LIMIT_MAX = 100  # QueryParams.limit's bound
WIDEN = 5  # more event hits fetched when the utterance names a time: one just below the cut
# may come up


def resolve_timeframe(
    params: QueryParams, utterance: str, now: datetime
) -> tuple[QueryParams, Timeframe | None, int]:
    """(params, the utterance's timeframe, the events' own limit). With a timeframe the
    events are fetched ``WIDEN`` deeper (``time_order`` cuts back to the limit), and a period
    wholly past makes ``past`` true when the caller left it unset."""
    frame = timeframe_of(utterance, now) if params.period_boost > 0 and utterance else None
    if frame is None:
        return params, None, params.limit
    update: dict[str, Any] = {
        "limit": min(params.limit + WIDEN, LIMIT_MAX),
        # the entities' own limit stays what it was (None: the events' limit)
        "entity_limit": params.entity_limit if params.entity_limit is not None else params.limit,
    }
    if params.past is None and frame.before_now:
        update["past"] = True
    return params.model_copy(update=update), frame, params.limit


def time_order(
    items: Sequence[T],
    source: Callable[[T], dict[str, Any]],
    score: Callable[[T], float],
    frame: Timeframe | None,
    params: QueryParams,
    limit: int | None = None,
    entities: bool = False,
) -> list[T]:
    """``items`` reordered by score, ``(1 + boost)`` times for those of ``frame``'s time
    (stable; entities keep their tier order first), cut to ``limit``."""
    out = list(items)
    if frame is not None:
        boost = params.period_boost * (0.5 if frame.kind == "recent" else 1.0)

        def held(item: T) -> bool:
            src = source(item)
            return frame.holds(time_of(src), str(src.get("description") or ""))

        def tier(item: T) -> int:
            if not entities:
                return 0
            from kemem_es.search.entities import TIER_OF_KIND  # imports this module

            t = TIER_OF_KIND.get(str(source(item).get("kind")))
            return t.rank if t is not None else 99

        out.sort(key=lambda it: (tier(it), -score(it) * (1.0 + boost if held(it) else 1.0)))
    return out if limit is None else out[:limit]


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
