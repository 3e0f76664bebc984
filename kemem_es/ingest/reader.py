"""JSONL input: every line decoded and validated before anything is written, problems named by
line and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _parsed(raw_lines: list[bytes], problems: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
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


def read_jsonl(path: Path) -> tuple[list[tuple[str, dict]], list[str]]:
    """Read a whole JSONL file (UTF-8, a BOM tolerated): ("line N", object) pairs to validate,
    and the lines that are not even JSON objects."""
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    problems: list[str] = []
    items = list(_parsed(data.splitlines(), problems))
    return items, problems


def line_no(problem: str) -> int:
    """The line number a problem names (0 when it names none), to sort problems by line."""
    head = problem.split(":", 1)[0]
    return int(head.split()[-1]) if head.split()[-1].isdigit() else 0
