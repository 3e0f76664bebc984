"""The session verbs behind ``Kemem``: append (``add`` with a ``session_id``), ``context``,
``end_session`` and the session's messages (list, get, delete)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from typing_extensions import Unpack

from kemem_es.config import SessionSettings
from kemem_es.contract.context import Appended, Batch, ContextResult, DialogueTurn, SessionInfo
from kemem_es.contract.memory import AddResult
from kemem_es.contract.options import QueryOptions
from kemem_es.contract.params import prepared_default
from kemem_es.contract.response import QueryResponse
from kemem_es.errors import EngineUnavailable, InvalidInput, NotFound
from kemem_es.memory.inputs import utf8_text
from kemem_es.runtime import result_of, settle
from kemem_es.session.assemble import Inputs, assemble
from kemem_es.session.manager import Outcome, SessionManager, View
from kemem_es.session.tokens import TokenCounter
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import checked_session

log = logging.getLogger("kemem_es.session")


class Recall(Protocol):
    """``Kemem.query`` (what the details part is recalled with)."""

    def __call__(
        self,
        text: str,
        *,
        user_id: str,
        agent_id: str,
        degrade: bool | None = None,
        reinforce: bool | None = None,
        **options: Unpack[QueryOptions],
    ) -> QueryResponse: ...


CONTEXT_TURNS = 20  # the window's newest turns a context's recall takes as its ``context``
# How long a context waits for its session's window vector being computed right then (a
# message sent right after the last add): the job takes a window read and one model run; past
# this the context embeds the window itself, as it does when nothing was prepared.
PREPARE_WAIT_S = 2.0


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


@dataclass(frozen=True)
class WindowShare:
    """A prepared window vector out of this process (``export``: a record of the window
    these turns make, when prepared here) and into it (``adopt``: cache a record another
    process wrote; whether it was these turns' window). See search.shared_window."""

    export: Callable[[Sequence[Mapping[str, str]]], dict[str, Any] | None]
    adopt: Callable[[Sequence[Mapping[str, str]], Mapping[str, Any]], bool]


class Sessions:
    """``prepare``: ``Kemem.prepare_context`` — after each add the window's vector is computed
    off the request path (a thread of its own), so the next ``context()`` embeds only the user's
    message (its recall uses the window vector ``prepare_context`` prepares,
    ``contract.params.prepared_default``, unless told otherwise). A context that comes while
    its session's job is still queued takes the job over (cancels it and embeds the window in
    its own model call); one that comes while the job runs waits for it — the window is
    embedded once either way. ``share``: the prepared vector is also written onto the
    session's state, and a context in a process that did not prepare it (another worker or
    server) adopts it from the state it reads anyway."""

    def __init__(
        self,
        manager: SessionManager,
        recall: Recall,
        counter: Callable[[], TokenCounter],
        settings: SessionSettings,
        prefix: str,
        prepare: Callable[[Sequence[Mapping[str, str]]], bool] | None = None,
        share: WindowShare | None = None,
    ) -> None:
        self.manager = manager
        self.store = manager.store
        self.recall = recall
        self.counter = counter
        self.settings = settings
        self.prefix = prefix
        self.prepare = prepare
        self.share = share
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kemem-context")
        self._preparing: set[tuple[Scope, str]] = set()
        self._jobs: dict[tuple[Scope, str], Future[None]] = {}  # the newest job per session
        self._guard = threading.Lock()

    # -- writes -------------------------------------------------------------------------------
    def add(
        self,
        scope: Scope,
        session_id: object,
        messages: object,
        names: Mapping[str, str],
        scene_change: bool = False,
        wait: bool = False,
    ) -> tuple[Appended, list[AddResult]]:
        """Append; with ``wait`` the batches this call handed over are extracted before it
        returns, and their memories returned (else they are extracted in the background)."""
        flush = "scene" if scene_change else None
        done = self.manager.append(scope, session_id, messages, names, flush, start=not wait)
        self._prepare_window(scope, done.session_id)
        written: list[AddResult] = []
        for cut in done.batches if wait else []:
            written += self.manager.process(scope, done.session_id, cut.first_seq)
        return _appended(done), written

    def _prepare_window(self, scope: Scope, sid: str) -> None:
        """The window's vector for the next context, computed in the background (one job per
        session at a time: a job still queued covers the adds that come meanwhile)."""
        if self.prepare is None:
            return
        key = (scope, sid)
        with self._guard:
            if key in self._preparing:
                return
            self._preparing.add(key)

        def job() -> None:
            try:
                with self._guard:
                    self._preparing.discard(key)  # an add from now on queues its own
                # the state this process just wrote, as it is (a write over its version
                # fails if another process changed it since), and the turns it holds
                view = self.manager.view(scope, sid, fresh=False)
                turns = _context_of(view.turns)
                if turns and self.prepare is not None:
                    self.prepare(turns)
                    rec = self.share.export(turns) if self.share is not None else None
                    if rec is not None and view.version is not None:
                        self.store.put_window(scope, sid, rec, view.version)
            except Exception as exc:  # only a speed-up: the context embeds the window itself
                log.debug("preparing a session window failed: %s", type(exc).__name__)

        def forget(done: Future[None]) -> None:
            with self._guard:
                if self._jobs.get(key) is done:
                    del self._jobs[key]

        with self._guard:
            future = self._pool.submit(job)
            self._jobs[key] = future
        future.add_done_callback(forget)

    def _await_window(self, scope: Scope, sid: str) -> None:
        """Before a context's recall: its session's window job, if one is pending, is taken
        over while still queued (the recall embeds the window in its own model call, as the
        job would have) or waited for while it runs (at most ``PREPARE_WAIT_S``)."""
        key = (scope, sid)
        with self._guard:
            future = self._jobs.get(key)
        if future is None or future.done():
            return
        # (outside the guard: a cancelled future's callback, ``forget``, takes it)
        if future.cancel():  # not started: the recall does its work, once
            with self._guard:
                self._preparing.discard(key)
            return
        settle(future, PREPARE_WAIT_S)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def end(self, scope: Scope, session_id: object) -> Appended:
        return _appended(self.manager.end(scope, session_id))

    # -- context --------------------------------------------------------------------------------
    def context(
        self,
        scope: Scope,
        message: str,
        *,
        session_id: str | None,
        max_tokens: int | None,
        user_name: str | None,
        agent_name: str | None,
        now: datetime,
        options: dict[str, Any],
    ) -> ContextResult:
        if not isinstance(message, str) or not message.strip():
            raise InvalidInput(
                "message: the user's current message, a non-empty text", field="message"
            )
        utf8_text(message, "message")
        budget = self.settings.max_tokens if max_tokens is None else max_tokens
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise InvalidInput("max_tokens: a whole number ≥ 1", field="max_tokens")
        degraded: str | None = None
        view: View | None = None
        sid = checked_session(session_id) if session_id is not None else None
        overview: list[dict[str, Any]] = []
        start = time.perf_counter()
        timings: dict[str, float] = {}
        try:  # the overview's search runs while the window is read (they are independent)
            wanted = self.settings.overview_max
            pending = (
                self._pool.submit(self.store.recent_events, scope, self.prefix, wanted)
                if wanted
                else None
            )
            try:
                view = self.manager.view(scope, sid) if sid else None
                timings["session"] = _ms(start)
            finally:
                # awaited, not blocked on, inside an async verb: the thread's engine call
                # needs the event loop this call runs on
                overview = result_of(pending) if pending is not None else []
                timings["overview"] = _ms(start)
        except EngineUnavailable as exc:
            degraded = f"session unavailable: {exc}"
            log.warning("context degraded: %s", type(exc).__name__)
        state = view.state if view else None
        user_name = user_name or (state.user_name if state else None)
        agent_name = agent_name or (state.agent_name if state else None)
        turns = view.turns if view else []
        t0 = time.perf_counter()
        if sid and turns:
            self._await_window(scope, sid)
            if self.share is not None and view and view.window and "context" not in options:
                with contextlib.suppress(Exception):  # only a speed-up, as preparing is
                    self.share.adopt(_context_of(turns), view.window)
            timings["window"] = _ms(t0)
            t0 = time.perf_counter()
        recall = self._recall(scope, message, turns, overview, user_name, agent_name, now, options)
        timings["recall"] = _ms(t0)
        if recall.additional_info.degraded and not degraded:
            degraded = recall.additional_info.degraded_reason or "recall degraded"
        inp = Inputs(
            message=message,
            turns=turns,
            summary=state.summary if state else "",
            overview=overview,
            recall=recall,
            user_name=user_name,
            agent_name=agent_name,
            now=now,
            budget=budget,
            shares=self.settings.shares,
            can_summarize=self.manager.summarizer() is not None,
            session_id=sid,
            pending=view.pending if view else 0,
            degraded=degraded,
        )
        t0 = time.perf_counter()
        result = assemble(inp, self.counter())
        timings["assemble"] = _ms(t0)
        timings["total"] = _ms(start)
        result.timings_ms = timings
        t = result.tokens  # token use per agent (ids and counts only: never the text)
        log.info(
            "context agent_id=%s tokens=%d/%d dialogue=%d summary=%d overview=%d details=%d",
            scope.agent_id, t.total, budget, t.dialogue, t.summary, t.overview, t.details,
        )  # fmt: skip
        return result

    def _recall(
        self,
        scope: Scope,
        message: str,
        turns: list[dict[str, Any]],
        overview: list[dict[str, Any]],
        user_name: str | None,
        agent_name: str | None,
        now: datetime,
        options: dict[str, Any],
    ) -> QueryResponse:
        context = _context_of(turns)
        opts: dict[str, Any] = {"now": now, **options}
        if context and "context" not in opts:
            opts["context"] = context
            # the window vector prepared after the last add (see the class docstring)
            opts.setdefault("context_vector", prepared_default())
        ids = [str(s.get("id")) for s in overview if s.get("id")]
        if ids:
            opts["exclude_ids"] = [*opts.get("exclude_ids", []), *ids]
        for k, v in (("user_name", user_name), ("agent_name", agent_name)):
            if v and k not in opts:
                opts[k] = v
        assert scope.user_id is not None
        return self.recall(
            message, user_id=scope.user_id, agent_id=scope.agent_id, degrade=True, **opts
        )

    # -- messages -------------------------------------------------------------------------------
    def messages(self, scope: Scope, session_id: object, limit: int = 1000) -> list[DialogueTurn]:
        sid = checked_session(session_id)
        if not 1 <= limit <= 10_000:
            raise InvalidInput("limit: must be 1–10000", field="limit")
        rows = self.store.list_messages(scope, sid, limit)
        return [
            DialogueTurn(
                seq=r["seq"],
                role=r["role"],
                name=r.get("name"),
                content=r["content"],
                at=r.get("at"),
            )
            for r in rows
        ]

    def message(self, scope: Scope, session_id: object, seq: int) -> DialogueTurn:
        sid = checked_session(session_id)
        rows = self.store.messages_by_seq(scope, sid, seq, seq)
        if not rows:
            raise NotFound(f"no message {seq} in session {sid!r} of the {scope.describe()}")
        r = rows[0]
        return DialogueTurn(
            seq=r["seq"], role=r["role"], name=r.get("name"), content=r["content"], at=r.get("at")
        )

    def sessions(self, scope: Scope, limit: int = 100) -> list[SessionInfo]:
        if not 1 <= limit <= 10_000:
            raise InvalidInput("limit: must be 1–10000", field="limit")
        return [
            SessionInfo(
                session_id=r["session_id"],
                messages=int(r.get("next_seq") or 0),
                window_from=int(r.get("window_from") or 0),
                open_batches=len(r.get("open_batches") or []),
                last_at=r.get("last_at"),
                has_summary=bool(r.get("summary")),
            )
            for r in self.store.list_sessions(scope, limit)
        ]

    def delete(self, scope: Scope, session_id: object, forget: bool = False) -> int:
        """Delete one session's messages, state and batches (history: one entry)."""
        sid = checked_session(session_id)
        try:
            return self.store.delete(scope, sid, forget)
        finally:
            self.manager.forget(scope, sid)

    def delete_scope(self, scope: Scope, forget: bool = False) -> int:
        try:
            return self.store.delete(scope, None, forget)
        finally:
            self.manager.forget(scope)


def _context_of(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The window's newest turns as a context's recall takes them (and its window job)."""
    return [{"role": t["role"], "content": t["content"]} for t in turns[-CONTEXT_TURNS:]]


def _appended(done: Outcome) -> Appended:
    batches = [
        Batch(first_seq=c.first_seq, last_seq=c.last_seq, reason=c.reason) for c in done.batches
    ]
    return Appended(session_id=done.session_id, seqs=done.seqs, stored=done.stored, batches=batches)
