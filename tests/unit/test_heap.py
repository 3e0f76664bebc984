"""server.heap: the warmed heap frozen out of the collector's walks, the young threshold set
(tests/conftest.py undoes both after each test)."""

from __future__ import annotations

import gc

import pytest

from kemem_es.config import Settings
from kemem_es.server import heap


def test_settle_freezes_what_is_alive_and_sets_the_young_threshold() -> None:
    kept = [{"turn": i} for i in range(1000)]  # alive at warm-up: frozen
    gc.unfreeze()
    _, gen1, gen2 = gc.get_threshold()
    heap.settle(25_000)
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (25_000, gen1, gen2)
    # a full collection no longer walks the frozen objects, and still frees new garbage
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_settle_without_gen0_keeps_the_thresholds() -> None:
    before = gc.get_threshold()
    heap.settle(0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() > 0


def test_the_settings_default_to_a_frozen_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().server_gc_freeze is True
    monkeypatch.setenv("KEMEM_SERVER_GC_FREEZE", "false")
    monkeypatch.setenv("KEMEM_SERVER_GC_GEN0", "5000")
    s = Settings()
    assert (s.server_gc_freeze, s.server_gc_gen0) == (False, 5000)
    monkeypatch.setenv("KEMEM_SERVER_GC_GEN0", "-1")
    with pytest.raises(ValueError, match="server_gc_gen0"):
        Settings()


def test_the_server_settles_its_heap_after_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from kemem_es.server.app import create_app

    monkeypatch.setenv("KEMEM_ES_URL", "http://127.0.0.1:9")  # nothing listens: warm-up fails
    gc.unfreeze()
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == 20_000
    gc.unfreeze()
    monkeypatch.setenv("KEMEM_SERVER_GC_FREEZE", "false")
    before = gc.get_threshold()
    with TestClient(create_app(), base_url="http://127.0.0.1"):
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == before
