"""The session manager's base: its parts (store, batches, settings, the extractor, the
summarizer, the writer, the worker), the per-session locks and the states it last saw, and the
shapes its verbs answer with."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from kemem_es.bounded import Bounded
from kemem_es.config import SessionSettings
from kemem_es.contract.memory import AddResult
from kemem_es.memory.extract import Extraction, Extractor
from kemem_es.session.held import HeldTurns
from kemem_es.session.summary import Summarizer
from kemem_es.session.tokens import TokenCounter
from kemem_es.session.window import Cut, SessionState
from kemem_es.session.worker import Worker
from kemem_es.store.batches import Batches
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import SessionStore, Versioned

STATES_KEPT = 10_000  # sessions whose last known state this process remembers (view's one read)


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
    version: Versioned | None = None  # the state document as read
    window: Mapping[str, Any] | None = None  # its prepared window vector (search.shared_window)


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


class ManagerBase:
    """The session manager's parts, per-session locks and last known states."""

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
        # the state this process last wrote or read per session (with the document as written
        # or read): ``view`` reads the state and what it implies in one round trip, and checks
        # that the state is still that one; the window job and the summary check take it as is
        self._known: Bounded[tuple[Scope, str], tuple[SessionState, Versioned | None]] = Bounded(
            STATES_KEPT
        )
        # the messages this process wrote or read and the batches it saw done (session/held.py)
        self.held = HeldTurns()

    def _remember(
        self, scope: Scope, sid: str, state: SessionState, version: Versioned | None = None
    ) -> None:
        self._known.put((scope, sid), (state, version))

    def forget(self, scope: Scope, sid: str | None = None) -> None:
        """A session (``None``: every session of the scope) deleted: what this process holds
        of it goes (its incarnation token already keeps a session created again apart)."""
        for key in self._known:
            if key[0] == scope and (sid is None or key[1] == sid):
                self._known.pop(key)
        self.held.drop(scope, sid)

    def _lock(self, scope: Scope, session_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((scope, session_id), threading.Lock())
