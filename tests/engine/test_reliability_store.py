"""Reliability round 3 (issue 40) against the engine: a fresh prefix without ``init`` (item 6),
read-your-own-writes (item 7), type laxness (item 9)."""

from __future__ import annotations

import pytest

from kemem_es.errors import InvalidInput

pytestmark = pytest.mark.engine

A = {"agent_id": "qiyu", "user_id": "u_mumu"}


def test_a_fresh_prefix_without_init_lists_what_was_added(kemem) -> None:
    kemem.add("木木养了一只叫豆包的柯基", **A)  # creates the events index only
    page = kemem.get_all(**A)  # over both kinds: the entities index does not exist yet
    assert [m.text for m in page.results] == ["木木养了一只叫豆包的柯基"]
    assert kemem.count(**A) == 1
    assert kemem.get_all(**A, kind="entities").results == []
    assert kemem.count(**A, kind="entities") == 0
    assert kemem.delete_all(**A) == 1
    assert kemem.get_all(**A).results == []


def test_the_same_client_reads_its_own_writes_without_refresh(kemem) -> None:
    kemem.init()
    added = kemem.add("小满周末要去杭州西湖划船", **A)  # no refresh=True
    page = kemem.get_all(**A)
    assert [m.id for m in page.results] == [added[0].id]
    assert kemem.count(**A) == 1
    hits = kemem.search("小满周末去哪里划船", **A, reinforce=False)
    assert added[0].memory.text in [e.description for e in hits.memory_events]
    kemem.delete(added[0].id, **A)
    assert kemem.get_all(**A).results == []
    assert kemem.count(**A) == 0


def test_a_read_of_another_scope_pays_no_refresh(kemem) -> None:
    kemem.init()
    kemem.add("小满周末要去杭州西湖划船", **A)
    calls: list[str] = []
    real = kemem.engine.refresh
    kemem.engine.refresh = lambda index, *a, **kw: (calls.append(index), real(index, *a, **kw))[1]
    try:
        kemem.get_all(agent_id="qiyu", user_id="someone_else")
        assert calls == []
        kemem.get_all(**A)
        kemem.get_all(**A)  # refreshed once: the second read pays nothing
        assert len(calls) == 1
    finally:
        kemem.engine.refresh = real


def test_a_filter_with_the_wrong_type_is_refused(kemem) -> None:
    kemem.init()
    for bad in ({"kind": {"ne": 1}}, {"kind": 1}, {"kind": {"in": [1, "events"]}}):
        with pytest.raises(InvalidInput):
            kemem.get_all(**A, filters=bad)


@pytest.mark.parametrize("user_id", [" u_mumu", "u_mumu ", "\tu_mumu", " "])
def test_user_ids_with_surrounding_spaces_are_refused_not_stripped(kemem, user_id) -> None:
    kemem.init()
    kemem.add("木木养了一只叫豆包的柯基", **A, refresh=True)
    with pytest.raises(InvalidInput) as info:
        kemem.get_all(agent_id="qiyu", user_id=user_id)
    assert info.value.field == "user_id"
    with pytest.raises(InvalidInput):
        kemem.add("x", agent_id="qiyu", user_id=user_id)
