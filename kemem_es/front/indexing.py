"""Installing indices and bulk indexing: init, calibrate, index_file, index_records and the
bundled demo corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from kemem_es.errors import activity
from kemem_es.front.parts import Parts
from kemem_es.ingest.reader import read_jsonl
from kemem_es.models import Database, MemoryKind, MemoryRecord
from kemem_es.store import IndexReport, InitResult, install
from kemem_es.store.embedding import record as record_calibration

DEMO_FILES: tuple[tuple[str, MemoryKind, Database], ...] = (
    ("official_entities.jsonl", "entities", "official"),
    ("official_events.jsonl", "events", "official"),
    ("user_entities.jsonl", "entities", "user"),
    ("user_events.jsonl", "events", "user"),
)


def demo_path(name: str) -> Path:
    """A bundled demo corpus file (shipped inside the package)."""
    return Path(str(resources.files("kemem_es") / "demo" / name))


class Indexing(Parts):
    def init(self, recreate: bool = False) -> list[InitResult]:
        """Install index templates and indices (idempotent; safe to run concurrently)."""
        self._open()
        cal = self.calibration
        results = install(self.engine, self.embedder.dim, recreate=recreate, embedding=cal)
        if cal is not None:
            record_calibration(self.engine, cal)  # indices made before calibration existed
        self._checked.clear()
        return results

    def calibrate(self) -> dict[str, Any] | None:
        """Measure the model's calibration and store it with the prefix's indices (those that
        have none); refused when they hold another model's vectors."""
        self._open()
        cal = self.calibration
        if cal is not None:
            with activity("storing the calibration"):
                record_calibration(self.engine, cal)
        return cal

    def index_file(
        self,
        path: Path,
        kind: MemoryKind,
        db: Database = "user",
        skip_invalid: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
        dedup: bool = False,
    ) -> IndexReport:
        """Validate a whole JSONL file, then index it. Invalid records raise InvalidInput and
        nothing is written, unless ``skip_invalid`` (then they are listed in the report).
        ``dedup`` folds records into similar existing memories (off: an exact replay)."""
        self._open()
        items, problems = read_jsonl(Path(path))
        self._ready(kind, db)
        return self.writes.import_items(
            items, problems, kind, db, skip_invalid, on_progress, dedup, path
        )

    def index_records(
        self,
        records: Sequence[MemoryRecord | Mapping[str, Any]],
        kind: MemoryKind,
        db: Database = "user",
        skip_invalid: bool = False,
        dedup: bool = False,
    ) -> IndexReport:
        """Like ``index_file`` for records in memory: the same validation (scope rule included),
        problems named ``record N`` (1-based)."""
        self._open()
        items = [(f"record {i}", r) for i, r in enumerate(records, start=1)]
        self._ready(kind, db)
        return self.writes.import_items(items, [], kind, db, skip_invalid, None, dedup, None)

    def index_demo(
        self, files: Iterable[tuple[str, MemoryKind, Database]] = DEMO_FILES
    ) -> dict[str, IndexReport]:
        """Index the bundled demo corpus (templates installed first)."""
        self.init()
        return {name: self.index_file(demo_path(name), kind, db) for name, kind, db in files}
