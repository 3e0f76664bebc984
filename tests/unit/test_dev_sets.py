"""The committed dev sets are what their hand-written sources build (bench/dialogue_en,
bench/dialogue_check, bench/dialogue_fresh, bench/dialogue_hard), and the entity set is well
formed."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from pathlib import Path

import pytest

from bench.dialogue_en import build


def _jsonl(name: str) -> list[dict]:
    return _jsonl_in(build.HERE, name)


def _jsonl_in(folder: Path, name: str) -> list[dict]:
    with open(folder / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_english_set_is_built_from_its_sources() -> None:
    names = build.read_names()
    events = build.events(names)
    known = {e["id"] for e in events}
    queries = build.queries(names, known)
    assert events == _jsonl("events.jsonl")
    assert queries == _jsonl("queries.jsonl")
    assert Counter(e["user_id"] for e in events) == {
        **{"u_emma": 60, "u_liam": 60, "u_priya": 60},  # short summaries
        **{"u_marco": 25, "u_hana": 25, "u_dev": 25},  # long session summaries
    }
    assert Counter(q["style"] for q in queries) == {
        "english": 150,
        "english_question": 150,
        "english_session": 150,
    }
    for q in queries:  # every gold memory exists and lives in the query's own scope
        assert q["turns"][-1]["role"] == "user"
        assert all(g.startswith(f"en-{q['user_id']}-{q['agent_id']}-") for g in q["gold"])


def test_the_check_set_is_built_from_its_sources() -> None:
    from bench.dialogue_check import build as check

    names = build.read_names(check.HERE)
    events = check.events(names)
    known = {e["id"] for e in events}
    queries = check.queries(names, known)
    assert events == _jsonl_in(check.HERE, "events.jsonl")
    assert queries == _jsonl_in(check.HERE, "queries.jsonl")
    assert Counter(e["user_id"] for e in events) == {
        "u_ayun": 85,
        "u_laozhou": 85,
        "u_xiaolu": 85,
        "u_akai": 85,
        "u_atang": 85,
        "u_tomas": 25,  # English session summaries
        "u_grace": 25,
    }
    assert Counter(q["style"] for q in queries) == {"check": 200, "check_session": 100}
    for q in queries:
        assert q["turns"][-1]["role"] == "user"
        assert all(g.startswith(f"ck-{q['user_id']}-{q['agent_id']}-") for g in q["gold"])


@pytest.mark.parametrize(
    ("name", "users", "tag"),
    [
        ("fresh", ("u_xiaoqi", "u_laoqian", "u_ameng", "u_shenqiao"), "fr"),
        ("hard", ("u_xiaotao", "u_dawei", "u_xiaoyu", "u_azhe"), "hd"),
    ],
)
def test_the_sets_written_to_the_check_sets_brief_build_from_their_sources(
    name: str, users: tuple[str, ...], tag: str
) -> None:
    module = importlib.import_module(f"bench.dialogue_{name}.build")
    names = build.read_names(module.HERE)
    events = module.events(names)
    queries = module.queries(names, {e["id"] for e in events})
    assert events == _jsonl_in(module.HERE, "events.jsonl")
    assert queries == _jsonl_in(module.HERE, "queries.jsonl")
    assert Counter(e["user_id"] for e in events) == dict.fromkeys(users, 85)
    assert Counter(q["user_id"] for q in queries) == dict.fromkeys(users, 40)
    assert {q["style"] for q in queries} == {name}
    for user in users:  # each dialogue was written for a memory of its own
        primaries = [q["gold"][0] for q in queries if q["user_id"] == user]
        assert len(set(primaries)) == 40
    for q in queries:
        assert q["turns"][-1]["role"] == "user"
        assert all(g.startswith(f"{tag}-{q['user_id']}-{q['agent_id']}-") for g in q["gold"])


def test_the_entity_set_is_well_formed() -> None:
    """bench/entities: every English entity validates as an EntityRecord; every gold id exists
    and lives in the query's own scope or is its agent's persona; a `none` query has no gold."""
    from kemem_es.models import EntityRecord

    here = Path(build.HERE).parent / "entities"
    demo = Path(build.HERE).parents[1] / "kemem_es" / "demo"
    rows = []
    for path in (
        here / "entities_en.jsonl",
        demo / "user_entities.jsonl",
        demo / "official_entities.jsonl",
    ):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        EntityRecord(**row)
    owner = {r["id"]: (r["agent_id"], r.get("user_id")) for r in rows}
    counts: Counter = Counter()
    for lang in ("zh", "en"):
        for line in (here / f"queries_{lang}.jsonl").read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            counts[(lang, q["style"])] += 1
            assert q["turns"][-1]["role"] == "user"
            assert (q["style"] == "none") == (not q["gold"])
            for g in q["gold"]:
                assert owner[g] in {(q["agent_id"], q["user_id"]), (q["agent_id"], None)}, g
    assert counts == {
        ("zh", "about"): 72,
        ("zh", "none"): 28,
        ("en", "about"): 54,
        ("en", "none"): 21,
    }


def test_the_harness_can_index_without_the_callers_names() -> None:
    """bench.dialogue_eval --without-names: the records carry no user_name / agent_name (the
    review's harness may set neither), and everything else is as written."""
    from bench.dialogue_eval import event_records, nameless_entities
    from kemem_es.kemem import demo_path

    events = demo_path("user_events.jsonl")
    kept = event_records(None, events, "written")
    dropped = event_records(None, events, "written", names=False)
    assert all(r.user_name and r.agent_name for r in kept)
    assert not any(r.user_name or r.agent_name for r in dropped)
    assert [(r.id, r.description, r.keywords) for r in dropped] == [
        (r.id, r.description, r.keywords) for r in kept
    ]
    entities = nameless_entities(demo_path("user_entities.jsonl"))
    assert entities and not any(e.user_name or e.agent_name for e in entities)
    assert all(e.entity_name for e in entities)


def test_distractors_are_the_other_users_chinese_memories_under_the_scopes_names() -> None:
    from bench import dialogue_eval as de

    scopes = {("mobai", "u_azhe"), ("juno", "u_grace")}  # a Chinese scope and an English one
    records = de.distractor_records(scopes, "written")
    han = [r for c in de.DISTRACTOR_CORPORA for r in _jsonl_in(de.CORPORA[c], "events.jsonl")
           if de._HAN.search(r["description"])]  # fmt: skip
    own = [r for r in han if (r["agent_id"], r["user_id"]) == ("mobai", "u_azhe")]
    assert len(own) == 85
    # the English scope gets none; the Chinese one every other Chinese memory, once
    assert {(r.agent_id, r.user_id) for r in records} == {("mobai", "u_azhe")}
    assert len(records) == len(han) - len(own) == len({r.id for r in records})
    assert not {r.id for r in records} & {r["id"] for r in han}
    by_id = {r.id: r for r in records}
    dawei = (r for r in han if r["user_id"] == "u_dawei")
    source = next(r for r in dawei if r["user_name"] in r["description"])
    copy = by_id[f"dx-mobai-u_azhe-{source['id']}"]
    assert (copy.user_name, copy.agent_name) == ("阿哲", "墨白")
    assert source["user_name"] not in copy.description and "阿哲" in copy.description
    assert copy.description == source["description"].replace(source["user_name"], "阿哲").replace(
        source["agent_name"], "墨白"
    )
    assert all(not r.keywords for r in de.distractor_records(scopes, "none"))
