"""Each scope's names (store/names.py): read once per scope, joined with the agent's official
names, known at once when written, one object per scope while unchanged (no engine)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kemem_es.models import EntityRecord
from kemem_es.store.names import ScopeNames
from kemem_es.store.scope import Scope


class FakeEngine:
    """Answers the names aggregation from a table of (db, agent, user) → names."""

    settings = SimpleNamespace(index_prefix="kemem")

    def __init__(self, table: dict[tuple[str, str, str | None], dict[str, list[str]]]) -> None:
        self.table = table
        self.asked: list[tuple[str, str, str | None]] = []

    def search(self, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        terms = {next(iter(f["term"])): next(iter(f["term"].values())) for f in
                 body["query"]["bool"]["filter"]}  # fmt: skip
        key = (terms["db"], terms["agent_id"], terms.get("user_id"))
        self.asked.append(key)
        got = self.table.get(key, {})

        def agg(values: list[str]) -> dict[str, Any]:
            return {"buckets": [{"key": v, "doc_count": 1} for v in values]}

        return {
            "aggregations": {
                "user_name": agg(got.get("user", [])),
                "agent_name": agg(got.get("agent", [])),
                "entities": {"name": agg(got.get("entity", []))},
            }
        }


def test_a_users_names_join_the_agents_official_ones_and_are_cached() -> None:
    engine = FakeEngine({
        ("user", "qiyu", "u1"): {"user": ["木木"], "agent": ["祁煜"], "entity": ["豆包", "x"]},
        ("official", "qiyu", None): {"agent": ["祁煜"], "entity": ["黎深"]},
        ("user", "qiyu", "u2"): {"user": ["小满"], "entity": ["阿杰"]},
        ("user", "juno", "u_grace"): {"user": ["Grace"], "agent": ["Juno"]},
    })  # fmt: skip
    names = ScopeNames(engine)  # type: ignore[arg-type]
    u1 = Scope.of(agent_id="qiyu", user_id="u1")
    got = names.visible(u1)
    assert got.words == {"木木", "祁煜", "豆包", "黎深"}  # "x" is too short to be a name
    assert got.persons == {"木木", "祁煜"}
    assert names.visible(u1) is got  # one object: the tokenizer's views are keyed by it
    assert len(engine.asked) == 2
    u2 = names.visible(Scope.of(agent_id="qiyu", user_id="u2"))
    assert u2.words == {"小满", "阿杰", "祁煜", "黎深"} and "豆包" not in u2.words
    assert len(engine.asked) == 3  # the official names were read once for both users
    official = names.visible(Scope.of(agent_id="qiyu", db="official"))
    assert official.words == {"祁煜", "黎深"}
    # A latin name is never searched for, but needs no joining: jieba keeps it whole.
    grace = names.visible(Scope.of(agent_id="juno", user_id="u_grace"))
    assert grace.persons == {"grace", "juno"} and not grace.words


def test_names_written_by_this_process_count_at_once() -> None:
    engine = FakeEngine({})
    names = ScopeNames(engine)  # type: ignore[arg-type]
    scope = Scope.of(agent_id="a", user_id="u")
    assert not names.visible(scope).words
    dog = EntityRecord(
        agent_id="a",
        user_id="u",
        entity_name="豆包",
        entity_type="具体实体",
        kind="特殊实体属性",
        description="豆包是柯基",
        updatetime="2025-01-01",
    )
    generic = dog.model_copy(update={"entity_name": "柯基犬", "entity_type": "泛化实体"})
    names.note(scope, [dog, generic])
    assert names.visible(scope).words == {"豆包"}  # a generic entity is a kind, not a name
    known = names.visible(scope)
    names.note(scope, [dog])  # nothing new: the same object, so the tokenizer's view is reused
    assert names.visible(scope) is known
    assert len(engine.asked) == 2
