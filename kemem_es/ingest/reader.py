"""JSONL input: every line decoded and validated before anything is written, problems named by
line and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from kemem_es.models import Database, MemoryKind
from kemem_es.store.validation import Checked, validate_items


def _parsed(raw_lines: list[bytes], problems: list[str]) -> Iterator[tuple[str, object]]:
    for no, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                f"line {no}: not valid UTF-8 (byte {exc.start + 1}); save the file as UTF-8"
            )
            continue
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(f"line {no}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(data, dict):
            problems.append(f"line {no}: expected a JSON object, got {type(data).__name__}")
            continue
        yield f"line {no}", data


def read_jsonl(
    path: Path, kind: MemoryKind, db: Database, dim: int | None = None
) -> tuple[list[Checked], list[str]]:
    """Read a whole JSONL file (UTF-8, a BOM tolerated) and validate every line."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    problems: list[str] = []
    good, invalid = validate_items(_parsed(data.splitlines(), problems), kind, db, dim)
    return good, sorted(problems + invalid, key=_line_no)


def _line_no(problem: str) -> int:
    head = problem.split(":", 1)[0]
    return int(head.split()[-1]) if head.split()[-1].isdigit() else 0
