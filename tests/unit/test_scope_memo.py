"""``Scope.of`` remembers the scopes that pass its rule (issue 42: a query builds the same few
~15 times); what breaks the rule is refused every time, and never remembered."""

from __future__ import annotations

import pytest

from kemem_es.bounded import Bounded
from kemem_es.errors import InvalidInput
from kemem_es.store import scope as sc
from kemem_es.store.scope import Scope


def test_a_scope_is_built_once_and_equal_to_a_fresh_one() -> None:
    first = Scope.of(agent_id="memo-a", user_id="memo-u")
    assert Scope.of(agent_id="memo-a", user_id="memo-u") is first
    assert first == Scope("user", "memo-a", "memo-u")
    official = Scope.of(agent_id="memo-a", db="official")
    assert official == Scope("official", "memo-a", None) and official is not first


@pytest.mark.parametrize(
    "kw",
    [
        {"agent_id": "", "user_id": "u"},
        {"agent_id": "a", "user_id": None},
        {"agent_id": "a", "user_id": "u", "db": "official"},
        {"agent_id": "a\x00b", "user_id": "u"},
        {"agent_id": "a", "user_id": "u", "db": "nope"},
    ],
)
def test_what_breaks_the_rule_is_refused_every_time(kw: dict) -> None:
    for _ in range(2):
        with pytest.raises(InvalidInput):
            Scope.of(**kw)
    assert not any(
        key == (kw["agent_id"], kw["user_id"], kw.get("db", "user")) for key in sc._SCOPES
    )


def test_only_plain_strings_are_remembered() -> None:
    class Id(str):
        pass

    s = Scope.of(agent_id=Id("memo-b"), user_id="memo-u")
    assert s == Scope("user", "memo-b", "memo-u")
    assert all(type(k[0]) is str for k in sc._SCOPES)


def test_the_memo_keeps_the_newest_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "_SCOPES", Bounded(2))
    built = [Scope.of(agent_id=f"memo-{i}", user_id="u") for i in range(5)]
    assert list(sc._SCOPES) == [("memo-3", "u", "user"), ("memo-4", "u", "user")]
    assert Scope.of(agent_id="memo-4", user_id="u") is built[4]
    assert Scope.of(agent_id="memo-0", user_id="u") == built[0]  # built again
