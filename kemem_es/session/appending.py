"""Appending a session's messages (the window moves, batches are recorded and handed over),
ending a session, and the idle sweep that ends every idle one."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from kemem_es.errors import (
    ConcurrentChange,
    KememError,
)
from kemem_es.session.base import Outcome, Swept, _iso, _parse
from kemem_es.session.jobs import BatchJobs
from kemem_es.session.turns import normalise
from kemem_es.session.window import SessionState, cuts
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import (
    Versioned,
    batch_key,
    checked_session,
    message_key,
    state_key,
)

log = logging.getLogger("kemem_es.session")

RETRIES = 5
PROBE = 16  # messages looked at past a state's next_seq (a call whose state write was lost)
SWEEP_PAGE = 200  # idle sessions read at once by a sweep
SWEEP_MAX = 5000  # idle sessions one sweep ends at most (the next sweep goes on)


class Appending(BatchJobs):
    """Messages appended, sessions ended, idle sessions swept."""

    # -- append ---------------------------------------------------------------------------
    def append(
        self,
        scope: Scope,
        session_id: object,
        messages: object,
        names: Mapping[str, str],
        flush: str | None = None,
        now: datetime | None = None,
        start: bool = True,
        idle_before: datetime | None = None,
    ) -> Outcome:
        """Store the messages in order, move the window, record the batches handed over and
        (``start``) extract them in the background. ``idle_before`` (the idle sweep): only
        when the session's last message came before it, decided on the state as read under
        its version (a message added meanwhile, by any process, makes this a no-op)."""
        sid = checked_session(session_id)
        turns = normalise(messages)
        now = now or datetime.now(timezone.utc)
        with self._lock(scope, sid):
            for attempt in range(RETRIES):
                try:
                    done = self._append_once(scope, sid, turns, names, flush, now, idle_before)
                    break
                except ConcurrentChange:
                    if attempt + 1 == RETRIES:
                        raise
        for cut in done.batches if start else []:
            self._submit(scope, sid, cut.first_seq)
        if turns and self.summarizer() is not None:  # checked off the caller's time
            self.worker.submit("summary check", lambda: self._maybe_summarize(scope, sid))
        return done

    def _append_once(
        self,
        scope: Scope,
        sid: str,
        turns: list[dict[str, Any]],
        names: Mapping[str, str],
        flush: str | None,
        now: datetime,
        idle_before: datetime | None = None,
    ) -> Outcome:
        """Two round trips when this process knows the session's state and it is still that
        one: the state read with the open batches (not seen done) and the numbers past its end
        that the known state implies; the messages, new batch records and the state (one
        write). Else three (what the state read implies is read next)."""
        explicit = bool(turns) and "seq" in turns[0]
        known = self._known.get((scope, sid))
        guess = []
        if known is not None:
            was = self.held.done(scope, sid, known[0].incarnation)
            guess = self._append_keys(sid, known[0], was, explicit)
        version, *docs = self.store.get_docs(scope, [state_key(sid), *guess])
        got = dict(zip(guess, docs, strict=True))
        state = SessionState.of(version.source if version else None)
        if idle_before is not None:
            last_seen = _parse(state.last_at)
            if version is None or last_seen is None or last_seen >= idle_before:
                return Outcome(sid, [], 0, [])  # active again (or gone): nothing to end
        if state.incarnation is None:  # a new session (or one stored before the token)
            state = replace(state, incarnation=secrets.token_hex(8))
        done = self.held.done(scope, sid, state.incarnation)  # seen done: not read again
        keys = self._append_keys(sid, state, done, explicit)
        missing = [k for k in keys if k not in got]
        if missing:
            got.update(zip(missing, self.store.get_docs(scope, missing), strict=True))
        maybe = [f for f in state.open_batches if f not in done]
        docs = [got[batch_key(sid, f)] for f in maybe]
        probe = [] if explicit else [message_key(sid, state.next_seq + i) for i in range(PROBE)]
        ahead = [d.source for k in probe if (d := got[k]) is not None]
        state = replace(state, open_batches=tuple(maybe))
        state = self._prune(scope, sid, state, docs[: len(maybe)])
        last = _parse(state.last_at)
        idle = last is not None and (now - last).total_seconds() > self.settings.idle_s
        trigger, size = self.settings.trigger_turns, self.settings.batch_turns
        state, idle_cuts = cuts(state, trigger, size, "idle" if idle else None)
        seqs = _numbers(turns, state.next_seq, ahead)
        stamped = [{**t, "seq": s, "at": _iso(now)} for t, s in zip(turns, seqs, strict=True)]
        state = replace(
            state,
            next_seq=max([state.next_seq, *(s + 1 for s in seqs)]),
            last_at=_iso(now) if turns else state.last_at,  # when the session last heard a turn
            user_name=names.get("user_name") or state.user_name,
            agent_name=names.get("agent_name") or state.agent_name,
        )
        state, new_cuts = cuts(state, trigger, size, flush)
        who = {
            k: v for k, v in (("user_name", state.user_name), ("agent_name", state.agent_name)) if v
        }
        lines = [
            line
            for c in [*idle_cuts, *new_cuts]
            for line in self.batches.lines(scope, sid, c.first_seq, c.last_seq, c.reason, who)
        ]
        written = self.store.write(scope, sid, stamped, lines, state.fields(), version)
        self._remember(scope, sid, state, written.state)
        statuses = written.statuses
        # what this call stored, this process now holds (a number stored already is not ours)
        mine = [m for m, st in zip(written.messages, statuses, strict=True) if st == "created"]
        self.held.put_turns(scope, sid, state.incarnation, mine)
        stored = sum(s == "created" for s in statuses)
        return Outcome(sid, seqs, stored, [*idle_cuts, *new_cuts])

    def _append_keys(
        self, sid: str, state: SessionState, done: set[int], explicit: bool
    ) -> list[str]:
        """What an append over ``state`` reads: its open batches not seen ``done``, and
        (numbers not given) the numbers past its end."""
        probe = [] if explicit else [message_key(sid, state.next_seq + i) for i in range(PROBE)]
        return [*(batch_key(sid, f) for f in state.open_batches if f not in done), *probe]

    def _prune(
        self, scope: Scope, sid: str, state: SessionState, docs: Sequence[Versioned | None]
    ) -> SessionState:
        """Batches done since are no longer open; those whose lease passed start again."""
        still = []
        for first, doc in zip(state.open_batches, docs, strict=True):
            status = doc.source.get("status") if doc is not None else None
            if status == "done":
                self.held.put_done(scope, sid, state.incarnation, first)
            if doc is None or status in ("done", "failed"):
                continue
            still.append(first)
            lease = _parse(doc.source.get("lease_until"))
            if lease is None or lease < datetime.now(timezone.utc):
                self._submit(scope, sid, first)
        return replace(state, open_batches=tuple(still))

    def _batch_docs(self, scope: Scope, sid: str, firsts: Sequence[int]) -> list[Versioned | None]:
        return self.store.get_docs(scope, [batch_key(sid, f) for f in firsts])

    def end(self, scope: Scope, session_id: object, reason: str = "end") -> Outcome:
        """Hand the whole window to extraction (the session ended, or the scene changed)."""
        return self.append(scope, session_id, [], {}, flush=reason)

    def sweep(self, now: datetime | None = None) -> Swept:
        """What a server runs every ``KEMEM_SESSION_SWEEP_S``: start the open batches again
        (``resume``), then end every session of every scope idle longer than
        ``KEMEM_SESSION_IDLE_S`` — its window goes to extraction as one batch (reason
        ``idle``), exactly as ``end`` does. Idempotent across processes: each session is
        ended under its state's version, so two sweeps (or a sweep and an add) never hand
        the same turns over twice; a session active again is left as it is."""
        now = now or datetime.now(timezone.utc)
        resumed = self.resume()
        cutoff = now - timedelta(seconds=self.settings.idle_s)
        sessions = batches = seen = 0
        after: list[Any] | None = None
        while seen < SWEEP_MAX:
            page = self.store.idle_states(_iso(cutoff), SWEEP_PAGE, after)
            for scope, src, _ in page:
                try:
                    out = self.append(
                        scope, src["session_id"], [], {}, "idle", now, idle_before=cutoff
                    )
                except KememError as exc:  # one session's trouble does not stop the sweep
                    log.warning("idle sweep: a session failed: %s", type(exc).__name__)
                    continue
                sessions += bool(out.batches)
                batches += len(out.batches)
            seen += len(page)
            if len(page) < SWEEP_PAGE:
                break
            after = page[-1][2]
        if sessions:
            log.info("idle sweep: %d session(s) ended, %d batch(es)", sessions, batches)
        return Swept(resumed, sessions, batches)


def _numbers(turns: list[dict[str, Any]], start: int, ahead: list[dict[str, Any]]) -> list[int]:
    """Given numbers, else the next ones. Messages stored past the state's end (a call whose
    state write was lost in a crash): the same messages right there are that call sent again
    and keep their numbers (stored once); others are skipped past."""
    if turns and "seq" in turns[0]:
        return [int(t["seq"]) for t in turns]
    if ahead:
        by_seq = {int(d["seq"]): d for d in ahead}
        same = all(
            by_seq.get(start + i, {}).get("content") == t["content"]
            and by_seq.get(start + i, {}).get("role") == t["role"]
            for i, t in enumerate(turns)
        )
        if not same:
            start = max(by_seq) + 1
    return list(range(start, start + len(turns)))
