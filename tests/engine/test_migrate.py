"""Indices written with global ids (template version 1) are refused, then migrated."""

from __future__ import annotations

import copy

import pytest

from kemem_es.errors import MappingConflict, NotFound
from kemem_es.store.layout import index_alias
from kemem_es.store.migrate import migrate
from kemem_es.store.templates import index_body

pytestmark = pytest.mark.engine


def _v1_index(kemem, db: str, kind: str) -> str:
    """An index as version 1 wrote it: no uid / meta fields, _meta version 1, global ids."""
    body = copy.deepcopy(index_body(kind, kemem.engine.dialect.name, kemem.embedder.dim))
    props = body["mappings"]["properties"]
    props.pop("uid")
    props.pop("meta")
    body["mappings"]["_meta"]["kemem_template_version"] = 1
    del body["mappings"]["_meta"]["kemem_routing"], body["mappings"]["_routing"]
    alias = index_alias(kemem.settings.index_prefix, db, kind)
    kemem.engine.create_index(f"{alias}-v1", {**body, "aliases": {alias: {}}})
    return alias


def test_v1_is_refused_then_migrated_to_scoped_ids(kemem) -> None:
    for db in ("user", "official"):
        for kind in ("events", "entities"):
            _v1_index(kemem, db, kind)
    vec = [0.5] * kemem.embedder.dim
    t = "2024-01-01T10:00:00"
    doc = {"agent_id": "qiyu", "description": "旧的记忆", "created_at": t, "event_time": t,
           "vector": vec, "metadata": {"mood": "ok"}}  # fmt: skip
    user_alias = index_alias(kemem.settings.index_prefix, "user", "events")
    off_alias = index_alias(kemem.settings.index_prefix, "official", "events")
    lines = [
        {"index": {"_index": user_alias, "_id": "m1"}},
        {**doc, "id": "m1", "db": "user", "user_id": "u1"},
        {"index": {"_index": off_alias, "_id": "o1"}},
        {**doc, "id": "o1", "db": "official"},
        {"index": {"_index": off_alias, "_id": "bad"}},
        {**doc, "id": "bad", "db": "official", "user_id": "u1"},  # broke the scope rule
    ]
    kemem.engine.bulk(lines, refresh=True)

    with pytest.raises(MappingConflict, match="kemem-es migrate"):
        kemem.add("新的", user_id="u1", agent_id="qiyu")
    with pytest.raises(MappingConflict, match="kemem-es migrate"):
        kemem.init()

    reports = {r.alias: r for r in migrate(kemem.engine, kemem.embedder.dim)}
    assert reports[user_alias].copied == 1
    assert reports[off_alias].copied == 1 and len(reports[off_alias].skipped) == 1
    assert kemem.get("m1", user_id="u1", agent_id="qiyu").text == "旧的记忆"
    assert kemem.get("o1", agent_id="qiyu", db="official").text == "旧的记忆"
    with pytest.raises(NotFound):
        kemem.get("m1", user_id="u2", agent_id="qiyu")
    page = kemem.get_all(user_id="u1", agent_id="qiyu", filters={"metadata.mood": "ok"})
    assert [m.id for m in page.results] == ["m1"]
    body = {"query": {"match_all": {}}, "docvalue_fields": ["vector_code"]}
    (copied,) = kemem.engine.search(user_alias, body)["hits"]["hits"]
    assert copied["fields"]["vector_code"]  # the copy carries its vector's code
    assert {r.action for r in kemem.init()} == {"exists"}
    (added,) = kemem.add("新的", user_id="u1", agent_id="qiyu")
    assert added.event == "ADD"
    assert migrate(kemem.engine, kemem.embedder.dim) == []  # nothing left to migrate


def test_an_index_from_before_vector_codes_gets_them_in_place(kemem) -> None:
    """An events index of the current version but without ``vector_code`` (written by the
    release before it) is given the field when next written to, new memories carry their code,
    and `migrate` fills in the code of the memories stored before; nothing else changes."""
    from kemem_es.store import vector_code
    from kemem_es.store.layout import VECTOR_CODE_FIELD
    from kemem_es.store.migrate import fill_vector_codes, without_vector_codes
    from kemem_es.store.scope import Scope

    body = copy.deepcopy(index_body("events", kemem.engine.dialect.name, kemem.embedder.dim))
    body["mappings"]["properties"].pop(VECTOR_CODE_FIELD)
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    kemem.engine.create_index(f"{alias}-v2", {**body, "aliases": {alias: {}}})
    kemem.init()
    vec = kemem.embedder.embed(["旧的记忆：去年夏天在海边"])[0].astype(float).tolist()
    t = "2024-01-01T10:00:00"
    scope = Scope.of(agent_id="qiyu", user_id="u1", db="user")
    old = {"id": "m0", **scope.fields(), "uid": scope.doc_id("m0"),
           "description": "旧的记忆：去年夏天在海边", "created_at": t, "event_time": t,
           "vector": vec}  # fmt: skip
    meta = {"_index": alias, "_id": scope.doc_id("m0"), "routing": scope.routing}
    resp = kemem.engine.bulk([{"index": meta}, old], refresh=True)
    assert not resp["errors"]
    mapping = kemem.engine.get_index(alias)[f"{alias}-v2"]["mappings"]["properties"]
    assert mapping[VECTOR_CODE_FIELD]["type"] == "binary"  # init added it in place

    kemem.add("今天学会了做番茄炒蛋", user_id="u1", agent_id="qiyu", refresh=True)

    def codes() -> dict[str, str]:
        body = {"query": {"match_all": {}}, "docvalue_fields": [VECTOR_CODE_FIELD]}
        hits = kemem.engine.search(alias, body)["hits"]["hits"]
        return {h["_source"]["id"]: h.get("fields", {}).get(VECTOR_CODE_FIELD) for h in hits}

    before = codes()
    assert before["m0"] is None and sum(c is not None for c in before.values()) == 1
    # the operator is told by `init`, and `migrate` fills it in
    from test_indexing_engine import _cli, _cli_env

    proc = _cli("init", env=_cli_env(kemem))
    assert proc.returncode == 0, proc.stderr
    assert f"{alias}: 1 memory(ies) stored before vector codes existed" in proc.stdout
    proc = _cli("migrate", env=_cli_env(kemem))
    assert proc.returncode == 0, proc.stderr
    assert f"{alias}: 1 vector code(s) filled in" in proc.stdout
    assert without_vector_codes(kemem.engine) == {}
    assert "stored before vector codes" not in _cli("init", env=_cli_env(kemem)).stdout
    after = codes()
    assert float(vector_code.decode(after["m0"][0]) @ vec) == pytest.approx(1.0, abs=2e-3)
    assert fill_vector_codes(kemem.engine, kemem.embedder.dim) == []  # re-running: nothing
    assert kemem.get("m0", user_id="u1", agent_id="qiyu").text == "旧的记忆：去年夏天在海边"


def test_v1_memories_the_current_rules_refuse_are_listed_and_the_rest_stay_updatable(
    kemem,
) -> None:
    """Version 1 stored empty fields as "" and took metadata the current rules refuse: such a
    memory copied as it was could never be updated. It is listed (naming the field) and stays
    in the old index; the empty fields of the others are left out."""
    alias = _v1_index(kemem, "user", "events")
    for db, kind in (("official", "events"), ("user", "entities"), ("official", "entities")):
        _v1_index(kemem, db, kind)
    t = "2024-01-01T10:00:00"
    vec = kemem.embedder.embed_one("旧的记忆").tolist()
    base = {"agent_id": "qiyu", "user_id": "u1", "db": "user", "created_at": t,
            "description": "旧的记忆", "place": "", "scene": "", "vector": vec}  # fmt: skip
    docs = {
        "ok": {},
        "nested": {"metadata": {"nested": {"a": 1}}},
        "dotted": {"metadata": {"a.b": "x"}},
        "big": {"metadata": {"big": 2**60}},
    }
    lines = []
    for mid, extra in docs.items():
        lines += [{"index": {"_index": alias, "_id": mid}}, {**base, "id": mid, **extra}]
    kemem.engine.bulk(lines, refresh=True)

    (rep,) = [r for r in migrate(kemem.engine, kemem.embedder.dim) if r.alias == alias]
    assert rep.copied == 1 and not rep.dropped_old
    skipped = dict(s.split(": ", 1) for s in rep.skipped)
    assert set(skipped) == {"nested", "dotted", "big"}
    assert "metadata" in skipped["nested"] and "a.b" in skipped["dotted"]
    assert "2^53" in skipped["big"] and "old index" in skipped["big"]
    updated = kemem.update("ok", {"place": "家"}, user_id="u1", agent_id="qiyu", refresh=True)
    assert (updated.memory.place, updated.memory.scene) == ("家", "")
    hits = kemem.query("旧的记忆", user_id="u1", agent_id="qiyu", score_threshold=0)
    assert [h.index for h in hits.memory_events] == ["ok"]
