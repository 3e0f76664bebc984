"""Foundation on the real engine: templates, round-trips, idempotent re-runs, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import cli_env, run_cli

from kemem_es.errors import EngineUnavailable, InvalidInput, MappingConflict
from kemem_es.store import Scope, install
from kemem_es.store.layout import index_alias

U1 = Scope.of(agent_id="qiyu", user_id="u1")

pytestmark = pytest.mark.engine

EVENTS = [
    {
        "id": "ev-1",
        "agent_id": "qiyu",
        "user_id": "u1",
        "user_name": "木木",
        "agent_name": "祁煜",
        "description": "祁煜提议在画廊的圣诞装饰中加入红色元素，木木很喜欢。",
        "deepinsight": "这表明了木木对色彩有敏锐的感知。",
        "keywords": ["红色元素", "圣诞节", "装饰"],
        "place": "画廊",
        "created_at": "2020-12-15 18:32:12",
    },
    {
        "agent_id": "qiyu",
        "user_id": "u1",
        "description": "木木和室友一起吃了火锅，聊到很晚。",
        "keywords": "火锅、室友",
        "created_at": "2023-03-02 21:10:00",
    },
]
ENTITIES = [
    {
        "id": "en-1",
        "agent_id": "qiyu",
        "user_id": "u1",
        "entity_name": "木木",
        "entity_type": "客体",
        "kind": "用户属性",
        "keyword": "兴趣",
        "description": "木木对星座和蓝玫瑰感兴趣",
        "updatetime": "2024-09-24T13:00:00",
    }
]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return path


def test_templates_install_idempotently(kemem) -> None:
    first = kemem.init()
    assert {r.action for r in first} == {"created"}
    assert len(first) == 6  # 2 databases × 2 kinds + history + user state
    second = kemem.init()
    assert {r.action for r in second} == {"exists"}
    mapping = kemem.engine.get_index(index_alias(kemem.settings.index_prefix, "user", "events"))
    (props,) = [m["mappings"]["properties"] for m in mapping.values()]
    # Elasticsearch: the built-in whitespace analyzer (docs/engines.md), the tokens are lowercase
    es = kemem.engine.dialect.name == "elasticsearch"
    assert props["description_tok"]["analyzer"] == ("whitespace" if es else "kemem_ws")
    assert props["agent_id"]["type"] == "keyword"


def test_incompatible_mapping_is_refused(kemem) -> None:
    kemem.init()
    with pytest.raises(MappingConflict, match="vector dims"):
        install(kemem.engine, kemem.embedder.dim + 1)


def test_events_round_trip_and_rerun_changes_nothing(kemem, tmp_path: Path) -> None:
    kemem.init()
    src = write_jsonl(tmp_path / "events.jsonl", EVENTS)
    report = kemem.index_file(src, "events", "user")
    assert (report.indexed, report.updated, report.rejected) == (2, 0, [])
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    assert kemem.engine.count(alias) == 2

    doc = kemem.engine.get(alias, U1.doc_id("ev-1"), routing=U1.routing)
    assert doc is not None
    src_doc = doc["_source"]
    assert src_doc["description"] == EVENTS[0]["description"]
    assert src_doc["keywords"] == ["红色元素", "圣诞节", "装饰"]
    assert "红色" in src_doc["description_tok"].split() or "红色元素" in src_doc["keywords_tok"]
    assert src_doc["event_time"] == "2020-12-15T18:32:12"
    assert len(src_doc["vector"]) == kemem.embedder.dim == 512

    again = kemem.index_file(src, "events", "user")
    assert (again.indexed, again.updated, again.unchanged) == (0, 0, 2)
    assert kemem.engine.count(alias) == 2

    # A changed record is updated in place, never duplicated.
    changed = [dict(EVENTS[0], deepinsight="这表明了木木喜欢红色。"), EVENTS[1]]
    third = kemem.index_file(write_jsonl(tmp_path / "e2.jsonl", changed), "events", "user")
    assert (third.indexed, third.updated, third.unchanged) == (0, 1, 1)
    assert kemem.engine.count(alias) == 2


def test_reimporting_refreshes_what_an_older_derivation_wrote(kemem, tmp_path: Path) -> None:
    """A document written before the tokens or the embedder's input changed is refreshed by
    importing its source again (its hash carries ``DERIVATION_VERSION``); others stay as they
    are. Without that, the README's "re-index from the source" would report them unchanged."""
    kemem.init()
    src = write_jsonl(tmp_path / "events.jsonl", EVENTS)
    kemem.index_file(src, "events", "user")
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    doc_id = U1.doc_id("ev-1")
    fresh = kemem.engine.get(alias, doc_id, routing=U1.routing)["_source"]
    old = {"description_tok": "红 色 元 素", "content_hash": "written-by-an-older-derivation"}
    kemem.engine.client.update(
        index=alias, id=doc_id, routing=U1.routing, body={"doc": old}, refresh=True
    )
    again = kemem.index_file(src, "events", "user")
    assert (again.indexed, again.updated, again.unchanged) == (0, 1, 1)
    now = kemem.engine.get(alias, doc_id, routing=U1.routing)["_source"]
    assert now["description_tok"] == fresh["description_tok"]
    assert now["content_hash"] == fresh["content_hash"]


def test_entities_round_trip(kemem, tmp_path: Path) -> None:
    kemem.init()
    report = kemem.index_file(write_jsonl(tmp_path / "en.jsonl", ENTITIES), "entities", "user")
    assert report.indexed == 1
    alias = index_alias(kemem.settings.index_prefix, "user", "entities")
    doc = kemem.engine.get(alias, U1.doc_id("en-1"), routing=U1.routing)
    assert doc is not None
    assert doc["_source"]["kind"] == "用户属性"
    assert doc["_source"]["updatetime"] == "2024-09-24T13:00:00"
    assert len(doc["_source"]["vector"]) == 512


def test_bad_record_rejects_whole_file(kemem, tmp_path: Path) -> None:
    kemem.init()
    bad = dict(EVENTS[1])
    del bad["description"]
    src = write_jsonl(tmp_path / "bad.jsonl", [EVENTS[0], bad])
    with pytest.raises(InvalidInput) as exc:
        kemem.index_file(src, "events", "user")
    assert any(p.startswith("line 2: description") for p in exc.value.problems)
    assert kemem.engine.count(index_alias(kemem.settings.index_prefix, "user", "events")) == 0

    report = kemem.index_file(src, "events", "user", skip_invalid=True)
    assert report.indexed == 1
    assert report.rejected and report.rejected[0].startswith("line 2: description")


def test_official_records_must_not_carry_a_user(kemem, tmp_path: Path) -> None:
    kemem.init()
    src = write_jsonl(tmp_path / "off.jsonl", ENTITIES)
    with pytest.raises(InvalidInput) as exc:
        kemem.index_file(src, "entities", "official")
    assert exc.value.problems == [
        "line 1: user_id: must be empty for the official database (shared by all users)"
    ]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, env=env)


def _cli_env(kemem) -> dict[str, str]:
    return cli_env(kemem)


def test_unreachable_cluster_gives_one_clear_line(tmp_path: Path) -> None:
    import os

    from kemem_es.config import get_settings
    from kemem_es.engine import connect

    with pytest.raises(EngineUnavailable, match="cannot reach the search engine"):
        connect(get_settings(es_url="http://127.0.0.1:9"))
    env = dict(os.environ, KEMEM_ES_URL="http://127.0.0.1:9")
    proc = _cli("engine", "status", env=env)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "cannot reach the search engine at http://127.0.0.1:9" in proc.stdout + proc.stderr


def test_cli_index_exit_codes(kemem, tmp_path: Path) -> None:
    env = _cli_env(kemem)
    good = write_jsonl(tmp_path / "good.jsonl", ENTITIES)
    proc = _cli("index", str(good), "--kind", "entities", "--db", "user", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "indexed 1" in proc.stdout

    bad = write_jsonl(tmp_path / "bad.jsonl", [{**ENTITIES[0], "id": "en-2", "kind": "星座"}])
    proc = _cli("index", str(bad), "--kind", "entities", "--db", "user", env=env)
    assert proc.returncode == 2
    assert "line 1: kind" in proc.stderr
    assert "nothing was written" in proc.stderr


def test_cli_init_plans_user_shards_by_expected_size(kemem) -> None:
    from kemem_es.store.sizing import SHARD_MEMORIES

    env = _cli_env(kemem)
    proc = _cli("init", "--expected-memories", str(2 * SHARD_MEMORIES + 1), env=env)
    assert proc.returncode == 0, proc.stderr
    shards = {}
    for db in ("user", "official"):
        alias = index_alias(kemem.settings.index_prefix, db, "events")
        (spec,) = kemem.engine.get_index(alias).values()
        shards[db] = spec["settings"]["index"]["number_of_shards"]
    assert shards == {"user": "3", "official": "1"}
    assert "3 shard(s)" in proc.stdout


def test_cli_query_before_anything_is_indexed_says_so(kemem) -> None:
    env = _cli_env(kemem)
    proc = _cli("query", "最近总是失眠", "--user", "u1", "--agent", "qiyu", env=env)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "kemem-es init" in proc.stderr


def _refresh_interval(km, alias: str):
    name = next(iter(km.engine.get_index(alias)))
    resp = km.engine.client.indices.get_settings(index=name, name="index.refresh_interval")
    return resp.get(name, {}).get("settings", {}).get("index", {}).get("refresh_interval")


def _bulk_records(n: int, start: int = 0) -> list[dict]:
    return [
        {**EVENTS[1], "id": f"bulk-{i}", "description": f"第{i}次和室友吃火锅。"}
        for i in range(start, start + n)
    ]


def test_large_load_pauses_refresh_and_restores_it(kemem, monkeypatch) -> None:
    """A large load runs with refresh_interval -1 and gives the index its own setting back."""
    from kemem_es.store import bulk

    kemem.init()
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    kemem.engine.client.indices.put_settings(
        index=alias, body={"index": {"refresh_interval": "7s"}}
    )
    monkeypatch.setattr(bulk, "LARGE_LOAD_DOCS", 3)
    seen: list = []
    send = bulk.BulkWriter._send

    def spy(self, batch):
        seen.append(_refresh_interval(kemem, alias))
        return send(self, batch)

    monkeypatch.setattr(bulk.BulkWriter, "_send", spy)
    report = kemem.index_records(_bulk_records(4), kind="events")
    assert report.indexed == 4 and seen and set(seen) == {"-1"}
    assert _refresh_interval(kemem, alias) == "7s"
    assert kemem.engine.count(alias) == 4  # refreshed at the end all the same

    seen.clear()
    kemem.index_records(_bulk_records(2, 10), kind="events")  # small: the setting is not touched
    assert set(seen) == {"7s"}


def test_failed_large_load_still_restores_refresh(kemem, monkeypatch) -> None:
    from kemem_es.errors import WriteInterrupted
    from kemem_es.store import bulk

    kemem.init()
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    monkeypatch.setattr(bulk, "LARGE_LOAD_DOCS", 3)

    def broken(self, batch):  # what Engine.bulk raises when the connection drops
        from opensearchpy import ConnectionError as OSConnectionError

        from kemem_es.engine.errors import translate_client_error

        raise translate_client_error(OSConnectionError("N/A", "boom", Exception("boom")), "bulk")

    monkeypatch.setattr(bulk.BulkWriter, "_send", broken)
    with pytest.raises(WriteInterrupted):
        kemem.index_records(_bulk_records(4), kind="events")
    assert _refresh_interval(kemem, alias) is None  # the default again, not -1
    assert not bulk._paused


def test_a_killed_loads_pause_is_not_restored_by_the_next_load(kemem, monkeypatch) -> None:
    """A load killed mid-way (SIGTERM, SIGKILL) leaves refresh_interval -1: the next large load
    must give the index the default back, not that -1."""
    from kemem_es.store import bulk

    kemem.init()
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    paused = {"index": {"refresh_interval": "-1"}}
    kemem.engine.client.indices.put_settings(index=alias, body=paused)
    monkeypatch.setattr(bulk, "LARGE_LOAD_DOCS", 3)
    kemem.index_records(_bulk_records(4), kind="events")
    assert _refresh_interval(kemem, alias) is None  # the default again, refreshing


def test_supplied_vectors_are_stored_at_unit_length_and_ranked_by_cosine(kemem) -> None:
    """The graph ranks by dot product (innerproduct): that is the cosine only on unit vectors,
    so a supplied vector of any length is stored scaled to length 1, and the ANN neighbours
    of a query are the exact cosine neighbours, however long the vectors were when written."""
    import numpy as np

    from kemem_es.memory.dedup import nearest
    from kemem_es.models import EventRecord
    from kemem_es.store.nearest import Neighbours

    kemem.init()
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    mapping = next(iter(kemem.engine.get_index(alias).values()))["mappings"]["properties"]
    if kemem.engine.dialect == "opensearch":
        assert mapping["vector"]["method"]["space_type"] == "innerproduct"
    rng = np.random.default_rng(7)
    base = rng.normal(size=(40, kemem.embedder.dim))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    lengths = rng.uniform(0.05, 20.0, size=40)  # far from 1: a dot product would favour long ones
    records = [
        EventRecord(
            id=f"v{i}",
            agent_id="qiyu",
            user_id="u1",
            description=f"第{i}条记忆",
            created_at="2024-05-01 10:00:00",
            vector=(base[i] * lengths[i]).tolist(),
        )
        for i in range(40)
    ]
    assert kemem.index_records(records, kind="events", db="user").indexed == 40
    doc = kemem.engine.get(alias, U1.doc_id("v3"), routing=U1.routing)["_source"]
    assert abs(float(np.linalg.norm(doc["vector"])) - 1.0) < 1e-4
    assert np.allclose(doc["vector"], base[3], atol=1e-5)
    for q in range(5):
        query = base[q] * 0.7 + base[q + 10] * 0.3
        want = np.argsort(-(base @ query))[:5]
        body = {
            "size": 5,
            "_source": ["id"],
            "query": kemem.engine.dialect.ann_query("vector", query.tolist(), 5, U1.filters()),
        }
        hits = kemem.engine.search(alias, body, routing=U1.routing)["hits"]["hits"]
        assert [h["_source"]["id"] for h in hits] == [f"v{i}" for i in want]
    (match,) = nearest(
        Neighbours(kemem.engine), [(U1, records[0], (base[0] * 3).tolist())], "events"
    )
    assert match is not None and match.memory_id == "v0" and abs(match.similarity - 1.0) < 1e-3
