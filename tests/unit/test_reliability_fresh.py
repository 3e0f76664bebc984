"""Read-your-own-writes bookkeeping (store/fresh.py), without an engine: a read refreshes only
the aliases this process wrote to, in the scopes read, since its last refresh of them."""

from __future__ import annotations

from typing import Any

from kemem_es.store import fresh


class FakeEngine:
    def __init__(self, url: str) -> None:
        self.url = url
        self.refreshed: list[str] = []

    def refresh(self, index: str, timeout_s: Any = None) -> None:
        self.refreshed.append(index)


def test_a_read_refreshes_once_what_this_process_wrote_in_that_scope() -> None:
    engine: Any = FakeEngine("http://fresh-test-1")
    fresh.before_read(engine, [("p-user-events", "r1")])
    assert engine.refreshed == []  # nothing written: nothing to pay
    fresh.written(engine, "p-user-events", "r1")
    fresh.before_read(engine, [("p-user-events", "r2"), ("p-user-entities", "r1")])
    assert engine.refreshed == []  # another scope, another kind
    fresh.before_read(engine, [("p-user-events", "r1"), ("p-user-entities", "r1")])
    assert engine.refreshed == ["p-user-events"]
    fresh.before_read(engine, [("p-user-events", "r1")])
    assert engine.refreshed == ["p-user-events"]  # refreshed since the write: paid once
    fresh.written(engine, "p-user-events", "r1")
    fresh.before_read(engine, [("p-user-events", "r1")])
    assert engine.refreshed == ["p-user-events"] * 2


def test_a_failed_refresh_is_not_the_reads_failure() -> None:
    class Down(FakeEngine):
        def refresh(self, index: str, timeout_s: Any = None) -> None:
            raise ConnectionError("down")

    engine: Any = Down("http://fresh-test-2")
    fresh.written(engine, "p-user-events", "r1")
    fresh.before_read(engine, [("p-user-events", "r1")])  # does not raise
    assert fresh.stale(engine, [("p-user-events", "r1")]) == ["p-user-events"]  # still owed
