"""A large load pauses its indices' periodic refresh, and gives each its own setting back."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from kemem_es.engine.client import Engine

_paused: Counter[str] = Counter()  # index → large loads of this process in progress on it
_saved: dict[str, Any] = {}  # index → its refresh_interval before the first of them
_pause_lock = threading.Lock()


def _put_refresh_interval(engine: Engine, index: str, value: str | None) -> None:
    engine.put_settings(index, {"index": {"refresh_interval": value}})


def _refresh_interval(engine: Engine, index: str) -> str | None:
    """The index's own refresh_interval, or None where it keeps the default. A ``-1`` found
    before this process pauses the index is another load's pause — one killed before it could
    give the setting back, or one still running elsewhere — never the index's own: kept, it
    would be "restored" after every later load and the index would stop refreshing for good."""
    resp = engine.get_settings(index, "index.refresh_interval")
    found: dict[str, Any] = next(iter(resp.values()), {})
    value = found.get("settings", {}).get("index", {}).get("refresh_interval")
    return None if str(value) == "-1" else value


@contextlib.contextmanager
def refresh_paused(engine: Engine, aliases: Sequence[str], pause: bool = True) -> Iterator[None]:
    """Periodic refresh off (``refresh_interval: -1``) for the duration of a large load, then the
    index's own setting back (``None``: the default), even when the load fails. Nested and
    concurrent loads in this process share one pause: the last to finish restores."""
    if not pause:
        yield
        return
    names: list[str] = []
    for alias in aliases:
        names += sorted(engine.get_index(alias))  # the concrete index (settings live there)
    with _pause_lock:
        for name in names:
            if _paused[name] == 0:
                _saved[name] = _refresh_interval(engine, name)
                _put_refresh_interval(engine, name, "-1")
            _paused[name] += 1
    try:
        yield
    finally:
        with _pause_lock:
            for name in names:
                _paused[name] -= 1
                if _paused[name] == 0:
                    del _paused[name]
                    _put_refresh_interval(engine, name, _saved.pop(name, None))
