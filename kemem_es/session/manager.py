"""The context manager: appends a session's messages, hands batches of turns to extraction in
the background, keeps the running summary, and tells ``context()`` what the dialogue is.

Durability: messages, the session's state and every batch handed over are engine documents
(store/sessions.py, store/batches.py). A batch is recorded before the window moves; a worker
claims it with a lease, saves the extractor's answer, writes the memories through the normal
write path and marks it done. A process killed at any point leaves a batch that the next one
(``resume``) claims once its lease has passed, so no batch is extracted twice or never.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from kemem_es.config import SessionSettings
from kemem_es.contract.memory import AddResult
from kemem_es.errors import (
    ConcurrentChange,
    ExtractionError,
    ExtractorNotConfigured,
    KememError,
)
from kemem_es.memory.extract import Extraction, Extractor
from kemem_es.session.fallback import fallback_extraction
from kemem_es.session.summary import Summarizer
from kemem_es.session.tokens import TokenCounter
from kemem_es.session.turns import ROLES, normalise
from kemem_es.session.window import Cut, SessionState, cuts, dialogue_from
from kemem_es.session.worker import Worker
from kemem_es.store.batches import Batches
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import (
    SessionStore,
    Versioned,
    batch_key,
    checked_session,
    message_key,
    state_key,
)

log = logging.getLogger("kemem_es.session")

RETRIES = 5
PROBE = 16  # messages looked at past a state's next_seq (a call whose state write was lost)
TRIES = 3  # a batch's job tries this often in a row (then: the next append or resume)
RETRY_PAUSE_S = 0.5
MAX_DIALOGUE = 200  # turns the dialogue reads at most (batches stuck undone would grow it)
STATES_KEPT = 10_000  # sessions whose last known state this process remembers (view's one read)
SWEEP_PAGE = 200  # idle sessions read at once by a sweep
SWEEP_MAX = 5000  # idle sessions one sweep ends at most (the next sweep goes on)


class MemoryWriter(Protocol):
    """The normal write path for extracted record data (validation, dedup, hooks, history)."""

    def write_extracted(
        self, extraction: Extraction, scope: Scope, session_id: str, names: Mapping[str, str]
    ) -> list[AddResult]: ...


@dataclass(frozen=True)
class Outcome:
    session_id: str
    seqs: list[int]
    stored: int  # new messages (a message sent again under its number is not stored twice)
    batches: list[Cut]


@dataclass(frozen=True)
class Swept:
    """What one sweep did: open batches started again, idle sessions ended and the batches
    their windows became."""

    resumed: int
    sessions: int
    batches: int

    @property
    def started(self) -> int:
        return self.resumed + self.batches


@dataclass(frozen=True)
class View:
    """What the dialogue part of a context is made of."""

    state: SessionState
    turns: list[dict[str, Any]]
    pending: int


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


class SessionManager:
    def __init__(
        self,
        store: SessionStore,
        settings: SessionSettings,
        extractor: Callable[[], Extractor],
        summarizer: Callable[[], Summarizer | None],
        writer: MemoryWriter,
        counter: Callable[[], TokenCounter],
    ) -> None:
        self.store = store
        self.batches = Batches(store)
        self.settings = settings
        self.extractor = extractor
        self.summarizer = summarizer
        self.writer = writer
        self.counter = counter
        self.worker = Worker()
        self._locks: dict[tuple[Scope, str], threading.Lock] = {}
        self._guard = threading.Lock()
        self._queued: set[tuple[Scope, str, int]] = set()
        # the state this process last wrote or read per session: ``view`` reads the state and
        # the turns it implies in one round trip, and checks that the state is still that one
        self._known: dict[tuple[Scope, str], SessionState] = {}

    def _remember(self, scope: Scope, sid: str, state: SessionState) -> None:
        if len(self._known) >= STATES_KEPT:
            self._known.clear()
        self._known[(scope, sid)] = state

    def _lock(self, scope: Scope, session_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((scope, session_id), threading.Lock())

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
        """Three round trips: the state; the open batches and the numbers past the state's
        end (one read); the messages, new batch records and the state (one write)."""
        version = self.store.state(scope, sid)
        state = SessionState.of(version.source if version else None)
        if idle_before is not None:
            last_seen = _parse(state.last_at)
            if version is None or last_seen is None or last_seen >= idle_before:
                return Outcome(sid, [], 0, [])  # active again (or gone): nothing to end
        explicit = bool(turns) and "seq" in turns[0]
        probe = [] if explicit else [message_key(sid, state.next_seq + i) for i in range(PROBE)]
        n_open = len(state.open_batches)
        docs = self.store.get_docs(
            scope, [*(batch_key(sid, f) for f in state.open_batches), *probe]
        )
        ahead = [d.source for d in docs[n_open:] if d is not None]
        state = self._prune(scope, sid, state, docs[:n_open])
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
        statuses = self.store.write(scope, sid, stamped, lines, state.fields(), version)
        self._remember(scope, sid, state)
        stored = sum(s == "created" for s in statuses)
        return Outcome(sid, seqs, stored, [*idle_cuts, *new_cuts])

    def _prune(
        self, scope: Scope, sid: str, state: SessionState, docs: Sequence[Versioned | None]
    ) -> SessionState:
        """Batches done since are no longer open; those whose lease passed start again."""
        still = []
        for first, doc in zip(state.open_batches, docs, strict=True):
            if doc is None or doc.source.get("status") in ("done", "failed"):
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

    # -- the dialogue -----------------------------------------------------------------------
    def view(self, scope: Scope, session_id: object) -> View:
        """The state, its open batches and every turn the dialogue may show (from the oldest
        open batch): one read when this process knows the session's state (it wrote or read
        it last) and the state read with the turns is still that one, else two (the state,
        then the rest)."""
        sid = checked_session(session_id)
        known = self._known.get((scope, sid))
        if known is not None:
            first, *docs = self.store.get_docs(scope, [state_key(sid), *_view_keys(sid, known)])
            state = SessionState.of(first.source if first else None)
            if first is not None and _same_keys(state, known):
                self._remember(scope, sid, state)
                return self._view_of(state, docs)
        else:
            version = self.store.state(scope, sid)
            state = SessionState.of(version.source if version else None)
        if state.next_seq:
            self._remember(scope, sid, state)
        else:
            self._known.pop((scope, sid), None)
        return self._view_of(state, self.store.get_docs(scope, _view_keys(sid, state)))

    def _view_of(self, state: SessionState, docs: Sequence[Versioned | None]) -> View:
        n_open = len(state.open_batches)
        undone = [
            f
            for f, d in zip(state.open_batches, docs[:n_open], strict=True)
            if d is not None and d.source.get("status") not in ("done", "failed")
        ]
        first = max(dialogue_from(state, undone), state.next_seq - MAX_DIALOGUE)
        turns = [d.source for d in docs[n_open:] if d is not None and int(d.source["seq"]) >= first]
        return View(state, turns, len(undone))

    # -- background jobs ---------------------------------------------------------------------
    def _submit(self, scope: Scope, sid: str, first_seq: int) -> None:
        key = (scope, sid, first_seq)
        with self._guard:
            if key in self._queued:
                return
            self._queued.add(key)

        def job() -> None:
            try:
                for attempt in range(TRIES):  # an engine still warming up, an LLM's 5xx
                    try:
                        self.process(scope, sid, first_seq)
                        return
                    except KememError:
                        if attempt + 1 == TRIES:
                            raise
                        time.sleep(RETRY_PAUSE_S * 4**attempt)
            finally:
                with self._guard:
                    self._queued.discard(key)

        self.worker.submit(f"batch {first_seq} of a session", job)

    def process(self, scope: Scope, sid: str, first_seq: int) -> list[AddResult]:
        """Claim, extract, save the answer, write, mark done (see the module docstring). A
        batch record its session's state does not list (its write lost to another writer's)
        is not extracted: its turns belong to the batches the state does list."""
        batch, state = self.store.get_docs(scope, [batch_key(sid, first_seq), state_key(sid)])
        listed = state is not None and first_seq in SessionState.of(state.source).open_batches
        if batch is not None and not listed:
            log.warning("batch %d of a session is listed by no state: left alone", first_seq)
            return []
        claimed = batch and self.batches.claim(scope, batch, self.settings.lease_s)
        if not claimed:
            return []
        src = claimed.source
        names = {k: src[k] for k in ("user_name", "agent_name") if src.get(k)}
        if src.get("status") != "extracted" or not isinstance(src.get("result"), dict):
            msgs = self.store.messages_by_seq(
                scope, sid, int(src["first_seq"]), int(src["last_seq"])
            )
            try:
                found = self._extract(msgs, names)
            except ExtractionError as exc:
                self.batches.failed(scope, claimed, str(exc))
                raise
            result = {"events": found.events, "entities": found.entities}
            claimed = self.batches.extracted(scope, claimed, result)
        result = claimed.source["result"]
        extraction = Extraction(
            list(result.get("events") or []), list(result.get("entities") or [])
        )
        try:
            written = (
                self.writer.write_extracted(extraction, scope, sid, names) if extraction else []
            )
        except KememError as exc:  # its lease ends now: the next try claims it at once
            self.batches.failed(scope, claimed, str(exc))
            raise
        self.batches.done(scope, claimed, [r.id for r in written])
        return written

    def _extract(self, msgs: list[dict[str, Any]], names: Mapping[str, str]) -> Extraction:
        turns = [
            {
                "role": m["role"],
                "content": m["content"],
                **({"name": m["name"]} if m.get("name") else {}),
            }
            for m in msgs
            if m.get("role") in ROLES and str(m.get("content", "")).strip()
        ]
        if not turns:
            return Extraction()
        at = _parse(msgs[-1].get("at")) if msgs else None
        now = (at or datetime.now(timezone.utc)).astimezone()
        try:
            extractor = self.extractor()
        except ExtractorNotConfigured:
            return fallback_extraction(turns, user_name=names.get("user_name"), now=now)
        return extractor.extract(
            turns, user_name=names.get("user_name"), agent_name=names.get("agent_name"), now=now
        )

    def resume(self) -> int:
        """Start every open batch of every scope (after a restart); returns how many."""
        found = self.batches.open_batches()
        for scope, batch in found:
            self._submit(scope, batch.source["session_id"], int(batch.source["first_seq"]))
        return len(found)

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

    # -- the running summary -----------------------------------------------------------------
    def _maybe_summarize(self, scope: Scope, sid: str) -> None:
        view = self.view(scope, sid)
        budget = self.settings.max_tokens * self.settings.shares[0] * self.settings.summary_at
        count = self.counter().count
        if sum(count(t["content"]) for t in view.turns) > budget and len(view.turns) > 2:
            self.summarize(scope, sid)

    def summarize(self, scope: Scope, sid: str) -> None:
        """Fold the older half of the dialogue into the running summary."""
        summarizer = self.summarizer()
        view = self.view(scope, sid)
        if summarizer is None or len(view.turns) < 3:
            return
        older = view.turns[: len(view.turns) // 2]
        now = datetime.now(timezone.utc).astimezone()
        state = view.state
        text = summarizer.summarize(
            state.summary, older, user_name=state.user_name, agent_name=state.agent_name, now=now
        )
        upto = int(older[-1]["seq"])
        with self._lock(scope, sid):
            version = self.store.state(scope, sid)
            current = SessionState.of(version.source if version else None)
            if current.summary_upto >= upto:
                return
            updated = replace(current, summary=text, summary_upto=upto)
            self.store.put_state(scope, sid, updated.fields(), version)
            self._remember(scope, sid, updated)


def _view_keys(sid: str, state: SessionState) -> list[str]:
    """What the dialogue of ``state`` reads: its open batches, then its turns."""
    lo = max(dialogue_from(state, list(state.open_batches)), state.next_seq - MAX_DIALOGUE)
    return [
        *(batch_key(sid, f) for f in state.open_batches),
        *(message_key(sid, n) for n in range(lo, state.next_seq)),
    ]


def _same_keys(a: SessionState, b: SessionState) -> bool:
    """Two states whose dialogue reads the same documents."""
    return (a.next_seq, a.window_from, a.open_batches, a.summary_upto) == (
        b.next_seq, b.window_from, b.open_batches, b.summary_upto,
    )  # fmt: skip


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
