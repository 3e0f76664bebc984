"""What one bulk write did: counts, rejected records, time."""

from __future__ import annotations

from dataclasses import dataclass, field

from kemem_es.store.validation import by_record


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
