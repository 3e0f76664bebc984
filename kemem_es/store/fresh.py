"""Read-your-own-writes: a read of a scope this process wrote to since the index's last refresh
refreshes that index first, so ``add`` then ``get_all`` / ``count`` / ``search`` from the same
process lists the new memory (``get`` by id is real time already).

Why not ``refresh="wait_for"`` on every add: it waits for the index's next scheduled refresh
(about a second: 0.9 s more per add, measured, see docs/consistency.md), and a chat turn adds
on every message. Why not a client-side overlay of recent writes merged into listings and
searches: filters, sort order and scoring would have to be re-implemented outside the engine.
So the refresh is paid once per read that follows writes of the same scope, never per add, and
reads of scopes this process did not just write pay nothing. A refresh that fails here is not
the read's failure: the read goes on and may not show the newest write (the engine's own
refresh follows within a second).

Writes older than ``WINDOW_S`` are visible through the engine's scheduled refresh (a second by
default; a search-idle shard refreshes on its next search) and are forgotten.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kemem_es.engine.client import Engine

log = logging.getLogger(__name__)

WINDOW_S = 5.0
MAX_TRACKED = 10_000

_lock = threading.Lock()
# (cluster, alias, routing) → when this process last wrote there (monotonic)
_written: dict[tuple[str, str, str | None], float] = {}
# (cluster, alias) → when this process last started a refresh of it (monotonic)
_refreshed: dict[tuple[str, str], float] = {}


def written(engine: Engine, alias: str, routing: str | None) -> None:
    """Note a write to ``alias`` in the scope of ``routing`` (after it was sent)."""
    now = time.monotonic()
    with _lock:
        if len(_written) >= MAX_TRACKED:
            for key in [k for k, t in _written.items() if now - t > WINDOW_S]:
                del _written[key]
        if len(_written) < MAX_TRACKED:
            _written[(engine.url, alias, routing)] = now


def stale(engine: Engine, reads: Iterable[tuple[str, str | None]]) -> list[str]:
    """The aliases among ``reads`` ((alias, routing) pairs) this process wrote to, in those
    scopes, since its last refresh of them and within ``WINDOW_S``."""
    now = time.monotonic()
    out: list[str] = []
    with _lock:
        for alias, routing in reads:
            at = _written.get((engine.url, alias, routing))
            if at is None or now - at > WINDOW_S:
                continue
            if _refreshed.get((engine.url, alias), -1.0) < at and alias not in out:
                out.append(alias)
    return out


def before_read(
    engine: Engine, reads: Iterable[tuple[str, str | None]], timeout_s: float | None = None
) -> None:
    """Refresh what ``reads`` would miss of this process's own writes (see the module)."""
    aliases = stale(engine, reads)
    if not aliases:
        return
    started = time.monotonic()  # writes after this moment may not be in the refresh
    try:
        engine.refresh(",".join(aliases), timeout_s)
    except Exception as exc:
        log.debug("refresh before a read failed: %s", type(exc).__name__)
        return
    with _lock:
        for alias in aliases:
            _refreshed[(engine.url, alias)] = started
