"""JSONL input: every line validated before anything is written, problems named by line + field."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from kemem_es.models import RECORD_TYPES, Database, MemoryKind, MemoryRecord


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(record)"


def validate_lines(
    lines: Iterable[str], kind: MemoryKind, db: Database
) -> tuple[list[tuple[int, MemoryRecord]], list[str]]:
    """Parse and validate; returns (good records with line numbers, problems)."""
    model = RECORD_TYPES[kind]
    good: list[tuple[int, MemoryRecord]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"line {no}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(data, dict):
            problems.append(f"line {no}: expected a JSON object, got {type(data).__name__}")
            continue
        try:
            record = model.model_validate(data)
            record.check_scope(db)
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(f"line {no}: {_field(err['loc'])}: {err['msg']}")
            continue
        except ValueError as exc:
            problems.append(f"line {no}: {exc}")
            continue
        doc_id = record.doc_id(db)
        if doc_id in seen:
            problems.append(f"line {no}: id: same memory as line {seen[doc_id]} ({doc_id})")
            continue
        seen[doc_id] = no
        good.append((no, record))
    return good, problems


def read_jsonl(
    path: Path, kind: MemoryKind, db: Database
) -> tuple[list[tuple[int, MemoryRecord]], list[str]]:
    """Read a whole JSONL file (UTF-8) and validate every line."""
    with path.open(encoding="utf-8") as fh:
        return validate_lines(fh, kind, db)
