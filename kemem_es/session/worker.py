"""One background thread per Kemem that runs session jobs (batch extraction, summaries) in
order; ``drain`` waits for them, failures are kept (the latest ``KEPT_ERRORS``) and logged
without user text."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from kemem_es.errors import ExtractionPending, KememError

log = logging.getLogger("kemem_es.session")

KEPT_ERRORS = 100


class Worker:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self.errors: list[Exception] = []
        self.failures = 0
        self.done = 0

    def submit(self, label: str, job: Callable[[], None]) -> None:
        def run() -> None:
            try:
                job()
                with self._lock:
                    self.done += 1
            except Exception as exc:
                why = str(exc) if isinstance(exc, KememError) else type(exc).__name__
                log.warning("session job %s failed: %s: %s", label, type(exc).__name__, why)
                log.debug("session job failure", exc_info=exc)
                with self._lock:
                    self.failures += 1
                    self.errors.append(exc)
                    del self.errors[:-KEPT_ERRORS]

        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kemem-session")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._pool.submit(run))

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(not f.done() for f in self._pending)

    def drain(self, timeout_s: float | None = None) -> None:
        with self._lock:
            pending = list(self._pending)
        _, running = wait(pending, timeout=timeout_s)
        if running:
            raise ExtractionPending(
                f"{len(running)} session job(s) still running after {timeout_s} s", len(running)
            )

    def close(self, timeout_s: float | None = None) -> None:
        try:
            self.drain(timeout_s)
        except ExtractionPending as exc:
            log.warning(
                "%d session job(s) not finished at close; their batches stay pending "
                "(resumed by the next process)",
                exc.pending,
            )
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=timeout_s is None, cancel_futures=timeout_s is not None)
