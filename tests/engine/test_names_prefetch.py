"""An import of many users' records reads their names (store/names.py) in one round trip, and
the names read so are those each scope's own read gives."""

from __future__ import annotations

import pytest

from kemem_es.store.scope import Scope

pytestmark = pytest.mark.engine

USERS = [f"nu{i:02d}" for i in range(12)]


def event(user: str, i: int) -> dict:
    return {"id": f"{user}-e{i}", "agent_id": "names-a", "user_id": user, "user_name": "木木",
            "description": "和豆包一起去公园散步", "created_at": "2025-05-01 10:00:00"}  # fmt: skip


def test_an_import_of_many_users_reads_their_names_in_one_round_trip(kemem) -> None:
    from kemem_es import Kemem

    pet = {"agent_id": "names-a", "user_id": USERS[3], "entity_name": "豆包",
           "kind": "特殊实体属性", "entity_type": "具体实体", "description": "豆包是用户养的猫",
           "updatetime": "2025-01-01"}  # fmt: skip
    kemem.index_records([pet], kind="entities")
    km = Kemem(kemem.settings)  # a process that knows no scope's names yet
    try:
        paths: list[str] = []
        km.engine.hook = lambda req, answer, secs: paths.append(req.path)
        km.index_records([event(u, 0) for u in USERS], kind="events")
        assert sum(p.endswith("/_msearch") for p in paths) == 1  # the names of all 13 scopes
        assert not [p for p in paths if p.endswith("/_search")]  # none read one by one
        for user in USERS:
            scope = Scope.of(agent_id="names-a", user_id=user)
            assert km.names.of(scope) == km.names._read(scope)
        assert "豆包" in km.names.of(Scope.of(agent_id="names-a", user_id=USERS[3])).words
    finally:
        km.close()
