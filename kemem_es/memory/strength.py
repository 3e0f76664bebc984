"""Memory strength: recall reinforces, spaced repetition reinforces more.

- **Recall**: every memory a query returns gains ``reinforce_amount`` (15, up to ``MAX_STRENGTH``),
  its recall count +1
  and ``last_recalled_at`` = now. The query only enqueues (microseconds); a background thread
  flushes the queue every ``reinforce_flush_s`` as one bulk of scripted partial updates (params
  only, ``retry_on_conflict``), so the query path does not wait and no increment is lost when
  queries run concurrently (increments of one flush are summed per memory first).
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

from kemem_es.contract.response import QueryResponse
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import with_remedy
from kemem_es.errors import DeadlineExceeded, KememError
from kemem_es.models import MAX_STRENGTH
from kemem_es.runtime import LoopNotRunning
from kemem_es.store.layout import index_alias, users_alias
from kemem_es.store.scope import Scope

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
RecallKey = tuple[str, str, str]  # (index alias, engine _id, routing) of a recalled memory

# Constant script source: the amounts and time travel as params, never as source text.
# The strength stops at params.max (MAX_STRENGTH, the bound every write validates): above it a
# memory could no longer be updated, merged into or re-imported.
RECALL_SCRIPT = (
    "def s = ctx._source.strength; "
    "ctx._source.strength = Math.min(params.max, (s == null ? 0.0 : s) + params.gain); "
    "def n = ctx._source.recall_count; "
    "ctx._source.recall_count = (n == null ? 0 : n) + params.n; "
    "ctx._source.last_recalled_at = params.now;"
)


def ebbinghaus_gain(since: timedelta) -> float:
    """Strength gained by an update ``since`` after the previous write."""
    for bound, gain in EBBINGHAUS_STEPS:
        if since <= bound:
            return gain
    return EBBINGHAUS_STEPS[-1][1]


def parse_instant(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def utc_iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Reinforcer:
    """Collects recalls and activity; flushes them in the background (or on ``flush()``)."""

    def __init__(self, engine: Engine, amount: float, flush_s: float) -> None:
        self.engine = engine
        self.amount = amount
        self.flush_s = flush_s
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
        stamp = utc_iso(now or datetime.now(timezone.utc))
        doc = {"agent_id": scope.agent_id, "user_id": scope.user_id, "last_active_at": stamp}
        with self._lock:
            self._active[state_id(scope)] = doc
        self._ensure_thread()

    # -- flush ----------------------------------------------------------------------------
    def flush(self, final: bool = False) -> int:
        """Write everything queued so far; returns how many memories were updated. A failed
        flush is queued again (``final``: at shutdown, it is reported as lost instead)."""
        with self._flush_lock:
            return self._flush(final)

    def _flush(self, final: bool, timeout_s: float | None = None) -> int:
        """``flush`` with the flush lock held; ``timeout_s`` bounds the engine call."""
        with self._lock:
            recalls, self._recalls = self._recalls, {}
            active, self._active = self._active, {}
        if not recalls and not active:
            return 0
        self._writing = (len(recalls), len(active))
        try:
            resp = self.engine.bulk(self._lines(recalls, active), timeout_s=timeout_s)
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
        return self._count_done(resp) - len(active)

    def _lines(self, recalls: dict[RecallKey, list[Any]], active: dict[str, dict]) -> list[dict]:
        """The bulk: a scripted strength update per recalled memory, an upsert per user."""
        lines: list[dict[str, Any]] = []
        for (index, doc_id, routing), (n, now) in recalls.items():
            params = {"gain": self.amount * n, "n": n, "now": now, "max": MAX_STRENGTH}
            meta = {"_index": index, "_id": doc_id, "routing": routing, "retry_on_conflict": 10}
            lines += [
                {"update": meta},
                {"script": {"source": RECALL_SCRIPT, "lang": "painless", "params": params}},
            ]
        users = users_alias(self.engine.settings.index_prefix)
        for sid, doc in active.items():
            lines += [
                {"update": {"_index": users, "_id": sid, "retry_on_conflict": 10}},
                {"doc": doc, "doc_as_upsert": True},
            ]
        return lines

    @staticmethod
    def _count_done(resp: dict[str, Any]) -> int:
        """Items written; a failed one is logged with the engine's words, never the memory's."""
        done = 0
        for item in resp.get("items", []):
            res = item.get("update", {})
            if res.get("status", 500) < 300:
                done += 1
            elif res.get("status") != 404:  # a memory deleted meanwhile needs nothing
                error = res.get("error", {})
                log.warning(
                    "reinforcement of one memory failed: status %s %s",
                    res.get("status"),
                    with_remedy(error.get("type", "") if isinstance(error, dict) else ""),
                )
        return done

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
            me.flush()
        except Exception:  # keep the thread alive whatever one flush does
            log.exception("reinforcement flush crashed")
        del me


def state_id(scope: Scope) -> str:
    """The id of a user's activity / clean-up state document."""
    return scope.doc_id("\x00state")


def recall_keys(prefix: str, user: Scope, official: Scope, resp: QueryResponse) -> list[RecallKey]:
    """(index, engine id, routing) of every memory a response returned, events and
    entities."""
    scopes = {"user": user, "official": official}
    keys = []
    for e in resp.memory_events:
        s = scopes[e.db]
        keys.append((index_alias(prefix, s.db, "events"), s.doc_id(e.index), s.routing))
    for n in resp.memory_entities:
        s, mid = scopes[n.db], str(n.index.get("index"))
        keys.append((index_alias(prefix, s.db, "entities"), s.doc_id(mid), s.routing))
    return keys
