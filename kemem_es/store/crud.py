"""Reading, changing and deleting single memories and whole scopes, with history.

Every operation takes a :class:`Scope`; the engine id comes from it and every fetched document
is checked against it, so another scope's memory is simply "not found". Writes that change one
memory use optimistic concurrency (the document's seq_no) and retry on a conflict, so a
concurrent update is never overwritten unseen.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.contract.memory import Action, HistoryEntry, Memory, MemoryPage
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import (
    check_bulk,
    check_shards,
    deadline,
    is_refusal,
    type_and_reason,
    with_remedy,
)
from kemem_es.errors import (
    ConcurrentChange,
    EngineRefused,
    EngineUnavailable,
    InvalidInput,
    KememError,
    NotFound,
    activity,
)
from kemem_es.models import Database, MemoryKind
from kemem_es.runtime import shielded
from kemem_es.store import consistency, fresh, history
from kemem_es.store.filters import compile_filters
from kemem_es.store.layout import (
    HEAVY_FIELDS,
    KINDS,
    UID_FIELD,
    checked_kind,
    history_alias,
    index_alias,
    kind_of_index,
)
from kemem_es.store.scope import Scope, checked_id

log = logging.getLogger(__name__)

FETCH_EXCLUDES = [f for f in HEAVY_FIELDS if f != "content_hash"]
PAGE_MAX = 1000
DELETE_PAGE = 500
FORGET_IDS = 5000  # memory ids per history delete (well under the engine's terms limit)
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  # a date sort value (a missing one is LONG_MIN)
_UID = re.compile(r"[0-9a-f]{40}")  # Scope.doc_id: a 20-byte blake2b hex digest
_PIT = re.compile(r"[A-Za-z0-9+/=_-]{1,3000}")  # a point-in-time id: base64 of either engine
_LISTING = re.compile(r"[0-9a-f]{16}")  # listing_key
MAX_CURSOR = 4200
# A listing's point in time lives this long after each page: time to ask for the next one, not
# much more, since a listing nobody finishes holds its engine context until then. A cursor used
# later goes on from the live indices (see ``Crud.page``).
PIT_KEEP_ALIVE_S = 120
# Points in time this process holds open at once; beyond it a listing pages the live indices.
# The engine's limit is cluster-wide (OpenSearch's search.max_open_pit_context: 300), shared
# with every other process and application: abandoned listings must not use it up.
PIT_MAX_OPEN = 32
LISTING_SORT = [
    {"updatetime": {"order": "desc", "missing": "_last"}},
    {UID_FIELD: {"order": "asc"}},
]
DELETE_PASSES = 5  # delete_all: again while memories are added meanwhile, this many times at most
# Top-level fields replaced whole; fixed source (compiled once), the values only in params.
# Given fields replace their values whole; a null one is removed (a cleared field is absent, as
# in a memory written without it). Values come in params only, never in the source.
PATCH_SCRIPT = (
    "for (e in params.doc.entrySet()) { if (e.getValue() == null) "
    "{ ctx._source.remove(e.getKey()) } else { ctx._source.put(e.getKey(), e.getValue()) } }"
)


@dataclass(frozen=True)
class Stored:
    """A fetched memory: its kind, source (without vector) and concurrency token."""

    kind: MemoryKind
    source: dict[str, Any]
    seq_no: int
    primary_term: int

    @property
    def memory_id(self) -> str:
        return str(self.source.get("id", ""))

    @classmethod
    def listed(cls, kind: MemoryKind, hit: dict[str, Any]) -> Stored:
        """A search hit of a query with ``seq_no_primary_term``: the version it was listed at."""
        return cls(kind, hit["_source"], hit["_seq_no"], hit["_primary_term"])


def _kinds(kind: MemoryKind | None) -> tuple[MemoryKind, ...]:
    return KINDS if kind is None else (checked_kind(kind),)


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
    what = [scope.db, scope.agent_id, scope.user_id, list(_kinds(kind)), filters or {}]
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


class PitBudget:
    """The points in time this process holds open, each until its keep-alive passes unused
    (a listing abandoned after its first page is never closed): at most ``PIT_MAX_OPEN``. No
    engine call is made under the lock (an async verb's greenlet may switch during one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}  # point-in-time id → when its keep-alive passes
        self._reserved = 0  # being opened now

    def reserve(self) -> bool:
        """A slot for a point in time about to be opened; False when all are taken."""
        with self._lock:
            now = time.monotonic()
            self._held = {pit: end for pit, end in self._held.items() if end > now}
            if len(self._held) + self._reserved >= PIT_MAX_OPEN:
                return False
            self._reserved += 1
            return True

    def opened(self, pit: str | None) -> None:
        """The reserved slot's outcome: the point in time opened, or None (refused)."""
        with self._lock:
            self._reserved -= 1
            if pit is not None:
                self._held[pit] = time.monotonic() + PIT_KEEP_ALIVE_S

    def kept(self, pit: str, now_as: str) -> None:
        """A page read ``pit``, which lives on as ``now_as`` (Elasticsearch may change the id)."""
        with self._lock:
            self._held.pop(pit, None)
            self._held[now_as] = time.monotonic() + PIT_KEEP_ALIVE_S

    def closed(self, pit: str) -> None:
        with self._lock:
            self._held.pop(pit, None)

    def held(self) -> int:
        with self._lock:
            now = time.monotonic()
            return sum(end > now for end in self._held.values()) + self._reserved


PITS = PitBudget()  # one per process: the engine's limit does not care which Kemem opened them


def _keep_alive() -> str:
    return f"{PIT_KEEP_ALIVE_S}s"


class Crud:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.prefix = engine.settings.index_prefix

    def alias(self, scope: Scope, kind: MemoryKind) -> str:
        return index_alias(self.prefix, scope.db, kind)

    # -- reads ----------------------------------------------------------------------------
    def before_read(self, scope: Scope, kinds: Iterable[MemoryKind]) -> None:
        """This process's own writes of the scope made visible (``store.fresh``)."""
        reads = [(self.alias(scope, k), scope.routing) for k in kinds]
        fresh.before_read(self.engine, reads, self.engine.read_timeout)

    def fetch(self, scope: Scope, memory_id: str, kind: MemoryKind | None = None) -> Stored:
        """The memory with this id in this scope; NotFound otherwise (also for other scopes)."""
        memory_id = checked_id(memory_id, "memory_id")
        kinds = _kinds(kind)
        refs = [(self.alias(scope, k), scope.doc_id(memory_id), scope.routing) for k in kinds]
        with activity("reading a memory"):
            docs = self.engine.get_many(refs, excludes=FETCH_EXCLUDES)
        found = [
            Stored(k, doc["_source"], doc["_seq_no"], doc["_primary_term"])
            for k, doc in zip(kinds, docs, strict=True)
            if doc is not None and scope.owns(doc.get("_source", {}))
        ]
        if not found:
            raise NotFound(f"no memory {memory_id!r} among the {scope.describe()}")
        if len(found) > 1:
            raise InvalidInput(
                f"memory id {memory_id!r} names both an event and an entity here; "
                "say which with kind='events' or kind='entities'",
                field="kind",
            )
        return found[0]

    def page(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[tuple[MemoryKind, dict[str, Any]]], str | None]:
        """One page, newest first (updatetime, then engine id: a total order). A listing of
        more than one page reads a point in time taken at its first page, because an update
        sets updatetime to now: on the live indices a memory updated before the cursor reached
        it would move ahead of the cursor and never be listed. So each memory of the scope as
        it was at the first page comes exactly once, in that version. Where there is no point
        in time (expired, refused), the listing goes on from the live indices.

        Points in time are engine contexts with a cluster-wide limit, and a listing nobody
        finishes (a dashboard's first page, a client that reads one page) never says so. So a
        point in time is opened only when a second page may follow, closed with the last page,
        kept alive ``PIT_KEEP_ALIVE_S`` after each page (not minutes more), and this process
        holds at most ``PIT_MAX_OPEN`` at once: past that, listings page the live indices."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= PAGE_MAX:
            raise InvalidInput(f"limit: a whole number 1–{PAGE_MAX}", field="limit")
        after = decode_cursor(cursor) if cursor else None
        body: dict[str, Any] = {
            "size": limit,
            "query": {"bool": {"filter": scope.filters() + compile_filters(filters)}},
            "sort": LISTING_SORT,
            "_source": {"excludes": HEAVY_FIELDS},
            "track_total_hits": False,
        }
        indices = ",".join(self.alias(scope, k) for k in _kinds(kind))
        if after is None:  # read-your-own-writes: the first page (a point in time follows it)
            self.before_read(scope, _kinds(kind))
        listing = listing_key(scope, kind, filters)
        after = resume(after, listing) if after else None
        got = None
        if after is None:
            hits = self._live_page(indices, body, scope)
            if len(hits) == limit:  # more pages to come: the listing's point in time, now
                got = self._pit_page(self._open_pit(indices, scope), body)
                hits = got[0] if got else hits
        else:
            got = self._pit_page(after.pit, body | {"search_after": after.after})
            if got is None:
                hits = self._live_page(indices, body | {"search_after": after.after[:2]}, scope)
            else:
                hits = got[0]
        pit = got[1] if got else None
        out = [(kind_of_index(h["_index"]), h["_source"]) for h in hits]
        if len(hits) < limit:
            self._close_pit(pit)
            return out, None
        last = hits[-1]["sort"]
        return out, encode_cursor(Cursor(last if pit else last[:2], pit, listing))

    def _live_page(self, indices: str, body: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
        with activity("listing memories"):
            resp = self.engine.search(indices, body, routing=scope.routing)
        return list(check_shards(resp, "listing memories")["hits"]["hits"])

    def _open_pit(self, indices: str, scope: Scope) -> str | None:
        """A point in time for a listing; None where this process holds ``PIT_MAX_OPEN``
        already (an expected state under many listings: debug only) or the engine will not
        open one (too many open, too old): the listing then pages the live indices."""
        if not PITS.reserve():
            log.debug("listing memories without a point in time: %d held", PIT_MAX_OPEN)
            return None
        pit = None
        try:
            with activity("opening a point in time"):
                pit = self.engine.open_pit(indices, _keep_alive(), scope.routing)
        except KememError as exc:
            log.warning("listing memories without a point in time: %s", exc)
        finally:
            PITS.opened(pit)
        return pit

    def _pit_page(
        self, pit: str | None, body: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str] | None:
        """The hits and the point in time to go on with; None when it is gone (kept alive
        ``PIT_KEEP_ALIVE_S`` after each page) or unusable (then it stays counted in ``PITS``
        until its keep-alive passes: it may still be open)."""
        if pit is None:
            return None
        try:
            with activity("listing memories"):
                resp = self.engine.search_pit(pit, _keep_alive(), body)
            hits = check_shards(resp, "listing memories")["hits"]["hits"]
        except KememError as exc:
            log.info("listing memories from the live indices: the point in time is gone (%s)", exc)
            return None
        now_as = str(resp.get("pit_id") or pit)
        PITS.kept(pit, now_as)
        return list(hits), now_as

    def _close_pit(self, pit: str | None) -> None:
        """A finished listing's point in time, released now rather than when it expires."""
        if pit is None:
            return
        try:
            with activity("closing a point in time"):
                self.engine.close_pit(pit)
        except KememError as exc:  # it expires anyway (and stays counted until then)
            log.info("closing a point in time: %s", exc)
        else:
            PITS.closed(pit)

    def count(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
    ) -> int:
        query = {"bool": {"filter": scope.filters() + compile_filters(filters)}}
        self.before_read(scope, _kinds(kind))
        with activity("counting memories"):
            return sum(
                self.engine.count(self.alias(scope, k), query, scope.routing) for k in _kinds(kind)
            )

    def history(
        self, scope: Scope, memory_id: str, limit: int = history.LIMIT
    ) -> list[HistoryEntry]:
        """The newest ``limit`` changes of a memory, oldest first. This process's own changes
        are always in it (``history.refresh_if_written``); the refresh and the search share the
        query deadline, so a hung engine fails the read in that time, not the write timeout."""
        memory_id = checked_id(memory_id, "memory_id")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidInput(f"limit: must be a whole number, not {limit!r}", field="limit")
        if not 1 <= limit <= history.LIMIT_MAX:
            raise InvalidInput(f"limit: must be 1–{history.LIMIT_MAX}", field="limit")
        body = history.query(scope, memory_id, limit)
        with activity("reading history"), deadline(self.engine.settings.query_timeout_s):
            history.refresh_if_written(self.engine, self.engine.read_timeout)
            resp = self.engine.search(history_alias(self.prefix), body)
        check_shards(resp, "reading history")
        hits = resp["hits"]["hits"]
        return [history.to_entry(h["_source"]) for h in reversed(hits) if scope.owns(h["_source"])]

    def existing_ids(
        self, db: Database, kind: MemoryKind, refs: Sequence[tuple[str, str | None]]
    ) -> set[str]:
        """Which of the documents ``refs`` ((engine id, routing) in ``db``) exist (real time)."""
        alias = index_alias(self.prefix, db, kind)
        with activity("looking up memories"):
            return set(self.engine.mget(alias, refs, ["id"]))

    def texts_ever(self, uids: set[str]) -> list[dict[str, Any]]:
        """The history entries (uid, old_text, new_text) of the memories ``uids``: every text
        they have had, this process's latest changes included."""
        with activity("reading history"):
            history.refresh(self.engine)  # entries written a moment ago count
            body = history.texts_query(uids)
            hits = self.engine.search(history_alias(self.prefix), body)["hits"]["hits"]
        return [h["_source"] for h in hits]

    # -- writes ---------------------------------------------------------------------------
    def _action(self, op: str, scope: Scope, kind: MemoryKind, memory_id: str,
                version: Stored | None = None) -> dict[str, Any]:  # fmt: skip
        """A bulk action line on one memory; with ``version``, only if it is still that one."""
        meta: dict[str, Any] = {
            "_index": self.alias(scope, kind),
            "_id": scope.doc_id(memory_id),
            "routing": scope.routing,
        }
        if version is not None:
            meta |= {"if_seq_no": version.seq_no, "if_primary_term": version.primary_term}
        return {op: meta}

    def replace(
        self, scope: Scope, stored: Stored, doc: dict[str, Any], entry: dict[str, Any],
        refresh: bool,
    ) -> None:  # fmt: skip
        """Write a changed memory over the version that was read (conflict → retry above)."""
        action = self._action("index", scope, stored.kind, stored.memory_id, stored)
        self._bulk_one([action, doc], entry, refresh, scope, stored.memory_id)

    def patch(
        self, scope: Scope, stored: Stored, doc: dict[str, Any], entry: dict[str, Any],
        refresh: bool,
    ) -> None:  # fmt: skip
        """A partial update of the version that was read: fields not in ``doc`` (the vector,
        recall counts) stay as they are; fields set to None are cleared. Each given field
        replaces its old value whole: a partial ``doc`` would merge objects key by key, so
        ``metadata`` could never lose a key (and its derived ``meta`` entries would disagree)."""
        if not self.engine.painless:  # the same write, computed here (see _patched)
            full = self._patched(scope, stored, doc)
            action = self._action("index", scope, stored.kind, stored.memory_id, stored)
            self._bulk_one([action, full], entry, refresh, scope, stored.memory_id)
            return
        action = self._action("update", scope, stored.kind, stored.memory_id, stored)
        script = {"source": PATCH_SCRIPT, "lang": "painless", "params": {"doc": doc}}
        self._bulk_one([action, {"script": script}], entry, refresh, scope, stored.memory_id)

    def _patched(self, scope: Scope, stored: Stored, doc: dict[str, Any]) -> dict[str, Any]:
        """PATCH_SCRIPT without a script: the whole stored document (vector included, read in
        real time) with ``doc``'s fields replaced whole and its None fields removed. It is
        written onto the version that was read (if_seq_no), so a change in between is a
        conflict, as the scripted update's."""
        index = self.alias(scope, stored.kind)
        got = self.engine.get_many([(index, scope.doc_id(stored.memory_id), scope.routing)])[0]
        current = dict((got or {}).get("_source") or stored.source)
        current.update(doc)
        return {k: v for k, v in current.items() if v is not None}

    def create(
        self, scope: Scope, kind: MemoryKind, memory_id: str, doc: dict[str, Any],
        entry: dict[str, Any], refresh: bool,
    ) -> None:  # fmt: skip
        action = self._action("create", scope, kind, memory_id)
        self._bulk_one([action, doc], entry, refresh, scope, memory_id)

    def delete(self, scope: Scope, stored: Stored, actor: str, refresh: bool) -> None:
        action = self._action("delete", scope, stored.kind, stored.memory_id, stored)
        entry = history.entry(
            scope, stored.memory_id, stored.kind, "DELETE", actor, old=stored.source
        )
        self._bulk_one([action], entry, refresh, scope, stored.memory_id)

    def _bulk_one(
        self, lines: list[dict[str, Any]], entry: dict[str, Any], refresh: bool, scope: Scope,
        memory_id: str,
    ) -> None:  # fmt: skip
        """One memory's write, then its history entry. A failed item says why in the caller's
        terms: a conflict (retry), the memory gone meanwhile (NotFound: deleted by another
        writer between our read and this write), the index gone (run init), or a refusal —
        never with the engine's internal id, which the caller never sees. The two writes go
        together: an async caller cancelled meanwhile is cancelled after both (``shielded``)."""
        with shielded():
            self._write_one(lines, entry, refresh, scope, memory_id)

    def _write_one(
        self, lines: list[dict[str, Any]], entry: dict[str, Any], refresh: bool, scope: Scope,
        memory_id: str,
    ) -> None:  # fmt: skip
        meta = next(iter(lines[0].values()))
        try:
            with activity("writing a memory"):
                resp = self.engine.bulk(lines, refresh="wait_for" if refresh else False)
        finally:  # also when it failed: the engine may still apply it
            if not refresh:
                fresh.written(self.engine, meta["_index"], meta.get("routing"))
        item = next(iter(resp["items"][0].values()))
        status = item.get("status", 0)
        error = item.get("error") or {}
        if status == 409:
            raise ConcurrentChange(f"memory {memory_id!r} changed meanwhile")
        if status == 404 and "index_not_found" in str(error.get("type", "")):
            what = f"{error.get('type')}: {error.get('reason', 'no such index')}"
            raise EngineUnavailable(with_remedy(f"writing a memory: {what}"))
        if status == 404:
            raise NotFound(f"no memory {memory_id!r} among the {scope.describe()}")
        if status >= 300:
            why = type_and_reason(error) if error else f"status {status}"
            why = why.replace(str(item.get("_id", "")), repr(memory_id)) if item.get("_id") else why
            if is_refusal(status):
                raise EngineRefused(f"the engine refused memory {memory_id!r}: {why}")
            raise EngineUnavailable(with_remedy(f"writing memory {memory_id!r}: {why}"))
        self.record_history([entry], f"recording history (memory {memory_id!r} itself was written)")

    def record_history(self, entries: list[dict[str, Any]], doing: str) -> None:
        """History entries, all or an error: a dropped entry is a change with no record."""
        with activity(doing):
            resp = history.write(self.engine, entries)
        check_bulk(resp, doing)
        consistency.note_recorded(self.engine, entries)

    def ensure_recorded(self, scope: Scope, stored: Stored, actor: str) -> bool:
        """A retry's check (``store.consistency``): the stored version is the memory's newest
        history entry, else it is recorded now. True when an entry was missing."""
        return consistency.ensure_recorded(self.engine, scope, stored.kind, stored.source, actor)

    def complete_deletion(self, scope: Scope, memory_id: str, actor: str) -> Memory | None:
        """A retried delete of a memory that is gone: its DELETE entry, recorded now if its
        history lacks it (the earlier try deleted it, and its entry failed); the memory as it
        was deleted, or None when the deletion is recorded already (or never happened)."""
        from kemem_es.store.documents import to_memory

        last = consistency.unrecorded_deletion(self.engine, scope, checked_id(memory_id, "id"))
        if last is None:
            return None
        entry = consistency.recovered_deletion(scope, last, actor)
        consistency.write(self.engine, [entry], f"recording the deletion of memory {memory_id!r}")
        kind: MemoryKind = "entities" if last.get("kind") == "entities" else "events"
        return to_memory(last.get("new") or {"id": memory_id}, kind)

    def delete_scope(
        self,
        scope: Scope,
        filters: Mapping[str, Any] | None,
        kind: MemoryKind | None,
        actor: str,
        keep_text_in_history: bool = True,
    ) -> int:
        """Delete every memory of the scope matching the filters, page by page, each recorded
        in history (without its text when ``keep_text_in_history`` is False: forgetting a
        user should not leave their words behind in the history). Forgetting strips the texts
        of the scope's whole history of that kind, or with filters, of exactly the memories
        deleted here: those that still exist keep theirs."""
        deleted: list[str] = []
        for rows in self._pages_to_delete(scope, filters, kind):
            deleted += self.delete_sources(scope, rows, actor, keep_text_in_history)
        if not keep_text_in_history:
            self._forget_history(scope, kind, deleted if filters else None)
        self.refresh(scope, _kinds(kind))
        return len(deleted)

    def refresh(self, scope: Scope, kinds: Iterable[MemoryKind]) -> None:
        """Make what was written searchable now: the scope's indices of ``kinds`` and the
        history (one refresh after many writes, not a wait for each)."""
        for k in kinds:
            try:
                with activity("refreshing"):
                    self.engine.refresh(self.alias(scope, k))
            except EngineUnavailable as exc:
                if not index_missing(exc):  # a kind not written yet: nothing to refresh
                    raise
        with activity("refreshing"):
            history.refresh(self.engine)

    def delete_sources(
        self,
        scope: Scope,
        rows: Sequence[Stored],
        actor: str,
        keep_text: bool = True,
        reason: str | None = None,
    ) -> list[str]:
        """Delete these memories, each only if still the version listed, with a history entry
        each; returns the engine ids of those this call deleted. One changed since it was
        listed (a user's update, a recall) stays: the caller's choice was made on what it no
        longer is. One deleted meanwhile by someone else is not counted twice."""
        if not rows:
            return []
        lines: list[dict[str, Any]] = []
        entries: list[dict[str, Any]] = []
        for row in rows:
            lines.append(self._action("delete", scope, row.kind, row.memory_id, row))
            old = row.source if keep_text else None
            event: Action = "DELETE" if keep_text else "FORGET"
            entries.append(
                history.entry(scope, row.memory_id, row.kind, event, actor, old=old, reason=reason)
            )
        with shielded():  # the deletions and their history go together (see _bulk_one)
            for kind in {row.kind for row in rows}:
                fresh.written(self.engine, self.alias(scope, kind), scope.routing)
            with activity("deleting memories"):
                resp = self.engine.bulk(lines)
            ok = [
                e
                for e, item in zip(entries, resp["items"], strict=True)
                if item["delete"].get("result") == "deleted"
            ]
            if ok:
                self.record_history(ok, f"recording history ({len(ok)} memories were deleted)")
        # Not deleted (a blocked index, a failing shard): an error, never a smaller count;
        # a scope's forget then stops before it strips any history. Changed since listed: kept.
        failed = [i for i in resp["items"] if i["delete"].get("status") != 409]
        check_bulk({"items": failed}, f"deleting memories ({len(ok)} of {len(rows)} were deleted)")
        return [e["uid"] for e in ok]

    def _pages_to_delete(
        self, scope: Scope, filters: Mapping[str, Any] | None, kind: MemoryKind | None
    ) -> Iterator[list[Stored]]:
        """The matching memories, paged by engine id: the one sort key no write changes (by
        updatetime, a memory updated meanwhile moved ahead of the cursor and survived). Then
        again while a pass finds any (added meanwhile, or changed after it was listed: deleted
        as it is now, so its history holds what was deleted), ``DELETE_PASSES`` times at most.
        Each pass's refresh is bounded like the reads it comes before (the query deadline): on a
        hung engine a scope delete fails as fast as the rest of the Memory API, not after the
        write timeout."""
        for k in _kinds(kind):
            body: dict[str, Any] = {
                "size": DELETE_PAGE,
                "query": {"bool": {"filter": scope.filters() + compile_filters(filters)}},
                "sort": [{UID_FIELD: {"order": "asc"}}],
                "_source": {"excludes": HEAVY_FIELDS},
                "track_total_hits": False,
                "seq_no_primary_term": True,
            }
            for _ in range(DELETE_PASSES):
                try:
                    with activity("refreshing"):  # bounded like the read it comes before
                        self.engine.refresh(self.alias(scope, k), self.engine.read_timeout)
                except EngineUnavailable as exc:
                    if not index_missing(exc):
                        raise
                    break  # a kind whose index does not exist yet has nothing to delete
                found = False
                page = body
                while True:
                    hits = self._live_page(self.alias(scope, k), page, scope)
                    if hits:
                        found = True
                        yield [Stored.listed(k, h) for h in hits]
                    if len(hits) < DELETE_PAGE:
                        break
                    page = body | {"search_after": hits[-1]["sort"]}
                if not found:
                    break

    def _forget_history(
        self, scope: Scope, kind: MemoryKind | None, uids: Sequence[str] | None
    ) -> None:
        """Strip the texts from the scope's history: of one kind when ``kind`` is given, of
        only these memories (engine ids) when ``uids`` is given. The FORGET entries stay."""
        if uids is not None and not uids:
            return
        scoped = scope.filters()
        if kind is not None:
            scoped.append({"term": {"kind": checked_kind(kind)}})
        batches: list[list[dict[str, Any]]] = (
            [[]]
            if uids is None
            else [
                [{"terms": {"uid": list(uids[i : i + FORGET_IDS])}}]
                for i in range(0, len(uids), FORGET_IDS)
            ]
        )
        with activity("refreshing"):
            history.refresh(self.engine)
        with activity("forgetting history"):
            for ids in batches:
                keep = [{"term": {"event": "FORGET"}}]
                body = {"query": {"bool": {"filter": scoped + ids, "must_not": keep}}}
                self.engine.delete_by_query(history_alias(self.prefix), body)


def index_missing(exc: BaseException) -> bool:
    """A translated engine error that says the index does not exist (a fresh prefix whose
    first write created only its own kind's index)."""
    return "index_not_found" in str(exc)


def to_memories(rows: Sequence[tuple[MemoryKind, dict[str, Any]]]) -> list[Memory]:
    from kemem_es.store.documents import to_memory

    return [to_memory(src, kind) for kind, src in rows]


def page_of(rows: Sequence[tuple[MemoryKind, dict[str, Any]]], cursor: str | None) -> MemoryPage:
    return MemoryPage(results=to_memories(rows), next_cursor=cursor)
