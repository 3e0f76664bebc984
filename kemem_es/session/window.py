"""A session's state and the window rule, as pure data and functions (no engine).

The window holds the turns not yet handed to extraction (``window_from`` … ``next_seq - 1``).
When it reaches ``trigger`` turns, its oldest ``batch`` turns are handed over (a batch), again
while it still reaches ``trigger``; a scene change, the end of the session or an idle gap hands
over everything. Turns handed over stay visible in the dialogue until their batch is done
(``open_batches``), so nothing said is out of sight while its memories are being written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Cut:
    first_seq: int
    last_seq: int
    reason: str  # trigger | scene | end | idle


@dataclass(frozen=True)
class SessionState:
    next_seq: int = 0
    window_from: int = 0
    open_batches: tuple[int, ...] = ()
    summary: str = ""
    summary_upto: int = -1
    user_name: str | None = None
    agent_name: str | None = None
    last_at: str | None = None
    # a token written when the session is created: a session deleted and created again under
    # the same id has another one (what a process's held turns are keyed by, session/held.py)
    incarnation: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, source: Mapping[str, Any] | None) -> SessionState:
        if not source:
            return cls()
        return cls(
            next_seq=int(source.get("next_seq") or 0),
            window_from=int(source.get("window_from") or 0),
            open_batches=tuple(int(x) for x in source.get("open_batches") or ()),
            summary=str(source.get("summary") or ""),
            summary_upto=int(
                source.get("summary_upto", -1) if source.get("summary_upto") is not None else -1
            ),
            user_name=source.get("user_name"),
            agent_name=source.get("agent_name"),
            last_at=source.get("last_at"),
            incarnation=source.get("incarnation") or None,
        )

    def fields(self) -> dict[str, Any]:
        return {
            "next_seq": self.next_seq,
            "window_from": self.window_from,
            "open_batches": list(self.open_batches),
            "summary": self.summary,
            "summary_upto": self.summary_upto,
            "user_name": self.user_name,
            "agent_name": self.agent_name,
            "last_at": self.last_at,
            "incarnation": self.incarnation,
            "window_open": self.next_seq > self.window_from,  # what the idle sweep looks for
        }

    @property
    def window_turns(self) -> int:
        return self.next_seq - self.window_from


def cuts(
    state: SessionState, trigger: int, batch: int, flush: str | None
) -> tuple[SessionState, list[Cut]]:
    """The batches to hand over now, and the state after handing them (``flush``: a reason to
    hand over the whole window)."""
    out: list[Cut] = []
    start = state.window_from
    while state.next_seq - start >= trigger:
        out.append(Cut(start, start + batch - 1, "trigger"))
        start += batch
    if flush and state.next_seq > start:
        out.append(Cut(start, state.next_seq - 1, flush))
        start = state.next_seq
    opened = state.open_batches + tuple(c.first_seq for c in out)
    return replace(state, window_from=start, open_batches=opened), out


def dialogue_from(state: SessionState, undone: list[int]) -> int:
    """The first turn the dialogue shows: the oldest batch not yet done, else the window's
    start; never a turn the summary already holds."""
    first = min([*undone, state.window_from])
    return max(first, state.summary_upto + 1)
