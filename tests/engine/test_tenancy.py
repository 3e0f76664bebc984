"""Tenants can never see or damage each other, whatever ids they choose (real engine)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kemem_es import Kemem
from kemem_es.errors import InvalidInput, NotFound

pytestmark = pytest.mark.engine

X1 = {"agent_id": "qiyu", "user_id": "u_x1"}
X2 = {"agent_id": "lishen", "user_id": "u_x2"}
X3 = {"agent_id": "qiyu", "user_id": "u_x3"}


def rows(scope: dict, text: str, n: int = 3) -> list[dict]:
    return [
        {**scope, "id": f"m{i}", "description": f"{text}{i}", "created_at": "2025-05-01 10:00:00"}
        for i in range(1, n + 1)
    ]


def test_same_explicit_ids_in_two_scopes_keep_both(kemem, tmp_path: Path) -> None:
    kemem.init()
    for scope, text in ((X1, "一号用户的记忆"), (X2, "二号用户的记忆")):
        path = tmp_path / f"{scope['user_id']}.jsonl"
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows(scope, text)))
        report = kemem.index_file(path, "events", "user")
        assert (report.indexed, report.updated) == (3, 0)
    assert kemem.get("m1", **X1).text == "一号用户的记忆1"
    assert kemem.get("m1", **X2).text == "二号用户的记忆1"
    assert kemem.count(**X1) == 3 and kemem.count(**X2) == 3


def test_index_records_runs_the_scope_rule(kemem) -> None:
    kemem.init()
    official_with_user = {**X1, "description": "官方设定", "created_at": "2025-01-01"}
    with pytest.raises(InvalidInput) as exc:
        kemem.index_records([official_with_user], "events", db="official")
    assert exc.value.problems == [
        "record 1: user_id: must be empty for the official database (shared by all users)"
    ]
    user_without_user = {"agent_id": "qiyu", "description": "谁的？", "created_at": "2025-01-01"}
    with pytest.raises(InvalidInput, match="record 1: user_id: required"):
        kemem.index_records([user_without_user], "events", db="user")
    assert kemem.count(agent_id="qiyu", db="official") == 0


def test_no_verb_reaches_another_users_memory(kemem) -> None:
    kemem.init()
    kemem.index_records(rows(X1, "一号的秘密"), "events")
    kemem.index_records(rows(X3, "三号的秘密"), "events")
    victim_id = "m1"  # a real id of X1's — X3 has an m1 too, but a different memory

    # Read: X3 sees its own m1, never X1's.
    assert kemem.get(victim_id, **X3).text == "三号的秘密1"
    page = kemem.get_all(**X3)
    assert all("一号" not in m.text for m in page.results)
    resp = kemem.search("一号的秘密", **X3, threshold=0, limit=10)
    assert all("一号" not in e.description for e in resp.memory_events)

    # Update and delete through X3's scope change X3's memories only.
    kemem.update(victim_id, "三号改了自己的", **X3)
    kemem.delete("m2", **X3, refresh=True)
    assert kemem.get("m1", **X1).text == "一号的秘密1"
    assert kemem.get("m2", **X1).text == "一号的秘密2"
    assert [h.event for h in kemem.history("m1", **X1)] == ["ADD"]

    # An id that exists only for X1 is simply unknown to X3.
    kemem.add("一号独有", **X1, refresh=True)
    only_x1 = kemem.get_all(**X1, filters={"session_id": {"exists": False}}).results[0].id
    for verb in (
        lambda: kemem.get(only_x1, **X3),
        lambda: kemem.update(only_x1, "篡改", **X3),
        lambda: kemem.delete(only_x1, **X3),
    ):
        with pytest.raises(NotFound) as exc:
            verb()
        assert "一号" not in str(exc.value)
    assert kemem.history(only_x1, **X3) == []
    assert kemem.get(only_x1, **X1).text == "一号独有"

    # delete_all of X3 leaves X1 whole.
    kemem.delete_all(**X3)
    assert kemem.count(**X1) == 4


def test_scope_sizes_are_cached_per_scope_whatever_its_ids_hold(kemem) -> None:
    """The size that picks exact or approximate scoring is one scope's own: agent "cc|y" with
    user "z" and agent "cc" with user "y|z" once shared one cache entry."""
    from kemem_es.contract.params import QueryParams

    kemem.init()
    big, small = {"agent_id": "cc|y", "user_id": "z"}, {"agent_id": "cc", "user_id": "y|z"}
    kemem.index_records(rows(big, "一个租户的记忆", n=5), "events")
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-user-events")
    searcher = kemem.searcher
    assert searcher._scope_counts("user", QueryParams(**big))[0] == 5
    assert searcher._scope_counts("user", QueryParams(**small))[0] == 0


def test_concurrent_first_init_all_succeed(engine_settings, embedder) -> None:
    import uuid

    prefix = f"test-{uuid.uuid4().hex[:8]}"

    def init() -> int:
        km = Kemem(engine_settings.model_copy(update={"index_prefix": prefix}))
        km.embedder = embedder
        return len(km.init())

    try:
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(lambda _: init(), range(4))) == [6, 6, 6, 6]
    finally:
        km = Kemem(engine_settings.model_copy(update={"index_prefix": prefix}))
        for name in km.engine.client.indices.get(index=f"{prefix}-*"):
            km.engine.delete_index(name)


def _cut_and_scores(
    km: Kemem, query: str, scope: dict
) -> tuple[list[str], list[tuple[str, float]]]:
    # A look, not a recall: a recall's reinforcement rewrites the memory in the background, and
    # the replaced version stays in the shard's BM25 statistics until a merge, so the next
    # score would depend on when that write lands, not on another tenant's names.
    got = km.search(query, **scope, mode="bm25", threshold=0, limit=3, reinforce=False)
    return got["additional_info"]["分词"], [(r["memory"], r["score"]) for r in got["results"]]


def _entity(name: str, kind: str, description: str) -> dict:
    return {"entity_name": name, "entity_type": "具体实体", "kind": kind,
            "description": description, "updatetime": "2025-05-01"}  # fmt: skip


def test_another_tenants_names_never_change_how_this_tenant_is_cut(kemem) -> None:
    """Names are kept whole only in their own scope's texts: an entity another agent's user
    writes (想去海边看日) used to enter the process's one jieba dictionary, cut this tenant's
    看日出 apart and take its memory below the threshold, until a restart."""
    kemem.init()
    victim = {"agent_id": "qiyu", "user_id": "u_sea"}
    kemem.add("上周和小满去海边看日出，拍了很多照片", **victim, refresh=True)
    query = "明天想去海边看日出"
    before = _cut_and_scores(kemem, query, victim)
    assert before[0] == ["明天", "想", "去", "海边", "看", "日出"]
    assert before[1] and before[1][0][1] > 0

    attacker = {"agent_id": "other", "user_id": "u_evil"}
    entity = _entity("想去海边看日", "特殊实体属性", "想去海边看日是我的网名")
    kemem.add(entity, kind="entities", **attacker, refresh=True)
    assert _cut_and_scores(kemem, query, victim) == before
    # A process started afterwards (names read off the indices) cuts the same way.
    fresh = Kemem(kemem.settings)
    fresh.embedder = kemem.embedder
    assert _cut_and_scores(fresh, query, victim) == before
    # In its own scope the name is kept whole where it is made of whole words, never by
    # cutting a word jieba found (日出 stays).
    assert "想去海边看日" in _cut_and_scores(fresh, "想去海边看日，你在吗", attacker)[0]
    assert _cut_and_scores(fresh, query, attacker)[0] == before[0]


def test_a_scopes_names_are_kept_whole_in_its_texts_from_any_process(kemem) -> None:
    """The writer reads the scope's names off the indices too: events imported by another
    process than their entities still hold 阿杰 as one token, as the query has it."""
    kemem.init()
    scope = {"agent_id": "qiyu", "user_id": "u_jie"}
    other = {"agent_id": "qiyu", "user_id": "u_nojie"}
    jie = _entity("阿杰", "用户关系", "阿杰是我的大学室友")
    kemem.add(jie, kind="entities", **scope, refresh=True)
    writer = Kemem(kemem.settings)
    writer.embedder = kemem.embedder
    for s in (scope, other):
        writer.index_records([{**s, "id": "e1", "description": "阿杰又想吃火锅了",
                               "created_at": "2025-05-01 10:00:00"}], "events")  # fmt: skip
    alias = f"{kemem.settings.index_prefix}-user-events"
    for s, whole in ((scope, True), (other, False)):
        body = {"query": {"bool": {"filter": [{"term": {"user_id": s["user_id"]}},
                                              {"term": {"description_tok": "阿杰"}}]}}}  # fmt: skip
        hits = kemem.engine.search(alias, body)["hits"]["hits"]
        assert bool(hits) is whole, s
    assert "阿杰" in _cut_and_scores(kemem, "阿杰最近怎么样", scope)[0]
    assert "阿杰" not in _cut_and_scores(kemem, "阿杰最近怎么样", other)[0]
