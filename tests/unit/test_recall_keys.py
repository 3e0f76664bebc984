"""Which memories a recall strengthens: the user's, the agent's official ones only when asked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from kemem_es.contract.response import QueryResponse
from kemem_es.store.reinforce import recall_keys
from kemem_es.store.scope import Scope

USER = Scope.of(agent_id="a", user_id="u", db="user")
OFFICIAL = Scope.of(agent_id="a", db="official")


def _response() -> QueryResponse:
    """What ``recall_keys`` reads of an answer: each memory's database and id."""
    events = [
        SimpleNamespace(db="user", index="e-user"),
        SimpleNamespace(db="official", index="e-official"),
    ]
    entities = [
        SimpleNamespace(db="official", index={"index": "n-official"}),
        SimpleNamespace(db="user", index={"index": "n-user"}),
    ]
    return cast(QueryResponse, SimpleNamespace(memory_events=events, memory_entities=entities))


def test_only_the_users_memories_by_default() -> None:
    keys = recall_keys("p", USER, OFFICIAL, _response())
    assert keys == [
        ("p-user-events", USER.doc_id("e-user"), USER.routing),
        ("p-user-entities", USER.doc_id("n-user"), USER.routing),
    ]


def test_official_memories_too_when_asked() -> None:
    keys = recall_keys("p", USER, OFFICIAL, _response(), with_official=True)
    assert [k[0] for k in keys] == [
        "p-user-events", "p-official-events", "p-official-entities", "p-user-entities",
    ]  # fmt: skip
    assert ("p-official-events", OFFICIAL.doc_id("e-official"), OFFICIAL.routing) in keys
