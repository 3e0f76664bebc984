"""The one validation every write path runs (file import, ``index_records``, the Memory API):
the record model, the scope rule and what only the index knows (the vector's dimension).
Problems name the record (``line 7`` / ``record 7``) and the field."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from kemem_es.errors import InvalidInput
from kemem_es.models import RECORD_TYPES, Database, MemoryKind, MemoryRecord
from kemem_es.store.scope import Scope


@dataclass(frozen=True)
class Checked:
    """A record that passed, with its scope and the memory id it will be stored under."""

    label: str
    record: MemoryRecord
    scope: Scope
    memory_id: str
    embedded: list[float] | None = None  # computed already (dedup): not embedded again

    @cached_property
    def doc_id(self) -> str:
        return self.scope.doc_id(self.memory_id)

    @property
    def ref(self) -> tuple[str, str]:
        """(engine id, routing): how the engine finds this record's stored version."""
        return self.doc_id, self.scope.routing


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(record)"


def by_record(problems: Iterable[str]) -> dict[str, list[str]]:
    """Problems grouped by the record they name (``line 7: a: …`` → ``line 7``), in order: one
    record with three bad fields is one rejected record, not three."""
    out: dict[str, list[str]] = {}
    for problem in problems:
        label, sep, rest = problem.partition(": ")
        out.setdefault(label if sep else problem, []).append(rest if sep else "")
    return out


def check(record: MemoryRecord, db: Database, dim: int | None) -> Scope:
    """Scope rule + index constraints for one parsed record. Raises InvalidInput."""
    scope = Scope.of(agent_id=record.agent_id, user_id=record.user_id, db=db)
    if record.vector is not None and dim is not None and len(record.vector) != dim:
        raise InvalidInput(
            f"vector: has {len(record.vector)} dims, the index needs {dim}", field="vector"
        )
    return scope


def validate_items(
    items: Iterable[tuple[str, Any]], kind: MemoryKind, db: Database, dim: int | None
) -> tuple[list[Checked], list[str]]:
    """Validate (label, dict or record) pairs; returns the good ones and the problems.
    The same memory twice in one batch is a problem too (the second would silently win)."""
    model = RECORD_TYPES[kind]
    good: list[Checked] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for label, item in items:
        try:
            if isinstance(item, model):
                # Re-validate: a record built in Python may have been changed after creation.
                record = model.model_validate(item.model_dump(exclude_unset=True))
            elif isinstance(item, dict):
                record = model.model_validate(item)
            else:
                problems.append(f"{label}: expected a {kind} record, got {type(item).__name__}")
                continue
            scope = check(record, db, dim)
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(f"{label}: {_field(err['loc'])}: {err['msg']}")
            continue
        except InvalidInput as exc:
            problems.append(f"{label}: {exc}")
            continue
        checked = Checked(label, record, scope, record.memory_id())
        if checked.doc_id in seen:
            problems.append(
                f"{label}: id: same memory as {seen[checked.doc_id]} ({checked.memory_id})"
            )
            continue
        seen[checked.doc_id] = label
        good.append(checked)
    return good, problems
