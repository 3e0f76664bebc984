"""Batched tokenise + embed + bulk write of validated records, with skip-if-unchanged and history.

Batches are bounded by count and by bytes (the engine refuses an over-large request). A memory
that is rewritten keeps what its life has earned (recall count, last recall; its strength too
unless the record sets one). A failure part-way raises :class:`WriteInterrupted` saying how many
memories were written (and of how many the outcome is unknown: a request the engine did not answer
may still be applied); re-running the same input resumes, since those are now unchanged, and
records the history of any unchanged memory whose write was never recorded.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from kemem_es.contract.memory import Action
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import check_bulk, is_refusal, type_and_reason, with_remedy
from kemem_es.errors import EngineUnavailable, KememError, WriteInterrupted
from kemem_es.models import MemoryKind, MemoryRecord
from kemem_es.runtime import offload, result_of
from kemem_es.store import consistency, fresh, history
from kemem_es.store.documents import (
    LIFECYCLE_FIELDS,
    TextTokenizer,
    content_hash,
    embed_text,
    to_document,
    vector_fields,
    with_strength_key,
)
from kemem_es.store.layout import history_alias, index_alias
from kemem_es.store.names import ScopeNames, record_names
from kemem_es.store.scope import Scope
from kemem_es.store.validation import Checked, by_record

RETRY_STATUSES = {429, 502, 503, 504}
SENDERS = 2
# A write of at least this many records pauses the index's periodic refresh until it is done
# (one refresh at the end instead of one a second: fewer tiny segments to merge meanwhile).
LARGE_LOAD_DOCS = 5_000
MAX_BULK_BYTES = 8 * 1024 * 1024  # well under the engines' 100 MB default request limit
EXISTING_FIELDS = ["content_hash", "description", "strength", *LIFECYCLE_FIELDS]


# What ends a bulk write early: the package's own errors and the engine clients'.


class TextEmbedder(Protocol):
    """What the indexer and the query side need of an embedder (``embed.Embedder``, or a
    caller's own model)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_one(self, text: str) -> np.ndarray: ...


@dataclass
class IndexReport:
    """What one write did. ``rejected`` names each problem (line + field, or record + reason)."""

    indexed: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: list[str] = field(default_factory=list)
    seconds: float = 0.0
    merged: int = 0  # dedup: folded into a similar existing memory (UPDATE)
    duplicates: int = 0  # dedup: the same as an existing memory (NOOP)
    unknown: int = 0  # sent, but the engine did not answer: maybe written, maybe not
    superseded: int = 0  # facts that change: older memories of a slot marked superseded

    @property
    def written(self) -> int:
        return self.indexed + self.updated

    @property
    def rejected_records(self) -> int:
        """How many records were rejected (``rejected`` lists problems: a record can have
        several)."""
        return len(by_record(self.rejected))

    @property
    def docs_per_s(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def merge(self, other: IndexReport) -> None:
        self.indexed += other.indexed
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.rejected += other.rejected
        self.merged += other.merged
        self.duplicates += other.duplicates
        self.unknown += other.unknown

    def summary(self) -> str:
        dedup = (
            f", merged into similar {self.merged}, duplicates {self.duplicates}"
            if self.merged or self.duplicates
            else ""
        )
        return (
            f"indexed {self.indexed}, updated {self.updated}, unchanged {self.unchanged}"
            f"{dedup}, rejected {self.rejected_records} in {self.seconds:.2f} s "
            f"({self.docs_per_s:.0f} docs/s)"
        )


@dataclass
class _Batch:
    lines: list[dict[str, Any]]
    labels: dict[str, str]  # engine id → "line N" for error messages
    history: dict[str, dict[str, Any]]  # engine id → its history entry once written
    keep_strength: set[str] = field(default_factory=set)  # rewrites keeping stored strength


def _carry_over(doc: dict[str, Any], old: dict[str, Any], keep_strength: bool) -> None:
    """What a rewritten memory keeps of its stored version: recall count, last recall, and its
    strength unless the record sets one."""
    doc.update({f: old[f] for f in LIFECYCLE_FIELDS if f in old})
    if keep_strength and "strength" in old:
        doc["strength"] = old["strength"]
    with_strength_key(doc)


def approx_bytes(doc: dict[str, Any]) -> int:
    """Request bytes of one document: the vector by count (12 bytes a float), the rest as JSON."""
    vec = doc.get("vector") or []
    rest = {k: v for k, v in doc.items() if k != "vector"}
    return 12 * len(vec) + len(orjson.dumps(rest)) + 64


class BulkWriter:
    """Writes validated records into the alias of their (database, kind)."""

    def __init__(
        self,
        engine: Engine,
        embedder: TextEmbedder,
        tokenizer: TextTokenizer,
        batch_size: int = 512,
        max_bytes: int = MAX_BULK_BYTES,
        max_retries: int = 3,
        names: ScopeNames | None = None,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_bytes = max_bytes
        self.max_retries = max_retries
        self.names = names if names is not None else ScopeNames(engine)

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
            for alias in aliases:
                self.engine.refresh(alias)
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
        report.seconds = time.perf_counter() - start
        return report

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
                            _merged(report, pending.popleft())
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
                    _merged(report, pending.popleft())
                except BaseException as exc:
                    failure = failure or exc
            if failure is not None:
                raise failure

    def _prepare(
        self, chunk: Sequence[Checked], kind: MemoryKind, report: IndexReport, actor: str
    ) -> list[_Batch]:
        """Bulk batches (each under max_bytes) for the records of a chunk that are new or
        changed."""
        prefix = self.engine.settings.index_prefix
        hashes = [content_hash(c.record, self.embedder.name) for c in chunk]
        existing: dict[str, dict[str, Any]] = {}
        versions: dict[str, tuple[int, int]] = {}  # engine id → (seq_no, primary term) read
        for db in {c.scope.db for c in chunk}:
            refs = [c.ref for c in chunk if c.scope.db == db]
            alias = index_alias(prefix, db, kind)
            for doc_id, (src, seq, term) in self.engine.mget_versions(
                alias, refs, EXISTING_FIELDS
            ).items():
                existing[doc_id], versions[doc_id] = src, (seq, term)
        todo: list[tuple[Checked, str]] = []
        same: list[tuple[Checked, str]] = []
        for c, h in zip(chunk, hashes, strict=True):
            stored = existing.get(c.doc_id, {})
            if stored.get("content_hash") == h or self._strength_earned(c.record, stored):
                same.append((c, stored["content_hash"]))  # the version its history must hold
            else:
                todo.append((c, h))
        report.unchanged += len(same)
        if same:
            self._record_missing_history(same, kind, actor)
        if not todo:
            return []
        vectors = self.vectors([c.record for c, _ in todo], [c.embedded for c, _ in todo])
        toks = self.tokenizers([(c.scope, c.record) for c, _ in todo])
        batches: list[_Batch] = []
        cur = _Batch([], {}, {})
        size = 0
        for (c, h), vec in zip(todo, vectors, strict=True):
            old = existing.get(c.doc_id)
            doc = to_document(c.record, c.scope, toks[c.scope], c.memory_id)
            doc["content_hash"] = h
            doc.update(vector_fields(kind, vec))
            keep_strength = "strength" not in c.record.model_fields_set
            if old:
                _carry_over(doc, old, keep_strength)
            n = approx_bytes(doc)
            if cur.lines and (size + n > self.max_bytes):
                batches.append(cur)
                cur, size = _Batch([], {}, {}), 0
            alias = index_alias(prefix, c.scope.db, kind)
            meta: dict[str, Any] = {"_index": alias, "_id": c.doc_id, "routing": c.scope.routing}
            if keep_strength:
                cur.keep_strength.add(c.doc_id)
            if old:  # only over the version read: a recall flushed meanwhile is not overwritten
                seq, term = versions[c.doc_id]
                meta |= {"if_seq_no": seq, "if_primary_term": term}
            # Absent when read: created only if still absent (another writer's memory of the
            # same id, stored meanwhile, is a 409 and read again, never overwritten blind).
            cur.lines += [{"index" if old else "create": meta}, doc]
            cur.labels[c.doc_id] = c.label
            cur.history[c.doc_id] = history.entry(
                c.scope, c.memory_id, kind, "UPDATE" if old else "ADD", actor, old=old, new=doc
            )
            size += n
        if cur.lines:
            batches.append(cur)
        return batches

    def _strength_earned(self, record: MemoryRecord, old: dict[str, Any]) -> bool:
        """The record sets the strength its memory has earned since a write that set none
        (an export of the store read back in): unchanged, not a strength edit."""
        if "strength" not in record.model_fields_set or "content_hash" not in old:
            return False
        if not math.isclose(record.strength, float(old.get("strength", -1)), rel_tol=1e-9):
            return False
        unset = record.model_copy(
            update={"strength": type(record).model_fields["strength"].default}
        )
        return bool(content_hash(unset, self.embedder.name) == old["content_hash"])

    def _reread(self, batch: _Batch, pair: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
        _carry_over(doc, src, doc_id in batch.keep_strength)
        meta |= {"if_seq_no": seq, "if_primary_term": term}
        kept = {f: doc[f] for f in (*LIFECYCLE_FIELDS, "strength") if f in doc}
        entry.update(
            event="UPDATE",
            old_text=src.get("description"),
            old=history.slim(src),
            new={**entry["new"], **kept},
        )
        return [{"index": meta}, doc]

    def tokenizers(self, items: Sequence[tuple[Scope, MemoryRecord]]) -> dict[Scope, TextTokenizer]:
        """Each scope's tokenizer: its names (stored, and these records') kept whole in its
        texts only (``store.names``), so jieba keeps 木木 whole, not 木 木, for its user."""
        by_scope: dict[Scope, list[MemoryRecord]] = {}
        for scope, record in items:
            by_scope.setdefault(scope, []).append(record)
        out: dict[Scope, TextTokenizer] = {}
        for scope, records in by_scope.items():
            names = self.names.visible(scope) | record_names(records)
            self.names.note(scope, records)  # names already known change nothing (one object)
            out[scope] = self.tokenizer.scoped(names.words)
        return out

    def _record_missing_history(
        self, same: Sequence[tuple[Checked, str]], kind: MemoryKind, actor: str
    ) -> None:
        """History for unchanged memories whose last write was never recorded: a bulk that
        timed out on our side but that the engine applied later stored them without their
        entries (the history bulk follows the answer). Their newest entry other than a NOOP
        must be the stored version (its ``content_hash``); else it is recorded now, as an ADD
        (no entry, or the last one a deletion) or an UPDATE from the last recorded version,
        with reason ``recovered``. One search per chunk of unchanged records."""
        prefix = self.engine.settings.index_prefix
        history.refresh(self.engine)  # entries written a moment ago count
        body = {
            "size": len(same),
            "query": {
                "bool": {
                    "filter": [{"terms": {"uid": [c.doc_id for c, _ in same]}}],
                    "must_not": [{"term": {"event": "NOOP"}}],
                }
            },
            "collapse": {"field": "uid"},  # the newest entry of each memory
            "sort": [{"seq": "desc"}],
            "_source": ["uid", "new"],
        }
        hits = self.engine.search(history_alias(prefix), body)["hits"]["hits"]
        last = {h["_source"]["uid"]: h["_source"].get("new") for h in hits}
        entries = []
        for c, h in same:
            old = last.get(c.doc_id)
            if old is not None and old.get("content_hash") == h:
                continue
            doc = to_document(c.record, c.scope, self.tokenizer, c.memory_id)
            doc["content_hash"] = h
            event: Action = "UPDATE" if old else "ADD"
            entries.append(
                history.entry(
                    c.scope, c.memory_id, kind, event, actor, old=old, new=doc, reason="recovered"
                )
            )
        if entries:
            doing = f"recording the missing history of {len(entries)} unchanged memories"
            check_bulk(history.write(self.engine, entries), doing)
            consistency.note_recorded(self.engine, entries)

    def vectors(
        self,
        records: Sequence[MemoryRecord],
        known: Sequence[list[float] | None] | None = None,
    ) -> list[list[float]]:
        """Supplied vectors (checked during validation) and ones already computed (``known``)
        as given; the rest embedded in one go."""
        known = known or [None] * len(records)
        out: list[list[float]] = [r.vector or k or [] for r, k in zip(records, known, strict=True)]
        need = [i for i, v in enumerate(out) if not v]
        if need:
            embedded = offload(self.embedder.embed, [embed_text(records[i]) for i in need])
            for i, vec in zip(need, embedded, strict=True):
                out[i] = vec.astype(float).round(6).tolist()
        return out

    def _send(self, batch: _Batch) -> IndexReport:
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
                _note_written(self.engine, lines)  # the engine may still apply them
                # No answer (a timeout, a dropped connection): the engine may apply the
                # request later, so these records are neither written nor not written.
                out.unknown = 0 if exc.answered else len(lines) // 2
                raise _BatchStopped(exc.reason or str(exc), out) from exc
            _note_written(self.engine, lines)
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
            raise _BatchStopped(why, out) from exc
        return out


class _BatchStopped(EngineUnavailable):
    """A batch that stopped part-way, with what it did write (so the import's count is true)."""

    def __init__(self, message: str, report: IndexReport) -> None:
        super().__init__(message)
        self.report = report


def _merged(report: IndexReport, job: Future[IndexReport]) -> None:
    """Add a batch's counts to the import's, a stopped batch's too, before its error goes on."""
    try:
        report.merge(result_of(job))
    except _BatchStopped as exc:
        report.merge(exc.report)
        raise


_paused: Counter[str] = Counter()  # index → large loads of this process in progress on it
_saved: dict[str, Any] = {}  # index → its refresh_interval before the first of them
_pause_lock = threading.Lock()


def _put_refresh_interval(engine: Engine, index: str, value: str | None) -> None:
    engine.put_settings(index, {"index": {"refresh_interval": value}})


def _refresh_interval(engine: Engine, index: str) -> str | None:
    """The index's own refresh_interval, or None where it keeps the default."""
    resp = engine.get_settings(index, "index.refresh_interval")
    found: dict[str, Any] = next(iter(resp.values()), {})
    return found.get("settings", {}).get("index", {}).get("refresh_interval")


@contextlib.contextmanager
def refresh_paused(engine: Engine, aliases: Sequence[str], pause: bool = True) -> Iterator[None]:
    """Periodic refresh off (``refresh_interval: -1``) for the duration of a large load, then the
    index's own setting back (``None``: the default), even when the load fails. Nested and
    concurrent loads in this process share one pause: the last to finish restores."""
    if not pause:
        yield
        return
    names: list[str] = []
    for alias in aliases:
        names += sorted(engine.get_index(alias))  # the concrete index (settings live there)
    with _pause_lock:
        for name in names:
            if _paused[name] == 0:
                _saved[name] = _refresh_interval(engine, name)
                _put_refresh_interval(engine, name, "-1")
            _paused[name] += 1
    try:
        yield
    finally:
        with _pause_lock:
            for name in names:
                _paused[name] -= 1
                if _paused[name] == 0:
                    del _paused[name]
                    _put_refresh_interval(engine, name, _saved.pop(name, None))


def _note_written(engine: Engine, lines: list[dict[str, Any]]) -> None:
    """Each (index, scope) of a bulk's actions, for read-your-own-writes (``store.fresh``)."""
    seen = set()
    for line in lines[::2]:
        meta = next(iter(line.values()))
        seen.add((meta.get("_index"), meta.get("routing")))
    for alias, routing in seen:
        fresh.written(engine, alias, routing)
