"""The committed English dev set is what its hand-written sources build (bench/dialogue_en)."""

from __future__ import annotations

import json
from collections import Counter

from bench.dialogue_en import build


def _jsonl(name: str) -> list[dict]:
    with open(build.HERE / name, encoding="utf-8") as f:
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
