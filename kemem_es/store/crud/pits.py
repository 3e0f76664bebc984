"""The points in time this process holds open for listings (a cluster-wide engine limit)."""

from __future__ import annotations

import threading
import time

# A listing's point in time lives this long after each page: time to ask for the next one, not
# much more, since a listing nobody finishes holds its engine context until then. A cursor used
# later goes on from the live indices (see ``Crud.page``).
PIT_KEEP_ALIVE_S = 120
# Points in time this process holds open at once; beyond it a listing pages the live indices.
# The engine's limit is cluster-wide (OpenSearch's search.max_open_pit_context: 300), shared
# with every other process and application: abandoned listings must not use it up.
PIT_MAX_OPEN = 32


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


def keep_alive() -> str:
    return f"{PIT_KEEP_ALIVE_S}s"
