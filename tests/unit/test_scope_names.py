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


def concrete(name: str, description: str) -> EntityRecord:
    """A concrete entity of user u of agent a."""
    return EntityRecord(
        agent_id="a",
        user_id="u",
        entity_name=name,
        entity_type="具体实体",
        kind="特殊实体属性",
        description=description,
        updatetime="2025-01-01",
    )


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
    dog = concrete("豆包", "豆包是柯基")
    generic = dog.model_copy(update={"entity_name": "柯基犬", "entity_type": "泛化实体"})
    names.note(scope, [dog, generic])
    assert names.visible(scope).words == {"豆包"}  # a generic entity is a kind, not a name
    known = names.visible(scope)
    names.note(scope, [dog])  # nothing new: the same object, so the tokenizer's view is reused
    assert names.visible(scope) is known
    assert len(engine.asked) == 2


def test_expired_names_are_renewed_in_the_background_and_a_failure_keeps_them() -> None:
    """Only a scope's first read waits: after the TTL a query gets the names known at once
    while one background read renews them; names written meanwhile are not lost by it."""
    import threading
    import time

    gate = threading.Event()
    engine = FakeEngine({("user", "a", "u"): {"user": ["木木"]}})
    real_search = engine.search

    def slow_search(index: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if len(engine.asked) >= 1:  # every read after the first waits for the gate
            assert gate.wait(10)
        return real_search(index, body, **kw)

    engine.search = slow_search  # type: ignore[method-assign]
    names = ScopeNames(engine, ttl_s=0.05)  # type: ignore[arg-type]
    scope = Scope.of(agent_id="a", user_id="u")
    first = names.of(scope)
    assert first.words == {"木木"} and len(engine.asked) == 1
    time.sleep(0.06)
    engine.table[("user", "a", "u")] = {"user": ["木木"], "entity": ["豆包"]}
    for _ in range(5):  # expired: answered at once, with one renewal under way
        assert names.of(scope) is first
    names.note(scope, [concrete("阿杰", "阿杰是朋友")])  # written while the renewal reads
    gate.set()
    deadline = time.monotonic() + 5
    while names.of(scope).words == {"木木", "阿杰"} or names.of(scope) is first:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert names.of(scope).words == {"木木", "豆包", "阿杰"}
    assert len(engine.asked) == 2  # one renewal, however many queries asked meanwhile

    def failing(index: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        raise RuntimeError("engine down")

    engine.search = failing  # type: ignore[method-assign]
    known = names.of(scope)
    time.sleep(0.06)
    assert names.of(scope) is known  # the failed renewal keeps what was known
    names.close()
    time.sleep(0.06)
    assert names.of(scope).words == known.words  # closed: no more renewals, nothing raised
