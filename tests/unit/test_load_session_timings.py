"""bench.load's session workload: the contexts' timings (a session's first context apart, the
slowest with their stages, what was waited outside the context) and --stagger."""

from __future__ import annotations

from types import SimpleNamespace

from bench.load import Tally, start_delay


def test_slow_contexts_split_the_first_turn_and_name_the_slowest() -> None:
    t = Tally(("context",))
    t.context(900.0, {"session": 10.0, "recall": 300.0, "total": 350.0}, 1)
    for i in range(9):
        t.context(100.0 + i, {"session": 5.0, "recall": 60.0, "total": 90.0}, 2 + i)
    out = t.slow_contexts()
    assert out["context_first_ms"]["n"] == 1 and out["context_first_ms"]["max"] == 900.0
    assert out["context_later_ms"]["n"] == 9 and out["context_later_ms"]["max"] == 108.0
    slowest = out["context_slowest"]
    assert len(slowest) == 5 and slowest[0]["turn"] == 1 and slowest[0]["outside_ms"] == 550.0
    assert out["context_stages_ms"]["recall"]["max"] == 300.0


def test_no_contexts_no_timings() -> None:
    assert Tally(("query",)).slow_contexts() == {}


def test_stagger_spreads_the_first_requests_over_a_clients_cycle() -> None:
    args = SimpleNamespace(stagger=True, think_ms=1000.0, clients=8, workload="classic")
    assert [start_delay(args, i) for i in (0, 4, 7)] == [0.0, 0.5, 0.875]
    args.workload = "session"  # a turn: two requests, each followed by a think time
    assert [start_delay(args, i) for i in (0, 4, 7)] == [0.0, 1.0, 1.75]
    assert start_delay(SimpleNamespace(stagger=False, think_ms=1000.0, clients=8), 3) == 0.0
    assert start_delay(SimpleNamespace(stagger=True, think_ms=0.0, clients=8), 3) == 0.0
