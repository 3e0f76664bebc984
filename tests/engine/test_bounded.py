"""Engine down or hung: a query fails with a KememError within its deadline, never a raw client
error after minutes of retries (real engine behind a loopback proxy that can hang or die)."""

from __future__ import annotations

import time

import pytest
from support import free_port
from test_import_safety import Proxy

from kemem_es import Kemem
from kemem_es.errors import EngineUnavailable

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u1"}


def test_hung_or_stopped_engine_is_a_kemem_error_within_the_deadline(kemem) -> None:
    kemem.init()
    kemem.index_records(
        [{**A, "id": "x", "description": "木木吃了火锅", "created_at": "2025-01-01"}], "events"
    )
    proxy = Proxy(int(kemem.settings.url.rsplit(":", 1)[1]))
    settings = kemem.settings.model_copy(
        update={"es_url": f"http://127.0.0.1:{proxy.port}", "query_timeout_s": 1.0}
    )
    km = Kemem(settings)
    km.embedder = kemem.embedder
    try:
        # warm: it works (no recall queued: its flush would find the proxy gone at exit)
        assert km.query("火锅", **A, score_threshold=0, reinforce=False).memory_events

        proxy.hung = True
        t0 = time.monotonic()
        with pytest.raises(EngineUnavailable, match="searching"):
            km.query("火锅", **A)
        assert time.monotonic() - t0 < 4  # 1 s deadline, no retry on a timeout

        proxy.close()  # now nothing listens: connection refused
        t0 = time.monotonic()
        with pytest.raises(EngineUnavailable):
            km.query("火锅", **A)
        assert time.monotonic() - t0 < 4
    finally:
        proxy.close()


def test_history_scope_delete_and_statistics_fail_within_the_query_deadline(kemem) -> None:
    """On a hung engine the Memory API failed within the query deadline but for three calls,
    which waited for the 30 s write timeout: a history read (its refresh of the history
    index), a confirmed scope delete (its refresh) and the dashboard's statistics (the
    cluster's health)."""
    kemem.init()
    proxy = Proxy(int(kemem.settings.url.rsplit(":", 1)[1]), port=free_port())
    settings = kemem.settings.model_copy(
        update={"es_url": f"http://127.0.0.1:{proxy.port}", "query_timeout_s": 1.0}
    )
    km = Kemem(settings)
    km.embedder = kemem.embedder
    try:
        added = km.add("木木吃了火锅", **A, dedup=False, refresh=True)[0]
        km.flush()  # the user's activity, written now: nothing left for the flusher
        assert [e.event for e in km.history(added.id, **A)] == ["ADD"]
        km.update(added.id, "木木和小满吃了火锅", **A)  # history written: a read refreshes
        assert km.stats().total == 1

        proxy.hung = True
        calls = {
            "history": lambda: km.history(added.id, **A),
            "delete_all": lambda: km.delete_all(**A),
            "stats": km.stats,
        }
        for name, call in calls.items():
            t0 = time.monotonic()
            with pytest.raises(EngineUnavailable):
                call()
            assert time.monotonic() - t0 < 4, name
    finally:
        proxy.close()
