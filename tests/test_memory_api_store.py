"""The store's edges on the real engine: metadata replaced by an update."""

from __future__ import annotations

import pytest

from kemem_es.store import history
from kemem_es.store.crud import ConcurrentChange
from kemem_es.store.scope import Scope

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_a"}


def _event(i: int, **extra: object) -> dict:
    return {
        "id": f"m{i}",
        "description": f"第{i}件事：木木在画廊加班到很晚",
        "created_at": f"2025-01-{(i % 28) + 1:02d} 10:00:00",
        **extra,
    }


def _ids(km, filters: dict) -> set[str]:
    return {m.id for m in km.get_all(**A, filters=filters).results}


def test_update_replaces_metadata_and_keeps_the_vector(kemem) -> None:
    kemem.init()
    kemem.index_records([{**A, **_event(1, metadata={"mood": "happy", "n": 3})}], "events")
    res = kemem.update("m1", {"metadata": {"n": 4}}, **A, refresh=True)
    assert res.memory.metadata == {"n": 4}
    assert kemem.get("m1", **A).metadata == {"n": 4}  # stored as returned: no "mood" left
    assert _ids(kemem, {"metadata.mood": {"exists": True}}) == set()
    assert _ids(kemem, {"metadata.n": 4}) == {"m1"}
    # A text-free update kept the vector: the memory is still found by meaning.
    resp = kemem.search("画廊加班", **A, threshold=0, limit=3)
    assert [e.index for e in resp.memory_events] == ["m1"]

    kemem.update("m1", {"metadata": {}}, **A, refresh=True)
    assert kemem.get("m1", **A).metadata == {}
    assert _ids(kemem, {"metadata.n": {"exists": True}}) == set()


def test_a_patch_of_a_stale_version_is_refused(kemem) -> None:
    """Optimistic concurrency survives the scripted update: a version read before another
    write is a conflict, not a silent overwrite."""
    kemem.init()
    kemem.index_records([{**A, **_event(1)}], "events")
    scope = Scope.of(**A)
    stale = kemem.memories.crud.fetch(scope, "m1")
    kemem.update("m1", {"place": "家"}, **A)
    entry = history.entry(scope, "m1", "events", "UPDATE", "api")
    with pytest.raises(ConcurrentChange):
        kemem.memories.crud.patch(scope, stale, {"place": "公司"}, entry, refresh=False)
    assert kemem.get("m1", **A).place == "家"
