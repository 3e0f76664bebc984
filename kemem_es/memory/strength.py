"""Memory strength: recall reinforces, spaced repetition reinforces more.

- **Recall**: every memory of the user's a query returns gains ``reinforce_amount`` (15, up to
  ``MAX_STRENGTH``), its recall count +1 and ``last_recalled_at`` = now (the agent's official
  memories, shared by all its users, only with ``reinforce_official``:
  ``store.reinforce.recall_keys``). The query only enqueues (microseconds); a background thread
  flushes the queue every ``reinforce_flush_s`` as one bulk of scripted partial updates (params
  only, ``retry_on_conflict``), so the query path does not wait and no increment is lost when
  queries run concurrently (increments of one flush are summed per memory first).
- **Coalescing**: a memory written by a flush less than ``reinforce_coalesce_s`` (60) ago waits
  in the queue until that much has passed, its recalls meanwhile summed into one write (a
  user's activity likewise, the newest kept: the clean-up counts inactivity in days). Each
  write re-indexes the whole memory — its vector into the graph, then the refreshes and merges
  that carry it — and a conversation recalls the same memories turn after turn (the dialogue
  set's long chats, a turn every 10 s: 2.25 → 1.21 writes a turn; bench/results/
  2026-11-30-coalesce). Nothing is lost or changed but when: the sums are the same, a memory
  recalled once is written at the next flush, ``flush()`` and closing write everything.
- **Update** (Ebbinghaus): a fact stated again gains by the time since its last write: ≤ 1 day
  +1, ≤ 3 days +3, ≤ 1 week +7, ≤ 1 month +30, ≤ half a year +100, longer +100 (the spacing
  effect: what comes back after a long gap is worth remembering).
The same flusher records each user's last activity (for the clean-up of inactive users).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from kemem_es.errors import DeadlineExceeded, KememError
from kemem_es.runtime import LoopNotRunning
from kemem_es.store.reinforce import RecallKey, Reinforcements
from kemem_es.store.scope import Scope
from kemem_es.store.users import active_doc, parse_instant, state_id, utc_iso

__all__ = ["Reinforcer", "ebbinghaus_gain", "parse_instant", "utc_iso"]

log = logging.getLogger(__name__)

EBBINGHAUS_STEPS: tuple[tuple[timedelta, float], ...] = (
    (timedelta(days=1), 1.0),
    (timedelta(days=3), 3.0),
    (timedelta(days=7), 7.0),
    (timedelta(days=30), 30.0),
    (timedelta(days=182), 100.0),
)
# What a flush survives (the queue waits for the next one): engine errors, and an AsyncKemem's
# loop between its runs.
_FLUSH_WAITS: tuple[type[Exception], ...] = (KememError, LoopNotRunning)
# At shutdown the last flush gets this long in all (waiting for a flush under way included): a
# hung engine must not hold a stopping process for its write timeout, twice. Orchestrators kill
# after some 30 s; what is not written by then is reported (counts) and lost.
SHUTDOWN_FLUSH_S = 5.0
MAX_PENDING = 100_000  # distinct memories waiting; beyond this, new recalls are dropped (logged)


def ebbinghaus_gain(since: timedelta) -> float:
    """Strength gained by an update ``since`` after the previous write."""
    for bound, gain in EBBINGHAUS_STEPS:
        if since <= bound:
            return gain
    return EBBINGHAUS_STEPS[-1][1]


class Reinforcer:
    """Collects recalls and activity; flushes them in the background (or on ``flush()``)."""

    def __init__(
        self, writes: Reinforcements, amount: float, flush_s: float, coalesce_s: float = 0.0
    ) -> None:
        self.writes = writes
        self.amount = amount
        self.flush_s = flush_s
        self.coalesce_s = coalesce_s
        # memory (or user's activity) → monotonic time of its last write, oldest first (_held)
        self._written: dict[RecallKey | str, float] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._recalls: dict[RecallKey, list[Any]] = {}  # → [n, now]
        self._active: dict[str, dict[str, Any]] = {}  # state id → state doc
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.failed_flushes = 0
        self._writing = (0, 0)  # (memories, users) of the flush under way
        self._timed_out_at = float("-inf")  # monotonic time of the last flush that timed out

    # -- enqueue (the query path) ---------------------------------------------------------
    def recalled(self, hits: Iterable[RecallKey], now: datetime) -> None:
        stamp = utc_iso(now if now.tzinfo else now.astimezone())
        with self._lock:
            for key in hits:
                slot = self._recalls.get(key)
                if slot is None:
                    if len(self._recalls) >= MAX_PENDING:
                        self.dropped += 1
                        continue
                    self._recalls[key] = [1, stamp]
                else:
                    slot[0] += 1
                    slot[1] = max(slot[1], stamp)
        self._ensure_thread()

    def active(self, scope: Scope, now: datetime | None = None) -> None:
        """A user's query or add: the clean-up treats them as active."""
        if scope.user_id is None:
            return
        doc = active_doc(scope, now or datetime.now(timezone.utc))
        with self._lock:
            self._active[state_id(scope)] = doc
        self._ensure_thread()

    # -- flush ----------------------------------------------------------------------------
    def flush(self, final: bool = False) -> int:
        """Write everything queued so far; returns how many memories were updated. A failed
        flush is queued again (``final``: at shutdown, it is reported as lost instead)."""
        with self._flush_lock:
            return self._flush(final)

    def flush_due(self) -> int:
        """The background flush: what is queued, but a memory written less than
        ``coalesce_s`` ago stays queued (its recalls summed) until that has passed."""
        with self._flush_lock:
            return self._flush(False, hold=True)

    def _flush(self, final: bool, timeout_s: float | None = None, hold: bool = False) -> int:
        """``flush`` with the flush lock held; ``timeout_s`` bounds the engine call."""
        now = time.monotonic()
        with self._lock:
            recalls, self._recalls = self._recalls, {}
            active, self._active = self._active, {}
            if hold and self.coalesce_s > 0:
                recalls, active = self._held(recalls, active, now)
        if not recalls and not active:
            return 0
        self._writing = (len(recalls), len(active))
        try:
            done = self.writes.write(recalls, active, self.amount, timeout_s)
        except _FLUSH_WAITS as exc:
            # LoopNotRunning: an AsyncKemem between its loop's runs (or after it) cannot
            # write now; the queue waits for the next flush instead of being lost
            self.failed_flushes += 1
            if isinstance(exc, DeadlineExceeded):
                self._timed_out_at = time.monotonic()
            if final:
                _report_lost(len(recalls), len(active), type(exc).__name__)
                return 0
            self._requeue(recalls, active)
            # a loop between runs is the expected wait, not a fault worth a warning
            level = logging.DEBUG if isinstance(exc, LoopNotRunning) else logging.WARNING
            log.log(
                level, "reinforcement flush failed (%s); kept for the next one", type(exc).__name__
            )
            return 0
        finally:
            self._writing = (0, 0)
        if self.coalesce_s > 0:
            with self._lock:
                keys: list[RecallKey | str] = [*recalls, *active]
                for key in keys:  # most recent last: _held drops from the front
                    self._written.pop(key, None)
                    self._written[key] = now
        return done - len(active)

    def _held(
        self, recalls: dict[RecallKey, list[Any]], active: dict[str, dict[str, Any]], now: float
    ) -> tuple[dict[RecallKey, list[Any]], dict[str, dict[str, Any]]]:
        """(lock held) The recalls and activity due now; those of memories (users) written less
        than ``coalesce_s`` ago go back into the queue — a user's newest activity wins, and
        the clean-up counts inactivity in days. Forgets writes older than that."""
        cut = now - self.coalesce_s
        written = self._written
        while written:
            oldest = next(iter(written))
            if written[oldest] > cut:
                break
            del written[oldest]
        due: dict[RecallKey, list[Any]] = {}
        for key, slot in recalls.items():
            if key in written:
                self._recalls[key] = slot
            else:
                due[key] = slot
        due_active: dict[str, dict[str, Any]] = {}
        for sid, doc in active.items():
            if sid in written:
                self._active.setdefault(sid, doc)  # a newer one queued meanwhile stays
            else:
                due_active[sid] = doc
        return due, due_active

    def _requeue(self, recalls: dict, active: dict) -> None:
        with self._lock:
            for key, (n, now) in recalls.items():
                slot = self._recalls.setdefault(key, [0, now])
                slot[0] += n
                slot[1] = max(slot[1], now)
            for sid, doc in active.items():
                self._active.setdefault(sid, doc)

    # -- background thread ----------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is not None:
                return
            ref = weakref.ref(self)
            self._thread = threading.Thread(
                target=_run, args=(ref, self._stop, self.flush_s), daemon=True,
                name="kemem-reinforce",
            )  # fmt: skip
            self._thread.start()
            atexit.register(self.close)

    def close(self, deadline_s: float = SHUTDOWN_FLUSH_S) -> None:
        """Stop the background thread and flush what is queued, all within ``deadline_s``: a
        flush under way is waited for only that long, and after an engine timeout at shutdown
        there is no second try. What is left is reported as not written (counts only)."""
        atexit.unregister(self.close)
        started = time.monotonic()
        end = started + deadline_s
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_left(end))
        if not self._flush_lock.acquire(timeout=_left(end)):
            memories, users = self._queued()
            _report_lost(memories, users, f"a flush under way did not end within {deadline_s:g} s")
            return
        try:
            self._final_flush(started, end)
        except Exception as exc:  # pragma: no cover - shutdown: never raise from atexit
            log.warning("final reinforcement flush failed (%s)", type(exc).__name__)
        finally:
            self._flush_lock.release()

    def _final_flush(self, started: float, end: float) -> None:
        """The last flush (lock held), unless the engine already timed out since ``started``
        or no time is left: one hung request at shutdown is enough to know."""
        if self._timed_out_at >= started:
            why = "the engine timed out at shutdown"
        elif _left(end) == 0:
            why = "no time left before the shutdown deadline"
        else:
            self._flush(final=True, timeout_s=_left(end))
            return
        memories, users = self._queued()
        _report_lost(memories, users, why)

    def _queued(self) -> tuple[int, int]:
        """(memories, users) waiting, with those of a flush under way."""
        with self._lock:
            return (
                len(self._recalls) + self._writing[0],
                len(self._active) + self._writing[1],
            )


def _left(end: float) -> float:
    return max(end - time.monotonic(), 0.0)


def _report_lost(memories: int, users: int, why: str) -> None:
    if memories or users:
        log.warning(
            "reinforcement of %d memories and the activity of %d users not written at shutdown "
            "(%s)",
            memories,
            users,
            why,
        )


def _run(ref: weakref.ref[Reinforcer], stop: threading.Event, period: float) -> None:
    while not stop.wait(period):
        me = ref()
        if me is None:
            return
        try:
            me.flush_due()
        except Exception:  # keep the thread alive whatever one flush does
            log.exception("reinforcement flush crashed")
        del me
