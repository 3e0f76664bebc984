"""Sending a batch: retries for back-pressure, a write that changed meanwhile read again,
per-item failures reported, then the history of what was written."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.engine.errors import check_bulk, is_refusal, type_and_reason, with_remedy
from kemem_es.errors import EngineUnavailable, KememError
from kemem_es.runtime import result_of
from kemem_es.store import consistency, fresh, history
from kemem_es.store.bulk.base import EXISTING_FIELDS, Batch, BulkBase, carry_over
from kemem_es.store.bulk.report import IndexReport
from kemem_es.store.documents import LIFECYCLE_FIELDS

RETRY_STATUSES = {429, 502, 503, 504}


class BulkSend(BulkBase):
    def _reread(self, batch: Batch, pair: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A write the engine refused (409) because the memory changed after ``_prepare`` read
        it (a recall's reinforcement, an update, another writer's create of the same id): the
        same write over the current version, with what that version has earned (recall count,
        strength), so no increment is lost. Nothing is sent (``[]``) when the current version
        already holds this record (a concurrent import of the same input wrote it). A memory
        deleted meanwhile is created anew, as an ADD."""
        meta, doc = dict(next(iter(pair[0].values()))), dict(pair[1])  # "index" or "create"
        doc_id = meta["_id"]
        ref = [(doc_id, meta.get("routing"))]
        now = self.engine.mget_versions(meta["_index"], ref, EXISTING_FIELDS).get(doc_id)
        meta.pop("if_seq_no", None)
        meta.pop("if_primary_term", None)
        entry = batch.history[doc_id]
        if now is None:
            entry.update(event="ADD")
            for key in ("old", "old_text"):
                entry.pop(key, None)
            return [{"create": meta}, doc]
        src, seq, term = now
        if src.get("content_hash") == doc["content_hash"]:
            return []
        carry_over(doc, src, doc_id in batch.keep_strength)
        meta |= {"if_seq_no": seq, "if_primary_term": term}
        kept = {f: doc[f] for f in (*LIFECYCLE_FIELDS, "strength") if f in doc}
        entry.update(
            event="UPDATE",
            old_text=src.get("description"),
            old=history.slim(src),
            new={**entry["new"], **kept},
        )
        return [{"index": meta}, doc]

    def _send(self, batch: Batch) -> IndexReport:
        """Bulk with retries for back-pressure; per-item failures are reported, never dropped;
        the history of what was written follows in one more bulk. Runs on a sender thread, so
        it fills a report of its own for the caller to merge."""
        out = IndexReport()
        lines = batch.lines
        done: list[dict[str, Any]] = []
        stopped: list[str] = []
        for attempt in range(self.max_retries + 1):
            try:
                resp = self.engine.bulk(lines)
            except KememError as exc:
                note_written(self.engine, lines)  # the engine may still apply them
                # No answer (a timeout, a dropped connection): the engine may apply the
                # request later, so these records are neither written nor not written.
                out.unknown = 0 if exc.answered else len(lines) // 2
                raise BatchStopped(exc.reason or str(exc), out) from exc
            note_written(self.engine, lines)
            retry: list[dict] = []
            for n, item in enumerate(resp["items"]):
                res: dict[str, Any] = next(iter(item.values()), {})  # "index" or "create"
                status = res.get("status", 0)
                doc_id = res.get("_id", "")
                if res.get("result") in ("created", "updated"):
                    if res["result"] == "created":
                        out.indexed += 1
                    else:
                        out.updated += 1
                    done.append(batch.history[doc_id])
                elif status in RETRY_STATUSES and attempt < self.max_retries:
                    retry += lines[2 * n : 2 * n + 2]
                elif status == 409 and attempt < self.max_retries:  # changed since read
                    again = self._reread(batch, lines[2 * n : 2 * n + 2])
                    retry += again
                    out.unchanged += not again
                elif is_refusal(status):  # the record itself (a value the engine refused)
                    reason = res.get("error", {}).get("reason", f"status {status}")
                    out.rejected.append(f"{batch.labels.get(doc_id, doc_id)}: {reason}")
                else:  # the engine's state (a blocked index, a failing node): not the record's
                    stopped.append(type_and_reason(res.get("error") or f"status {status}"))
            if not retry:
                break
            lines = retry
            time.sleep(0.5 * 2**attempt)
        else:  # pragma: no cover
            raise EngineUnavailable("bulk indexing kept failing after retries")
        try:
            if done:
                doing = f"recording history ({len(done)} memories were written)"
                resp = history.write(self.engine, done)
                check_bulk(resp, doing)
                consistency.note_recorded(self.engine, done)
            if stopped:
                raise EngineUnavailable(
                    with_remedy(f"the engine did not take {len(stopped)} records ({stopped[0]})")
                )
        except KememError as exc:  # what this batch wrote still counts
            why = exc.reason or str(exc)
            raise BatchStopped(why, out) from exc
        return out


class BatchStopped(EngineUnavailable):
    """A batch that stopped part-way, with what it did write (so the import's count is true)."""

    def __init__(self, message: str, report: IndexReport) -> None:
        super().__init__(message)
        self.report = report


def merged(report: IndexReport, job: Future[IndexReport]) -> None:
    """Add a batch's counts to the import's, a stopped batch's too, before its error goes on."""
    try:
        report.merge(result_of(job))
    except BatchStopped as exc:
        report.merge(exc.report)
        raise


def note_written(engine: Engine, lines: list[dict[str, Any]]) -> None:
    """Each (index, scope) of a bulk's actions, for read-your-own-writes (``store.fresh``)."""
    seen = set()
    for line in lines[::2]:
        meta = next(iter(line.values()))
        seen.add((meta.get("_index"), meta.get("routing")))
    for alias, routing in seen:
        fresh.written(engine, alias, routing)
