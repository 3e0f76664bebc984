"""The dialogue part of a context (``view``) and the running summary it folds into."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from kemem_es.session.base import ManagerBase, View
from kemem_es.session.window import SessionState, dialogue_from
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import (
    WINDOW_FIELD,
    Versioned,
    batch_key,
    checked_session,
    message_key,
    state_key,
)

MAX_DIALOGUE = 200  # turns the dialogue reads at most (batches stuck undone would grow it)


class Viewing(ManagerBase):
    """A session's dialogue as ``context()`` shows it, and its running summary."""

    # -- the dialogue -----------------------------------------------------------------------
    def view(self, scope: Scope, session_id: object, fresh: bool = True) -> View:
        """The state, its open batches and every turn the dialogue may show (from the oldest
        open batch). Only what this process does not hold is read (``held``: the messages it
        wrote or read, the batches it saw done, per incarnation of the session): one read when
        this process knows the session's state and the state read is still that one (the
        state, and the open batches and turns it does not hold), else two. ``fresh=False``:
        the state this process last wrote or read, as it is (no read of it: the window job
        and the summary check right after an add; a write with its version still fails if
        another process changed it since)."""
        sid = checked_session(session_id)
        known = self._known.get((scope, sid))
        got: dict[str, Versioned | None] = {}
        if not fresh and known is not None and known[1] is not None:
            state, version = known
        else:
            guess = self._wanted(scope, sid, known[0]) if known is not None else []
            first, *docs = self.store.get_docs(scope, [state_key(sid), *guess])
            version = first
            state = SessionState.of(first.source if first else None)
            got = dict(zip(guess, docs, strict=True))
            if state.next_seq:
                self._remember(scope, sid, state, version)
            else:
                self._known.pop((scope, sid))
        missing = [k for k in self._wanted(scope, sid, state) if k not in got]
        if missing:
            got.update(zip(missing, self.store.get_docs(scope, missing), strict=True))
        return self._view_of(scope, sid, state, version, got)

    def _wanted(self, scope: Scope, sid: str, state: SessionState) -> list[str]:
        """What the dialogue of ``state`` reads beyond what this process holds: its open
        batches not seen done, then its turns not held."""
        done = self.held.done(scope, sid, state.incarnation)
        maybe = [f for f in state.open_batches if f not in done]
        lo = max(dialogue_from(state, maybe), state.next_seq - MAX_DIALOGUE)
        held = self.held.turns(scope, sid, state.incarnation, range(lo, state.next_seq))
        return [
            *(batch_key(sid, f) for f in maybe),
            *(message_key(sid, n) for n in range(lo, state.next_seq) if n not in held),
        ]

    def _view_of(
        self,
        scope: Scope,
        sid: str,
        state: SessionState,
        version: Versioned | None,
        got: Mapping[str, Versioned | None],
    ) -> View:
        inc = state.incarnation
        done = self.held.done(scope, sid, inc)
        maybe = [f for f in state.open_batches if f not in done]
        undone = []
        for f in maybe:
            doc = got.get(batch_key(sid, f))
            status = doc.source.get("status") if doc is not None else None
            if status == "done":
                self.held.put_done(scope, sid, inc, f)  # done stays done
            elif doc is not None and status != "failed":
                undone.append(f)
        lo = max(dialogue_from(state, maybe), state.next_seq - MAX_DIALOGUE)
        first = max(dialogue_from(state, undone), state.next_seq - MAX_DIALOGUE)
        held = self.held.turns(scope, sid, inc, range(first, state.next_seq))
        read: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        for n in range(first, state.next_seq):
            turn = held.get(n)
            if turn is None:
                doc = got.get(message_key(sid, n))
                if doc is None:
                    continue
                turn = doc.source
                read.append(turn)
            turns.append(turn)
        self.held.put_turns(scope, sid, inc, read)
        self.held.prune(scope, sid, inc, lo)
        window = version.source.get(WINDOW_FIELD) if version is not None else None
        return View(state, turns, len(undone), version, window)

    # -- the running summary -----------------------------------------------------------------
    def _maybe_summarize(self, scope: Scope, sid: str) -> None:
        view = self.view(scope, sid, fresh=False)
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
            written = self.store.put_state(scope, sid, updated.fields(), version)
            self._remember(scope, sid, updated, written)
