"""Batched tokenise + embed + bulk index, with deterministic ids and skip-if-unchanged."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from kemem_es.engine.client import Engine
from kemem_es.engine.templates import index_alias
from kemem_es.errors import InvalidInput, KememError
from kemem_es.ingest.documents import (
    TextTokenizer,
    content_hash,
    embed_text,
    record_names,
    to_document,
)
from kemem_es.ingest.reader import read_jsonl
from kemem_es.models import Database, MemoryKind, MemoryRecord

RETRY_STATUSES = {429, 502, 503, 504}
SENDERS = 2


class TextEmbedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class IndexReport:
    """What one import did. ``rejected`` names each problem (line + field, or id + reason)."""

    indexed: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def written(self) -> int:
        return self.indexed + self.updated

    @property
    def docs_per_s(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def merge(self, other: IndexReport) -> None:
        self.indexed += other.indexed
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.rejected += other.rejected

    def summary(self) -> str:
        return (
            f"indexed {self.indexed}, updated {self.updated}, unchanged {self.unchanged}, "
            f"rejected {len(self.rejected)} in {self.seconds:.2f} s ({self.docs_per_s:.0f} docs/s)"
        )


class Indexer:
    """Writes validated records into the alias of their (database, kind)."""

    def __init__(
        self,
        engine: Engine,
        embedder: TextEmbedder,
        tokenizer: TextTokenizer,
        batch_size: int = 256,
        max_retries: int = 3,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_retries = max_retries
        self._known_names: set[str] = set()

    def index_file(
        self,
        path: Path,
        kind: MemoryKind,
        db: Database,
        skip_invalid: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Validate the whole file first: by default one bad record means nothing is written."""
        records, problems = read_jsonl(path, kind, db)
        if problems and not skip_invalid:
            raise InvalidInput(
                f"{path}: {len(problems)} invalid record(s); nothing was written "
                "(fix them, or pass --skip-invalid to index the valid ones)",
                problems,
            )
        report = self.index_records([r for _, r in records], kind, db, on_progress)
        report.rejected = problems + report.rejected
        return report

    def index_records(
        self,
        records: Sequence[MemoryRecord],
        kind: MemoryKind,
        db: Database,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        alias = index_alias(self.engine.settings.index_prefix, db, kind)
        report = IndexReport()
        start = time.perf_counter()
        # Up to SENDERS bulk requests in flight while the next batch is tokenised and embedded:
        # the engine indexes each bulk on one thread, so two keep both of its cores busy.
        with ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="kemem-bulk") as pool:
            pending: deque[Future] = deque()
            for lo in range(0, len(records), self.batch_size):
                lines = self._prepare_batch(alias, records[lo : lo + self.batch_size], db, report)
                while len(pending) >= SENDERS:
                    report.merge(pending.popleft().result())
                if lines:
                    pending.append(pool.submit(self._bulk, lines))
                if on_progress:
                    on_progress(min(lo + self.batch_size, len(records)), len(records))
            for job in pending:
                report.merge(job.result())
        self.engine.refresh(alias)
        report.seconds = time.perf_counter() - start
        return report

    def _prepare_batch(
        self, alias: str, batch: Sequence[MemoryRecord], db: Database, report: IndexReport
    ) -> list[dict]:
        """Bulk lines for the records of a batch that are new or changed."""
        self._learn_names(batch)
        ids = [r.doc_id(db) for r in batch]
        hashes = [content_hash(r, self.embedder.name) for r in batch]
        existing = self.engine.mget(alias, ids, ["content_hash"])
        todo = [
            i
            for i, (doc_id, h) in enumerate(zip(ids, hashes, strict=True))
            if existing.get(doc_id, {}).get("content_hash") != h
        ]
        report.unchanged += len(batch) - len(todo)
        if not todo:
            return []
        vectors = self._vectors([batch[i] for i in todo], report)
        lines: list[dict] = []
        for i, vec in zip(todo, vectors, strict=True):
            if vec is None:
                continue
            doc = to_document(batch[i], db, self.tokenizer)
            doc["content_hash"] = hashes[i]
            doc["vector"] = vec
            lines += [{"index": {"_index": alias, "_id": ids[i]}}, doc]
        return lines

    def _learn_names(self, batch: Sequence[MemoryRecord]) -> None:
        """Names become dictionary words so jieba keeps them whole (木木, not 木 木)."""
        names = {n for r in batch for n in record_names(r)} - self._known_names
        if names and hasattr(self.tokenizer, "add_words"):
            self.tokenizer.add_words(sorted(names))
            self._known_names |= names

    def _vectors(self, records: Sequence[MemoryRecord], report: IndexReport) -> list[list | None]:
        """Supplied vectors are checked against the model's dimension; the rest are embedded."""
        dim = self.embedder.dim
        out: list[list | None] = [None] * len(records)
        need = [i for i, r in enumerate(records) if r.vector is None]
        for i, r in enumerate(records):
            if r.vector is not None:
                if len(r.vector) != dim:
                    report.rejected.append(
                        f"id {r.id or i}: vector: has {len(r.vector)} dims, the index needs {dim}"
                    )
                else:
                    out[i] = r.vector
        if need:
            embedded = self.embedder.embed([embed_text(records[i]) for i in need])
            for i, vec in zip(need, embedded, strict=True):
                out[i] = vec.astype(float).round(6).tolist()
        return out

    def _bulk(self, lines: list[dict]) -> IndexReport:
        """Bulk with retries for back-pressure; per-item failures are reported, never dropped.
        Runs on a sender thread, so it fills a report of its own for the caller to merge."""
        out = IndexReport()
        for attempt in range(self.max_retries + 1):
            resp = self.engine.bulk(lines)
            retry: list[dict] = []
            for n, item in enumerate(resp["items"]):
                res = item.get("index", {})
                status = res.get("status", 0)
                if res.get("result") == "created":
                    out.indexed += 1
                elif res.get("result") == "updated":
                    out.updated += 1
                elif status in RETRY_STATUSES and attempt < self.max_retries:
                    retry += lines[2 * n : 2 * n + 2]
                else:
                    reason = res.get("error", {}).get("reason", f"status {status}")
                    out.rejected.append(f"id {res.get('_id')}: {reason}")
            if not retry:
                return out
            lines = retry
            time.sleep(0.5 * 2**attempt)
        raise KememError("bulk indexing kept failing after retries")  # pragma: no cover
