"""A listing's cursor: where ``get_all`` goes on (sort values, point in time, which listing),
encoded for the caller and checked when it comes back."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kemem_es.errors import InvalidInput
from kemem_es.models import MemoryKind
from kemem_es.store.crud.base import kinds_of
from kemem_es.store.scope import Scope

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  # a date sort value (a missing one is LONG_MIN)
_UID = re.compile(r"[0-9a-f]{40}")  # Scope.doc_id: a 20-byte blake2b hex digest
_PIT = re.compile(r"[A-Za-z0-9+/=_-]{1,3000}")  # a point-in-time id: base64 of either engine
_LISTING = re.compile(r"[0-9a-f]{16}")  # listing_key
MAX_CURSOR = 4200


@dataclass(frozen=True)
class Cursor:
    """Where a listing goes on: the last row's sort values (``LISTING_SORT``; with a point in
    time on Elasticsearch, its implicit shard-order tiebreaker too), the listing's point in
    time, if it has one, and which listing it is (``listing_key``; None in an older cursor)."""

    after: list[Any]
    pit: str | None = None
    listing: str | None = None


def listing_key(scope: Scope, kind: MemoryKind | None, filters: Mapping[str, Any] | None) -> str:
    """What a listing is (its scope, kinds and filters), in a cursor: a point in time covers the
    indices of its first page's kind, and sort values mean nothing in another listing, so a
    cursor used with other parameters would page the wrong kind or skip memories unseen."""
    what = [scope.db, scope.agent_id, scope.user_id, list(kinds_of(kind)), filters or {}]
    text = json.dumps(what, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def encode_cursor(cursor: Cursor) -> str:
    data: dict[str, Any] = {"a": cursor.after} | ({"p": cursor.pit} if cursor.pit else {})
    data |= {"l": cursor.listing} if cursor.listing else {}
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def decode_cursor(cursor: str) -> Cursor:
    """The ``encode_cursor`` value, checked to be what ``page`` sorts by (a date's epoch
    milliseconds, a memory's engine id) and a point-in-time id's characters: anything else
    would reach the engine and come back as an engine error instead of the caller's mistake.
    (A cursor of the older form, the bare sort values, still works.)"""
    bad = InvalidInput("cursor: not a cursor from get_all", field="cursor")
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR:
        raise bad
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError:
        raise bad from None
    if isinstance(data, list):
        data = {"a": data}
    if not isinstance(data, dict) or not {"a"} <= data.keys() <= {"a", "p", "l"}:
        raise bad
    after, pit, listing = data["a"], data.get("p"), data.get("l")
    if not isinstance(after, list) or len(after) not in (2, 3) or (len(after) == 3 and not pit):
        raise bad
    millis, uid, *tiebreak = after
    if type(millis) is not int or not LONG_MIN <= millis <= LONG_MAX:
        raise bad
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise bad
    if tiebreak and (type(tiebreak[0]) is not int or not 0 <= tiebreak[0] <= LONG_MAX):
        raise bad
    if pit is not None and (not isinstance(pit, str) or not _PIT.fullmatch(pit)):
        raise bad
    if listing is not None and (not isinstance(listing, str) or not _LISTING.fullmatch(listing)):
        raise bad
    return Cursor(after, pit, listing)


def resume(after: Cursor, listing: str) -> Cursor:
    """Where a decoded cursor goes on in the listing ``listing``; InvalidInput naming
    ``cursor`` when it was made for another listing. An older cursor, which does not say, goes
    on from the live indices, which this request's scope, kinds and filters select, not from
    its point in time."""
    if after.listing is None:
        return Cursor(after.after[:2])
    if after.listing != listing:
        raise InvalidInput("cursor: not from this listing", field="cursor")
    return after
