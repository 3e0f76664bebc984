"""Batched tokenise + embed + bulk write of validated records, with skip-if-unchanged and history.

Batches are bounded by count and by bytes (the engine refuses an over-large request). A memory
that is rewritten keeps what its life has earned (recall count, last recall; its strength too
unless the record sets one). A failure part-way raises :class:`WriteInterrupted` saying how many
memories were written (and of how many the outcome is unknown: a request the engine did not answer
may still be applied); re-running the same input resumes, since those are now unchanged, and
records the history of any unchanged memory whose write was never recorded.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from kemem_es.errors import KememError, WriteInterrupted
from kemem_es.models import MemoryKind
from kemem_es.store.bulk.base import EXISTING_FIELDS, MAX_BULK_BYTES, TextEmbedder
from kemem_es.store.bulk.pause import _paused, refresh_paused
from kemem_es.store.bulk.prepare import BulkPrepare, approx_bytes
from kemem_es.store.bulk.report import IndexReport
from kemem_es.store.bulk.send import RETRY_STATUSES, BulkSend, merged
from kemem_es.store.layout import index_alias
from kemem_es.store.validation import Checked

__all__ = [
    "EXISTING_FIELDS",
    "LARGE_LOAD_DOCS",
    "MAX_BULK_BYTES",
    "RETRY_STATUSES",
    "SENDERS",
    "BulkWriter",
    "IndexReport",
    "TextEmbedder",
    "_paused",
    "approx_bytes",
    "refresh_paused",
]

SENDERS = 2
# A write of at least this many records pauses the index's periodic refresh until it is done
# (one refresh at the end instead of one a second: fewer tiny segments to merge meanwhile).
LARGE_LOAD_DOCS = 5_000


class BulkWriter(BulkPrepare, BulkSend):
    """Writes validated records into the alias of their (database, kind)."""

    def write(
        self,
        items: Sequence[Checked],
        kind: MemoryKind,
        on_progress: Callable[[int, int], None] | None = None,
        actor: str = "import",
        refresh: bool = True,
    ) -> IndexReport:
        report = IndexReport()
        start = time.perf_counter()
        dbs = {c.scope.db for c in items}
        aliases = sorted(index_alias(self.engine.settings.index_prefix, db, kind) for db in dbs)
        try:
            with refresh_paused(self.engine, aliases, len(items) >= LARGE_LOAD_DOCS):
                self._write(items, kind, report, on_progress, actor)
        except KememError as exc:
            why = exc.reason or str(exc)
            unknown = (
                f", the outcome of {report.unknown} is unknown (the engine did not answer; it "
                "may still apply them)"
                if report.unknown
                else ""
            )
            raise WriteInterrupted(
                f"writing stopped after {report.written} of {len(items)} memories were written"
                f"{unknown} ({why}); re-run the same import to resume: what was written is "
                "recognised as unchanged (its history is recorded then if it is missing)",
                report.written,
                report.unknown,
            ) from exc
        self._refresh(aliases, report, len(items))
        report.seconds = time.perf_counter() - start
        return report

    def _refresh(self, aliases: Sequence[str], report: IndexReport, total: int) -> None:
        """Makes the written memories searchable before the write returns. Every memory is
        written by now: a refresh that fails (a busy engine flushing a large load can take
        longer than the write timeout) says so, rather than that writing stopped."""
        try:
            for alias in aliases:
                self.engine.refresh(alias)
        except KememError as exc:
            why = exc.reason or str(exc)
            raise WriteInterrupted(
                f"the write of {total} memories finished ({report.written} written, "
                f"{report.unchanged} unchanged), but the refresh that makes them searchable did "
                f"not ({why}); they become searchable at the index's next refresh, and re-running "
                "the same import is safe (nothing is written twice)",
                report.written,
                report.unknown,
            ) from exc

    def _write(
        self,
        items: Sequence[Checked],
        kind: MemoryKind,
        report: IndexReport,
        on_progress: Callable[[int, int], None] | None,
        actor: str,
    ) -> None:
        # Up to SENDERS bulk requests in flight while the next batch is tokenised and embedded:
        # the engine indexes each bulk on one thread, so two keep both of its cores busy.
        with ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="kemem-bulk") as pool:
            pending: deque[Future[IndexReport]] = deque()
            failure: BaseException | None = None
            try:
                for lo in range(0, len(items), self.batch_size):
                    chunk = items[lo : lo + self.batch_size]
                    for batch in self._prepare(chunk, kind, report, actor):
                        while len(pending) >= SENDERS:
                            merged(report, pending.popleft())
                        pending.append(pool.submit(self._send, batch))
                    if on_progress:
                        on_progress(min(lo + self.batch_size, len(items)), len(items))
            except BaseException as exc:
                failure = exc
            # Count what the batches in flight did write, and keep the first failure: a batch
            # that failed while another one succeeded must still stop the write (an import
            # that returns normally has written everything).
            while pending:
                try:
                    merged(report, pending.popleft())
                except BaseException as exc:
                    failure = failure or exc
            if failure is not None:
                raise failure
