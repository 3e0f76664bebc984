"""One bounded map for the process's in-memory caches.

The package keeps several caches across requests (a query's scopes, a scope's names and its
tokenizer view, words' tokens and vectors, turn vectors, a session's held turns, the proxy's
chains). Each is bounded, so that a long-lived server with many tenants holds at most so many
entries; :class:`Bounded` is the one place that bound and its eviction are written.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """A map of at most ``size`` entries; a new key in a full map drops the least recently used
    one (a ``get`` hit or a ``put`` counts as a use; ``peek``, ``key in`` and ``missing`` do not).

    Thread-safe. Writes (``put``, ``update``, ``setdefault``, ``pop``, ``clear``) and going
    through the keys take the map's lock, so the map never holds more than ``size`` entries,
    even for a moment. Reads take no lock (one made a read about three times as slow): ``get``
    is one dict read and one move to the end of the order, each a single C call that the GIL
    keeps whole; a read racing a write sees the map before or after it, and a hit that another
    thread evicts meanwhile is still returned (the caller holds its value). ``peek`` is the
    plain dict read itself (no Python frame: as cheap as a dict's ``get``), for lookups made
    dozens of times a query whose misses are cheap to make good (``Scope.of``, a word's tokens,
    a tokenizer view): a map read only through ``peek`` drops the entry put first.

    Values are never None: ``get`` and ``peek`` answer None for a miss.
    """

    __slots__ = ("_data", "_lock", "peek", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a bounded map holds at least one entry, not {size}")
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        # the value of a key or None, not counted as a use: the dict's own read (a C call, no
        # Python frame), for the hottest lookups whose misses are cheap to make good
        self.peek: Callable[[K], V | None] = self._data.get

    def get(self, key: K) -> V | None:
        """The value of ``key``, now the most recently used; None when it is not held."""
        data = self._data
        value = data.get(key)
        if value is not None:
            try:  # noqa: SIM105 (contextlib.suppress: a context manager per hit)
                data.move_to_end(key)
            except KeyError:  # evicted by another thread since: the value read stands
                pass
        return value

    def put(self, key: K, value: V) -> None:
        """Hold ``value`` for ``key`` as the most recently used, dropping the least recently
        used entry first when ``key`` is new and the map is full."""
        with self._lock:
            self._insert(key, value)

    def update(self, items: Iterable[tuple[K, V]]) -> None:
        """``put`` of each pair, under one lock (many entries at a time)."""
        pairs = list(items)  # read before the lock: a generator may read this map
        with self._lock:
            for key, value in pairs:
                self._insert(key, value)

    def setdefault(self, key: K, value: V) -> V:
        """The value held for ``key`` (now the most recently used), else ``value``, put."""
        with self._lock:
            held = self._data.get(key)
            if held is not None:
                self._data.move_to_end(key)
                return held
            self._insert(key, value)
            return value

    def _insert(self, key: K, value: V) -> None:
        data = self._data
        if key in data:
            data.move_to_end(key)
        elif len(data) >= self.size:
            data.popitem(last=False)  # the least recently used
        data[key] = value

    def pop(self, key: K) -> V | None:
        """Drop ``key``; its value, or None when it was not held."""
        with self._lock:
            return self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __iter__(self) -> Iterator[K]:
        """The keys held now, least recently used first (a copy: entries may be dropped while
        going through them)."""
        with self._lock:
            return iter(list(self._data))

    def missing(self, keys: AbstractSet[K]) -> list[K]:
        """Those of ``keys`` not held (no recency change): none after one subset test in C when
        all are held."""
        data = self._data
        if keys <= data.keys():
            return []
        return [key for key in keys if key not in data]

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data
