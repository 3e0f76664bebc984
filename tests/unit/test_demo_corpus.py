"""The demo corpus shipped in kemem_es/demo: every line is a valid record, and the set is big and
varied enough for demos and retrieval tests. Pure file checks, no engine."""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import get_args

import pytest

import kemem_es
from kemem_es.errors import InvalidInput
from kemem_es.models import EntityKind, EntityRecord, EventRecord
from kemem_es.store.validation import check

DEMO = Path(kemem_es.__file__).parent / "demo"
FILES = {
    "user_events.jsonl": (EventRecord, "user"),
    "user_entities.jsonl": (EntityRecord, "user"),
    "official_events.jsonl": (EventRecord, "official"),
    "official_entities.jsonl": (EntityRecord, "official"),
}
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")


@cache
def raw(name: str) -> tuple[dict, ...]:
    rows = []
    text = (DEMO / name).read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        assert line.strip(), f"{name}:{n}: blank line"
        assert "\\u" not in line, f"{name}:{n}: written with ensure_ascii=True"
        rows.append(json.loads(line))
    return tuple(rows)


@cache
def records(name: str) -> tuple:
    model, db = FILES[name]
    out = []
    for n, row in enumerate(raw(name), 1):
        try:
            rec = model.model_validate(row)
            check(rec, db, None)
        except (ValueError, InvalidInput) as exc:  # pydantic.ValidationError is a ValueError
            pytest.fail(f"{name}:{n}: {exc}")
        out.append(rec)
    return tuple(out)


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_line_validates(name: str) -> None:
    assert records(name), f"{name} is empty"


@pytest.mark.parametrize("name", sorted(FILES))
def test_times_are_strings_in_the_documented_format(name: str) -> None:
    fields = ("created_at", "updatetime") if "events" in name else ("updatetime",)
    for row in raw(name):
        for field in fields:
            assert TIME_RE.match(row[field]), (row["id"], field, row[field])
        if "events" in name:
            assert row["updatetime"] >= row["created_at"], row["id"]


def test_ids_unique_and_stable() -> None:
    ids = [r.id for name in FILES for r in records(name)]
    assert all(ids), "every demo record carries its own id"
    dupes = [i for i, c in Counter(ids).items() if c > 1]
    assert not dupes, dupes
    for r in records("user_events.jsonl"):
        assert r.id == f"ev-{r.user_id}-{r.agent_id}-{r.id[-4:]}", r.id
    for r in records("user_entities.jsonl"):
        assert r.id == f"en-{r.user_id}-{r.agent_id}-{r.id[-4:]}", r.id
    for r in records("official_events.jsonl"):
        assert r.id == f"ev-official-{r.agent_id}-{r.id[-4:]}", r.id
    for r in records("official_entities.jsonl"):
        assert r.id == f"en-official-{r.agent_id}-{r.id[-4:]}", r.id


def test_sizes_and_coverage() -> None:
    events = records("user_events.jsonl")
    entities = records("user_entities.jsonl")
    assert len(events) >= 150
    assert len(entities) >= 100
    users = {r.user_id for r in events} | {r.user_id for r in entities}
    agents = {r.agent_id for r in events} | {r.agent_id for r in entities}
    assert len(users) >= 3, users
    assert len(agents) >= 2, agents
    assert all(u.isascii() for u in users) and all(a.isascii() for a in agents)
    # each user talks to at least one agent, and every (agent, user) pair has both kinds
    pairs_ev = {(r.agent_id, r.user_id) for r in events}
    pairs_en = {(r.agent_id, r.user_id) for r in entities}
    assert pairs_ev == pairs_en
    assert {u for _, u in pairs_ev} == users
    years = {r.event_time.year for r in events}
    assert len(years) >= 3, years
    assert {e.kind for e in entities} == set(get_args(EntityKind)), "all six entity kinds"
    assert {e.entity_type for e in entities} == {"主体", "客体", "具体实体", "泛化实体"}


def test_names_are_consistent() -> None:
    names: dict[str, set[str | None]] = {}
    for name in FILES:
        for r in records(name):
            assert r.agent_name, r.id
            names.setdefault(r.agent_id, set()).add(r.agent_name)
            if r.user_id:
                assert r.user_name, r.id
                names.setdefault(r.user_id, set()).add(r.user_name)
            else:
                assert r.user_name is None, r.id
    assert all(len(v) == 1 for v in names.values()), names


def test_official_persona_for_each_agent() -> None:
    agents = {r.agent_id for r in records("user_events.jsonl")}
    off_en = records("official_entities.jsonl")
    off_ev = records("official_events.jsonl")
    for agent in agents:
        mine = [e for e in off_en if e.agent_id == agent]
        assert len(mine) >= 12, agent
        own = [e for e in mine if e.entity_type == "主体"]
        assert {e.kind for e in own} >= {"特殊实体属性", "与其它实体的关系"}, agent
        assert {e.entity_name for e in own} == {own[0].agent_name}, agent
        assert len([e for e in off_ev if e.agent_id == agent]) >= 10, agent


def test_event_fields_are_filled() -> None:
    for name in ("user_events.jsonl", "official_events.jsonl"):
        for r in records(name):
            assert 3 <= len(r.keywords) <= 6, r.id
            assert len(set(r.keywords)) == len(r.keywords), r.id
            assert r.deepinsight and r.place and r.scene, r.id
            assert 0 <= r.strength <= 60, r.id
    for name in ("user_entities.jsonl", "official_entities.jsonl"):
        for r in records(name):
            assert r.keyword, r.id
            assert 0 <= r.strength <= 60, r.id


def test_no_duplicate_texts() -> None:
    # near-duplicates are wanted (the engine must tolerate them), exact copies are not
    for name in FILES:
        texts = [r.description for r in records(name)]
        dupes = [t for t, c in Counter(texts).items() if c > 1]
        assert not dupes, (name, dupes)


def test_readme_present() -> None:
    assert (DEMO / "README.md").read_text(encoding="utf-8").strip()
