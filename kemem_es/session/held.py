"""What a process holds of its sessions' turns, so that a ``view`` reads only the state.

A message never changes once stored (its engine id is its session and number; a message sent
again under its number is stored once), and a batch once ``done`` stays done. So a process keeps
the messages it wrote or read, and the batches it saw done, and reads from the engine only what
the state says exists beyond them — another process's messages are still seen, because the state
read on each view says how far the session goes.

Everything is keyed by the session's *incarnation*: a token written into the state when the
session is created (and onto each of its messages). A session deleted and created again under the
same id starts its numbers at 0 again but has a new token, so the old incarnation's turns are
never shown for it: its entries are simply not looked up. Deletes drop the entries of their scope
(or session) too, so the memory is given back at once. The scope is part of the key as everywhere
(a tenant never sees another's turns).

Bounded: ``SESSIONS_HELD`` sessions, least recently used first out; per session only the turns a
dialogue can still show are kept (``prune``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kemem_es.bounded import Bounded
from kemem_es.store.scope import Scope

SESSIONS_HELD = 2_000  # sessions whose turns one process keeps (least recently used out)
TURNS_HELD = 400  # turns kept per session at most (the dialogue reads 200 at most)

Key = tuple[Scope, str, str]  # (scope, session id, incarnation)


@dataclass
class _Held:
    turns: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)  # batches (first seq) seen done


class HeldTurns:
    """Messages and done batches per (scope, session, incarnation); thread-safe (the lock
    keeps each session's entry whole; the sessions' map, ``Bounded``, drops the least recently
    used beyond ``sessions``)."""

    def __init__(self, sessions: int = SESSIONS_HELD, turns: int = TURNS_HELD) -> None:
        self.sessions = sessions
        self.turns_max = turns
        self._held: Bounded[Key, _Held] = Bounded(sessions)
        self._lock = threading.Lock()

    def _get(self, key: Key, create: bool) -> _Held | None:
        held = self._held.get(key)
        if held is None and create:
            held = self._held.setdefault(key, _Held())
        return held

    # -- messages -----------------------------------------------------------------------------
    def turns(
        self, scope: Scope, sid: str, incarnation: str | None, seqs: Iterable[int]
    ) -> dict[int, dict[str, Any]]:
        """Those of ``seqs`` held (none without an incarnation: a state written before the
        token existed is read whole, as before)."""
        if not incarnation:
            return {}
        with self._lock:
            held = self._get((scope, sid, incarnation), create=False)
            if held is None:
                return {}
            return {s: held.turns[s] for s in seqs if s in held.turns}

    def put_turns(
        self,
        scope: Scope,
        sid: str,
        incarnation: str | None,
        docs: Iterable[Mapping[str, Any]],
    ) -> None:
        """Keep messages of this incarnation: only those stamped with its token (a message
        read while the session was being deleted and created again may be the old one's)."""
        if not incarnation:
            return
        mine = [d for d in docs if d.get("incarnation") == incarnation and "seq" in d]
        if not mine:
            return
        with self._lock:
            held = self._get((scope, sid, incarnation), create=True)
            assert held is not None
            for d in mine:
                held.turns[int(d["seq"])] = dict(d)
            if len(held.turns) > self.turns_max:  # the oldest go first
                for s in sorted(held.turns)[: len(held.turns) - self.turns_max]:
                    del held.turns[s]

    def prune(self, scope: Scope, sid: str, incarnation: str | None, below: int) -> None:
        """Turns before ``below`` will not be shown again (the dialogue's start only moves on;
        a later read of one is only a read)."""
        if not incarnation:
            return
        with self._lock:
            held = self._get((scope, sid, incarnation), create=False)
            if held is None:
                return
            for s in [s for s in held.turns if s < below]:
                del held.turns[s]
            # (batches seen done stay: a state may still list one until the next add, and a
            # batch not listed as done would be read again; one number per batch)

    # -- batches ------------------------------------------------------------------------------
    def done(self, scope: Scope, sid: str, incarnation: str | None) -> set[int]:
        if not incarnation:
            return set()
        with self._lock:
            held = self._get((scope, sid, incarnation), create=False)
            return set(held.done) if held is not None else set()

    def put_done(self, scope: Scope, sid: str, incarnation: str | None, first_seq: int) -> None:
        if not incarnation:
            return
        with self._lock:
            held = self._get((scope, sid, incarnation), create=True)
            assert held is not None
            held.done.add(first_seq)

    # -- deletes ------------------------------------------------------------------------------
    def drop(self, scope: Scope, sid: str | None = None) -> None:
        """Forget a session (every incarnation), or with ``sid=None`` every session of the
        scope."""
        with self._lock:
            for key in self._held:
                if key[0] == scope and (sid is None or key[1] == sid):
                    self._held.pop(key)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()

    def __len__(self) -> int:
        return len(self._held)
