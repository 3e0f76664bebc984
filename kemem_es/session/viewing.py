"""The dialogue part of a context (``view``) and the running summary it folds into."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone

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
                return self._view_of(state, docs, first)
            version = first
        else:
            version = self.store.state(scope, sid)
            state = SessionState.of(version.source if version else None)
        if state.next_seq:
            self._remember(scope, sid, state)
        else:
            self._known.pop((scope, sid), None)
        return self._view_of(state, self.store.get_docs(scope, _view_keys(sid, state)), version)

    def _view_of(
        self, state: SessionState, docs: Sequence[Versioned | None], version: Versioned | None
    ) -> View:
        n_open = len(state.open_batches)
        undone = [
            f
            for f, d in zip(state.open_batches, docs[:n_open], strict=True)
            if d is not None and d.source.get("status") not in ("done", "failed")
        ]
        first = max(dialogue_from(state, undone), state.next_seq - MAX_DIALOGUE)
        turns = [d.source for d in docs[n_open:] if d is not None and int(d.source["seq"]) >= first]
        window = version.source.get(WINDOW_FIELD) if version is not None else None
        return View(state, turns, len(undone), version, window)

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
