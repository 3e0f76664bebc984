"""The field types and checks of memory records (models.py): limits the engine imposes, UTF-8
and visible text, ids, times, metadata and vectors, each refused here naming its field."""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Any

import numpy as np
from pydantic import (
    AfterValidator,
    BeforeValidator,
    StringConstraints,
)

from kemem_es.literals import Database as Database  # re-exported: the records name them here
from kemem_es.literals import MemoryKind as MemoryKind

MAX_ID_BYTES = 200
MAX_TERM_BYTES = 4096  # keyword-typed values; Lucene refuses a term over 32,766 bytes
MAX_TEXT_CHARS = 20_000
MAX_STRENGTH = 1e6  # strength is a float32 in the engine; far above any real reinforcement
MAX_METADATA_KEYS = 32
MAX_METADATA_ITEMS = 10_000  # one nested entry per item; the engine refuses a document over 10,000
MIN_YEAR, MAX_YEAR = 1000, 9999  # the engine's date formats need a four-digit year
MAX_OFFSET = timedelta(hours=18)  # the engine (java.time) refuses offsets beyond ±18:00
META_KEY = re.compile(r"^[A-Za-z0-9_\-\u4e00-\u9fff]{1,64}$")
DATE_TEXT = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|([+-])(\d{2}):?(\d{2}))?)?$"
)

MetaScalar = str | bool | int | float
MetaValue = MetaScalar | list[MetaScalar]


_CONTROL = re.compile(r"[\x00-\x1f]")


def check_utf8(text: str) -> str:
    """Text must be encodable as UTF-8: a lone surrogate (``"\\ud800"`` from a JSON escape or a
    mis-decoded file) can be neither hashed, sent to the engine nor returned in a response, so
    it is refused where it comes in rather than failing half-way through a write."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        bad = text[exc.start].encode("unicode_escape").decode()
        raise ValueError(
            f"has a lone surrogate ({bad} at character {exc.start}), which is not text "
            "that UTF-8 can encode"
        ) from None
    return text


def _utf8_input(v: Any) -> Any:
    return check_utf8(v) if isinstance(v, str) else v


# Before the string checks: pydantic's own stripping fails on such text with a vaguer message.
Utf8 = BeforeValidator(_utf8_input)


def _utf8_at_most(limit: int) -> Any:
    def check(v: str | None) -> str | None:
        if v is not None and len(v.encode()) > limit:
            raise ValueError(f"is {len(v.encode())} bytes in UTF-8; at most {limit} allowed")
        if v is not None and _CONTROL.search(v):
            raise ValueError("must not contain control characters")
        return v

    return AfterValidator(check)


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character a reader would see: not only spaces, control
    characters (NUL) or invisible format characters (zero-width space), which strip() keeps."""
    return any(unicodedata.category(c)[0] not in "CZ" for c in text)


def _visible(v: str) -> str:
    if not has_visible_text(v):
        raise ValueError("has no visible text (only spaces, control or zero-width characters)")
    return v


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Text = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT_CHARS),
    AfterValidator(_visible),
    Utf8,
]
OptText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_TEXT_CHARS), Utf8]
Term = Annotated[str, StringConstraints(strip_whitespace=True), _utf8_at_most(MAX_TERM_BYTES), Utf8]
NonEmptyTerm = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1),
    _utf8_at_most(MAX_TERM_BYTES),
    Utf8,
]


def _unpadded(v: object) -> object:
    """An id is taken as given, never stripped: ``" u_mumu"`` reading u_mumu's memories would
    let a caller's formatting slip reach a scope it did not name (refusing is the safe side)."""
    if isinstance(v, str) and v and v != v.strip():
        raise ValueError("must not begin or end with whitespace (ids are not stripped)")
    return v


ScopeId = Annotated[
    str,
    BeforeValidator(_unpadded),
    StringConstraints(min_length=1),
    _utf8_at_most(MAX_ID_BYTES),
    Utf8,
]


def _path_segment(v: str) -> str:
    """One URL path segment that stays itself: a '/' splits it, and URL clients (browsers,
    httpx, requests, curl) resolve the dot segments '.' and '..' away, so
    /v1/memories/./history reached /v1/memories/history and the dashboard's delete of '.'
    went to the scope delete."""
    if "/" in v:
        raise ValueError(
            "must not contain '/': the HTTP API names a memory in its URL path "
            "(/v1/memories/{id}), where a '/' reads as the path's own (foo/history)"
        )
    if v in (".", ".."):
        raise ValueError(
            f"must not be {v!r}: the HTTP API names a memory in its URL path "
            "(/v1/memories/{id}), where URL clients remove the dot segments '.' and '..'"
        )
    return v


MemoryId = Annotated[ScopeId, AfterValidator(_path_segment)]
"""A caller-chosen memory id: a scope id that the HTTP API can also put in a URL path."""


def check_time(v: datetime | None) -> datetime | None:
    """A time the engine can store: a four-digit year and an offset within ±18:00 (Python
    allows ±23:59, the engine refuses the document at bulk time, after others were written)."""
    if v is None:
        return v
    if not MIN_YEAR <= v.year <= MAX_YEAR:
        raise ValueError(f"year {v.year} is outside {MIN_YEAR}–{MAX_YEAR}")
    offset = v.utcoffset()
    if offset is not None and abs(offset) > MAX_OFFSET:
        minutes = int(abs(offset).total_seconds()) // 60
        sign = "-" if offset < timedelta(0) else "+"
        raise ValueError(f"offset {sign}{minutes // 60:02d}:{minutes % 60:02d} is beyond ±18:00")
    return v


def read_date_text(text: str) -> datetime:
    """The time a date text (``DATE_TEXT``) names, checked as a real calendar date and time
    (no 2025-02-30, no 25:00) within the engine's range. Raises ValueError."""
    m = DATE_TEXT.match(text)
    if not m:
        raise ValueError(
            "not a date: use YYYY-MM-DD, YYYY-MM-DD HH:MM:SS or ISO 8601 with an offset"
        )
    year, month, day, hour, minute, second, frac, zone, sign, zh, zm = m.groups()
    if zone and zone != "Z" and int(zm) >= 60:
        raise ValueError(f"not a date: offset {zone} has minutes over 59")
    try:
        tz = None
        if zone == "Z":
            tz = timezone.utc
        elif zone:
            offset = timedelta(hours=int(zh), minutes=int(zm))
            tz = timezone(-offset if sign == "-" else offset)  # up to ±23:59; see check_time
        t = datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((frac or "0").ljust(6, "0")),
            tzinfo=tz,
        )
    except ValueError as exc:
        raise ValueError(f"not a date: {text} ({exc})") from None
    check_time(t)
    return t


def parse_time(v: Any) -> Any:
    """Dates must be written as dates: ``2025-06-01``, ``2025-06-01 12:00[:00]`` or ISO 8601
    with an optional offset. Bare numbers (20250601, -1) would be read as Unix seconds, so they
    are refused rather than guessed. Text must name a real date in the engine's range."""
    if v is None:
        return v
    if isinstance(v, datetime):
        return check_time(v)
    if isinstance(v, date):
        return check_time(datetime(v.year, v.month, v.day))
    if isinstance(v, bool | int | float):
        raise ValueError("give a date string like 2025-06-01 12:00:00 (numbers are ambiguous)")
    if isinstance(v, str):
        text = v.strip()
        read_date_text(text)
        if len(text) == 10:
            text += "T00:00:00"
        return text
    raise ValueError("not a date")


Time = Annotated[datetime, BeforeValidator(parse_time), AfterValidator(check_time)]


def metadata_utf8(v: Any) -> Any:
    """Text UTF-8 cannot encode, named by key before the value types are tried (each of which
    would fail on it with a vaguer message)."""
    if isinstance(v, dict):
        for key, value in v.items():
            try:
                _utf8_input(key)
            except ValueError as exc:
                raise ValueError(f"key {key!r}: {exc}") from None
            for item in value if isinstance(value, list) else [value]:
                try:
                    _utf8_input(item)
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
    return v


def check_metadata(v: dict[str, Any]) -> dict[str, Any]:
    """Flat keys → a scalar or a list of scalars: what the typed metadata fields can hold.
    Each item becomes one nested entry of the document (``store.documents.meta_entries``), and
    the engine refuses a document with more than 10,000, so the items are counted too."""
    if len(v) > MAX_METADATA_KEYS:
        raise ValueError(f"{len(v)} keys; at most {MAX_METADATA_KEYS}")
    items = sum(len(value) if isinstance(value, list) else 1 for value in v.values())
    if items > MAX_METADATA_ITEMS:
        raise ValueError(
            f"{items} values in all (lists count each item); at most {MAX_METADATA_ITEMS}"
        )
    for key, value in v.items():
        if not META_KEY.match(key):
            raise ValueError(f"key {key!r}: use 1–64 letters, digits, _ or - (no dots)")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"{key}: numbers must be finite")
            if isinstance(item, str) and len(item.encode()) > MAX_TERM_BYTES:
                raise ValueError(f"{key}: a value over {MAX_TERM_BYTES} bytes")
            if isinstance(item, int) and not isinstance(item, bool) and abs(item) > 2**53:
                raise ValueError(f"{key}: integer beyond ±2^53 (not exact as a number)")
    return v


UNIT_TOLERANCE = 1e-3  # a vector this close to length 1 is stored as given


def check_vector(v: list[float] | None) -> list[float] | None:
    """Finite, not all zeros, and stored at unit length: only a vector's direction means
    anything to a cosine, and the ANN graph ranks by dot product, which on unit vectors is the
    cosine at a third of the arithmetic (index_templates/dialects/opensearch.json)."""
    if v is None:
        return v
    if not v:
        raise ValueError("is empty")
    # numpy: a 512-float check in ~20 µs instead of ~150 µs (bulk loads validate every vector)
    arr = np.asarray(v, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError("has NaN or infinite values")
    if not arr.any():
        raise ValueError("is all zeros (no direction: cosine similarity is undefined)")
    norm = float(np.linalg.norm(arr))
    return v if abs(norm - 1.0) <= UNIT_TOLERANCE else (arr / norm).round(7).tolist()
