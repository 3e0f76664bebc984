"""Each scope's names: its user's and agent's, and its concrete entities'.

jieba keeps a name whole only in the texts of the scope it belongs to (``Tokenizer.scoped``),
at index and at query time alike, so another tenant's names never change how this tenant's
words are cut. The names come from the memories themselves (one small aggregation per scope,
remembered for ``NAMES_TTL_S``), plus what this process has just written (``note``), which the
engine's search may not see yet. Only a scope's first query waits for its aggregation: once
known, a scope's names are read again in the background when they are older than the TTL, and
queries use the names known until then (the aggregation over an agent's official memories,
shared by all its users, grows with them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kemem_es.bounded import Bounded
from kemem_es.engine.client import Engine, Search
from kemem_es.errors import KememError
from kemem_es.models import EntityRecord, MemoryRecord
from kemem_es.store.layout import index_alias
from kemem_es.store.scope import Scope
from kemem_es.text.tokenizer import name_word, normalize

log = logging.getLogger(__name__)

NAMES_TTL_S = 300.0  # another process's new names are seen within this (and a read's time)
REFRESHERS = 2  # background reads of expired names at once
MAX_SCOPES = 10_000  # scopes remembered; the least recently used go beyond
ENTITY_NAMES = 2_000  # a scope's most frequent entity names
GENERIC = "泛化实体"  # generic entities (a kind of thing, not a name) are not names


@dataclass(frozen=True)
class Names:
    """``words``: every name, kept whole by the tokenizer. ``persons``: the user's and agent's
    own names, which are never search words (every memory of the scope is about them)."""

    words: frozenset[str] = frozenset()
    persons: frozenset[str] = frozenset()

    def __or__(self, other: Names) -> Names:
        """The same object when one side adds nothing: the tokenizer's views are keyed by it."""
        if other.words <= self.words and other.persons <= self.persons:
            return self
        if self.words <= other.words and self.persons <= other.persons:
            return other
        return Names(self.words | other.words, self.persons | other.persons)


NO_NAMES = Names()


def _normal(values: Iterable[str | None]) -> frozenset[str]:
    return frozenset(n for n in (normalize(v).strip() for v in values if v) if n)


def _names(persons: Iterable[str | None], entities: Iterable[str | None]) -> Names:
    """Every person name is left out of the search words (Grace too); only names a dictionary
    could hold are joined (``name_word``: a latin word is a whole token anyway)."""
    who, what = _normal(persons), _normal(entities)
    return Names(frozenset(n for n in who | what if name_word(n)), who)


def record_names(records: Sequence[MemoryRecord]) -> Names:
    """The names records carry: user, agent and (concrete) entity names."""
    return _names(
        (n for r in records for n in (r.user_name, r.agent_name)),
        (
            r.entity_name
            for r in records
            if isinstance(r, EntityRecord) and r.entity_type != GENERIC
        ),
    )


class ScopeNames:
    """Names per scope, cached. Thread-safe; one instance is shared by a ``Kemem``'s writer and
    searcher, so a name written is a name queried at once."""

    def __init__(self, engine: Engine, ttl_s: float = NAMES_TTL_S) -> None:
        self.engine = engine
        self.ttl_s = ttl_s
        self._cache: Bounded[Scope, tuple[float, Names]] = Bounded(MAX_SCOPES)
        self._joined: Bounded[Scope, tuple[Names, Names, Names]] = Bounded(MAX_SCOPES)
        self._noted: dict[Scope, Names] = {}  # noted while a background read is under way
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def of(self, scope: Scope) -> Names:
        """One scope's names (a user's memories, or an agent's official ones). Read now only
        the first time; expired ones are returned while a background read renews them."""
        cached = self._cache.get(scope)
        if cached is None:
            names = self._read(scope)
            self._store(scope, names)
            return names
        if time.monotonic() - cached[0] >= self.ttl_s:
            self._renew(scope)
        return cached[1]

    def _store(self, scope: Scope, names: Names) -> None:
        with self._lock:  # with what ``note`` added meanwhile
            self._cache.put(scope, (time.monotonic(), names | self._noted.pop(scope, NO_NAMES)))

    def _renew(self, scope: Scope) -> None:
        """One background read per scope at a time; a failed one keeps the names known (and is
        tried again by the next query after the TTL)."""
        with self._lock:
            if self._closed or scope in self._noted:
                return
            self._noted[scope] = NO_NAMES
            if self._pool is None:
                self._pool = ThreadPoolExecutor(REFRESHERS, thread_name_prefix="kemem-names")
            pool = self._pool
        pool.submit(self._renewal, scope)

    def _renewal(self, scope: Scope) -> None:
        try:
            names = self._read(scope)
        except Exception as exc:  # the names known stay in use; the reason is logged
            log.warning("renewing a scope's names failed (%s); the names known stay", exc)
            with self._lock:
                cached = self._cache.get(scope)
                if cached is not None:  # retried after another TTL, not by every query
                    self._cache.put(
                        scope, (time.monotonic(), cached[1] | self._noted.get(scope, NO_NAMES))
                    )
                self._noted.pop(scope, None)
            return
        self._store(scope, names)

    def close(self) -> None:
        """Stop renewing (reads under way finish on their own)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def visible(self, scope: Scope) -> Names:
        """The names a scope's texts are cut with: a user's own plus the agent's official
        ones (what a chat query reads, ``query_scopes``); the official db, its own only."""
        official = Scope("official", scope.agent_id)  # the agent id is checked already
        if scope == official:
            return self.of(official)
        own, shared = self.of(scope), self.of(official)
        joined = self._joined.get(scope)
        if joined is None or joined[0] is not own or joined[1] is not shared:
            # one object while its parts are unchanged: the tokenizer's views are keyed by it
            joined = (own, shared, own | shared)
            self._joined.put(scope, joined)
        return joined[2]

    def note(self, scope: Scope, records: Sequence[MemoryRecord]) -> None:
        """Names this process writes, known before the engine's search sees them."""
        new = record_names(records)
        if not (new.words or new.persons):
            return
        with self._lock:
            cached = self._cache.get(scope)
            if cached is not None:
                self._cache.put(scope, (cached[0], cached[1] | new))
            if scope in self._noted:  # a background read may not see them: kept for its result
                self._noted[scope] |= new

    def prefetch(self, scopes: Iterable[Scope]) -> None:
        """The names of the scopes not known yet (and of their agents' official memories),
        read in one round trip: an import of many users' records waits for one read, not one
        a user. A scope whose read fails stays unknown: ``of`` reads it (and says why)."""
        wanted: dict[Scope, None] = {}
        for scope in scopes:
            wanted[scope] = None
            wanted[Scope("official", scope.agent_id)] = None
        missing = [s for s in wanted if s not in self._cache]
        if len(missing) < 2:  # one read either way
            return
        searches: list[Search] = [(*self._search(s), s.routing, True) for s in missing]
        try:
            responses = self.engine.msearch(searches)
        except KememError as exc:  # each is read on its own then (``of``)
            log.debug("reading the names of %d scopes at once failed (%s)", len(missing), exc)
            return
        for scope, resp in zip(missing, responses, strict=True):
            if "error" not in resp:
                self._store(scope, _parsed(resp))

    def _search(self, scope: Scope) -> tuple[str, dict[str, Any]]:
        """The indices and the aggregation that read one scope's names."""
        prefix = self.engine.settings.index_prefix
        indices = ",".join(index_alias(prefix, scope.db, k) for k in ("events", "entities"))
        body = {
            "size": 0,
            "query": {"bool": {"filter": scope.filters()}},
            "aggs": {
                "user_name": {"terms": {"field": "user_name", "size": 10}},
                "agent_name": {"terms": {"field": "agent_name", "size": 10}},
                "entities": {
                    "filter": {"bool": {"must_not": [{"term": {"entity_type": GENERIC}}]}},
                    "aggs": {"name": {"terms": {"field": "entity_name", "size": ENTITY_NAMES}}},
                },
            },
        }
        return indices, body

    def _read(self, scope: Scope) -> Names:
        indices, body = self._search(scope)
        resp = self.engine.search(indices, body, ignore_unavailable=True, routing=scope.routing)
        return _parsed(resp)


def _parsed(resp: dict[str, Any]) -> Names:
    """The names of a names aggregation's answer."""
    aggs = resp.get("aggregations", {})

    def keys(agg: dict[str, Any] | None) -> list[str]:
        return [b["key"] for b in (agg or {}).get("buckets", [])]

    persons = [*keys(aggs.get("user_name")), *keys(aggs.get("agent_name"))]
    return _names(persons, keys(aggs.get("entities", {}).get("name")))
