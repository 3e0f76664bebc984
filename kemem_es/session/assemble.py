"""One context for a chat turn, in three parts, fitted to a token budget.

Parts: the dialogue (the session window's turns verbatim, the current message last, and the
running summary of older turns), the overview timeline (前情提要: the user's newest extracted
events, in time order) and the details (what recall found: entities first, by tier, then
events). Nothing appears in two parts: recalled events already in the overview are excluded by
id in the query, and any recalled memory whose text the dialogue, the summary or the overview
holds is left out (``prompt.unknown``, the prompt's own rule).

Budget (``max_tokens``, counted by the configured tokenizer on the rendered text): the dialogue
takes its share first (never less than the current message: that turn is always verbatim; the
newest turns are kept whole, older ones are left to the summary, or dropped without an LLM),
then entities and events take the details' share plus what the dialogue left, the overview its
own; a memory either fits whole or is left out. The whole text is counted last, and the least
important line goes until it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kemem_es.contract.context import ContextResult, ContextTokens, DialogueTurn, OverviewEvent
from kemem_es.contract.response import EntityHit, EventHit, QueryResponse
from kemem_es.errors import InvalidInput
from kemem_es.prompt import (
    DIALOGUE_HEADER,
    OVERVIEW_HEADER,
    SUMMARY_HEADER,
    dialogue_line,
    event_text,
    one_line,
    render_prompt,
    unknown,
)
from kemem_es.session.tokens import TokenCounter

PART_NAMES = ("overview", "details", "summary", "dialogue")  # the prompt's order (_Parts.texts)


@dataclass
class Inputs:
    message: str
    turns: list[dict[str, Any]]  # the window, oldest first (without the current message)
    summary: str
    overview: list[dict[str, Any]]  # stored event sources, newest first
    recall: QueryResponse | None
    user_name: str | None
    agent_name: str | None
    now: datetime
    budget: int
    shares: tuple[float, float, float]
    can_summarize: bool
    session_id: str | None = None
    pending: int = 0
    degraded: str | None = None
    notes: list[str] = field(default_factory=list)


def overview_hit(src: dict[str, Any]) -> EventHit:
    def shown(v: object) -> str:
        return str(v or "").replace("T", " ")[:19]

    return EventHit(
        id=0,
        score=0.0,
        index=str(src.get("id", "")),
        description=src.get("description") or "",
        deepinsight=src.get("deepinsight") or "",
        updatetime=shown(src.get("updatetime")),
        created_at=shown(src.get("created_at")),
        place=src.get("place") or "",
    ).keep_stored_times(src.get("created_at"), src.get("updatetime"))


def _speaker(turn: dict[str, Any], user: str, agent: str) -> str:
    return str(turn.get("name") or (user if turn.get("role") == "user" else agent))


class _Fit:
    """Greedy fitting with per-line counts (one token per line break assumed: generous)."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def cost(self, line: str) -> int:
        return self.count(line) + 1


def assemble(inp: Inputs, counter: TokenCounter) -> ContextResult:
    fit = _Fit(counter.count)
    user = one_line(inp.user_name or "").strip() or "用户"
    agent = one_line(inp.agent_name or "").strip() or "AI"
    n = inp.budget
    total_share = sum(inp.shares) or 1.0
    d_share, o_share, x_share = (s / total_share for s in inp.shares)
    notes = list(inp.notes)
    last = dialogue_line(user, inp.message)
    kept, summary, used, must, d_cap = _dialogue(inp, fit, last, user, agent, d_share, notes)
    over, entities, events = _not_repeated(inp, kept, summary)
    # details (entities first) and the overview, each whole or not at all
    x_cap = int(x_share * n) + (d_cap - used if d_cap > must else 0)
    o_cap = int(o_share * n)
    ent_kept, x_used = _take(entities, lambda h: _entity_cost(h, fit, inp, user, agent), x_cap, 2)
    over_newest, o_used = _take(over, lambda h: fit.cost(event_text(h, inp.now)), o_cap, 1)
    ev_cap = x_cap - x_used + o_cap - o_used
    ev_cost = lambda h: fit.cost(event_text(h, inp.now))  # noqa: E731
    ev_kept, _ = _take(events, ev_cost, ev_cap, 1 if ent_kept else 2)
    dropped = len(entities) + len(events) + len(over) - len(ent_kept) - len(ev_kept)
    dropped -= len(over_newest)
    if dropped:
        notes.append(f"{dropped} memorie(s) did not fit their share and were left out whole")
    parts = _Parts(kept, summary, over_newest, ent_kept, ev_kept, last, user, agent, inp.now)
    text, total, counts = counter.count_parts(parts.texts())
    while total > n and parts.drop_one():  # exact count of the whole text
        text, total, counts = counter.count_parts(parts.texts())
        notes.append("one more line left out: the exact count of the whole text was over budget")
    tokens = ContextTokens(**dict(zip(PART_NAMES, counts, strict=True)), total=total)
    return _result(inp, parts, text, tokens, counter, notes)


def _dialogue(
    inp: Inputs, fit: _Fit, last: str, user: str, agent: str, share: float, notes: list[str]
) -> tuple[list[dict[str, Any]], str, int, int, int]:
    """The current message always, then the newest turns whole, then the summary if it fits:
    (turns kept, summary, tokens used, the message's own need, the dialogue's cap)."""
    n = inp.budget
    must = fit.cost(DIALOGUE_HEADER) + fit.cost(last)
    if must > n:
        raise InvalidInput(
            f"max_tokens: {n} is less than the current message alone needs ({must} tokens with "
            "its header); the last turn is always given verbatim",
            field="max_tokens",
        )
    cap = max(must, int(share * n))
    used = must
    kept: list[dict[str, Any]] = []
    for turn in reversed(inp.turns):
        c = fit.cost(dialogue_line(_speaker(turn, user, agent), turn["content"]))
        if used + c > cap:
            break
        kept.append(turn)
        used += c
    kept.reverse()
    summary = inp.summary.strip()
    if summary:
        c = fit.cost(SUMMARY_HEADER) + fit.cost(one_line(summary))
        if used + c <= cap:
            used += c
        else:
            notes.append("the running summary did not fit the dialogue's share: left out")
            summary = ""
    left_out = len(inp.turns) - len(kept)
    if left_out:
        why = (
            "they are being summarised"
            if inp.can_summarize
            else "no LLM configured, so they were dropped, not summarised"
        )
        notes.append(f"{left_out} older turn(s) did not fit the dialogue's share: {why}")
    return kept, summary, used, must, cap


def _not_repeated(
    inp: Inputs, kept: list[dict[str, Any]], summary: str
) -> tuple[list[EventHit], list[EntityHit], list[EventHit]]:
    """The overview without what the dialogue holds; the recalled entities (by tier) and
    events without the overview's events and without what any earlier part holds."""
    known = [t["content"] for t in kept] + [inp.message] + ([summary] if summary else [])
    over = [overview_hit(s) for s in inp.overview]
    fresh = unknown([h.description for h in over], known)
    over = [h for h, new in zip(over, fresh, strict=True) if new]
    known += [h.description for h in over]
    if inp.recall is None:
        return over, [], []
    over_ids = {h.index for h in over}
    rec_events = [
        e for e in inp.recall.memory_events if not (e.db == "user" and e.index in over_ids)
    ]
    rec_entities = sorted(inp.recall.memory_entities, key=lambda e: e.tier)
    descs = [e.description for e in rec_entities] + [e.description for e in rec_events]
    fresh = unknown(descs, known)
    entities = [e for e, ok in zip(rec_entities, fresh, strict=False) if ok]
    events = [e for e, ok in zip(rec_events, fresh[len(rec_entities) :], strict=True) if ok]
    return over, entities, events


def _result(
    inp: Inputs,
    parts: _Parts,
    text: str,
    tokens: ContextTokens,
    counter: TokenCounter,
    notes: list[str],
) -> ContextResult:
    turns = [
        DialogueTurn(
            seq=t.get("seq"), role=t["role"], name=t.get("name"), content=t["content"],
            at=t.get("at"),
        )
        for t in parts.turns
    ]  # fmt: skip
    overview = [
        OverviewEvent(
            id=h.index, description=h.description, created_at=h.created_at, place=h.place,
            text=event_text(h, inp.now),
        )
        for h in parts.overview
    ]  # fmt: skip
    return ContextResult(
        session_id=inp.session_id,
        dialogue=[*turns, DialogueTurn(role="user", name=inp.user_name, content=inp.message)],
        summary=parts.summary,
        overview=overview,
        entities=parts.entities,
        events=parts.events,
        text=text,
        tokens=tokens,
        budget=inp.budget,
        tokenizer=counter.name,
        degraded=inp.degraded,
        notes=notes,
        pending_batches=inp.pending,
    )


def _entity_cost(h: EntityHit, fit: _Fit, inp: Inputs, user: str, agent: str) -> int:
    one = render_prompt([], [h], inp.now, user, agent)
    return fit.cost(one.split("\n", 1)[1]) if "\n" in one else 0


def _take(
    items: Sequence[Any], cost: Callable[[Any], int], cap: int, header: int
) -> tuple[list[Any], int]:
    """Items in order while they fit ``cap`` whole (a header line counted with the first)."""
    out: list[Any] = []
    used = 0
    for item in items:
        c = cost(item) + (header if not out else 0)
        if used + c > cap:
            continue  # a smaller one after it may still fit
        out.append(item)
        used += c
    return out, used


class _Parts:
    """The kept lines of each part, rendered in the prompt's order: overview, details,
    summary, dialogue (the current message last)."""

    def __init__(
        self,
        turns: list[dict[str, Any]],
        summary: str,
        overview: list[EventHit],
        entities: list[EntityHit],
        events: list[EventHit],
        last: str,
        user: str,
        agent: str,
        now: datetime,
    ) -> None:
        self.turns, self.summary, self.last = turns, summary, last
        self.entities, self.events = entities, events
        self.overview = sorted(overview, key=lambda h: h.stored_time("created_at") or h.created_at)
        self.user, self.agent, self.now = user, agent, now

    def overview_text(self) -> str:
        if not self.overview:
            return ""
        return "\n".join([OVERVIEW_HEADER, *(event_text(h, self.now) for h in self.overview)])

    def details_text(self) -> str:
        return render_prompt(self.events, self.entities, self.now, self.user, self.agent)

    def summary_text(self) -> str:
        return f"{SUMMARY_HEADER}\n{one_line(self.summary)}" if self.summary else ""

    def dialogue_text(self) -> str:
        lines = [
            dialogue_line(_speaker(t, self.user, self.agent), t["content"]) for t in self.turns
        ]
        return "\n".join([DIALOGUE_HEADER, *lines, self.last])

    def texts(self) -> tuple[str, str, str, str]:
        """The parts' texts in the prompt's order (``PART_NAMES``), an empty one for a part
        with nothing kept; the context is their non-empty ones, one per line."""
        return (
            self.overview_text(),
            self.details_text(),
            self.summary_text(),
            self.dialogue_text(),
        )

    def drop_one(self) -> bool:
        """The least important line goes: an event, the oldest overview event, an entity, the
        summary, the oldest turn. False when only the current message is left."""
        if self.events:
            self.events = self.events[:-1]
        elif self.overview:
            self.overview = self.overview[1:]
        elif self.entities:
            self.entities = self.entities[:-1]
        elif self.summary:
            self.summary = ""
        elif self.turns:
            self.turns = self.turns[1:]
        else:
            return False
        return True
