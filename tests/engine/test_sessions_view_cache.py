"""A view reads only what its process does not hold (session/held.py), and never shows what it
should not: a session deleted and created again under the same id shows none of the old turns
(its numbers start at 0 again); another process's messages are seen; a turn's view reads a
handful of documents, not the whole window."""

from __future__ import annotations

from typing import Any

import pytest

from kemem_es import Kemem
from kemem_es.engine.client import Request
from kemem_es.store.scope import Scope

A = {"user_id": "u_view", "agent_id": "a_view"}


def turn(i: int, tag: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"{tag} 第{i}句：今天去公园散步了吗"},
        {"role": "assistant", "content": f"{tag} 第{i}句回答：去了，天气很好"},
    ]


def scope_of(km: Kemem) -> Scope:
    return km._scope(A["agent_id"], A["user_id"], "user")


def dialogue(km: Kemem, sid: str) -> list[str]:
    return [t["content"] for t in km.sessions.manager.view(scope_of(km), sid).turns]


def counting(km: Kemem) -> dict[str, int]:
    """Documents the client reads by id (mget), counted by the engine's request hook."""
    seen = {"docs": 0, "mgets": 0}

    def hook(req: Request, answer: Any, seconds: float) -> None:
        if req.path.endswith("/_mget") and isinstance(req.body, dict):
            seen["mgets"] += 1
            seen["docs"] += len(req.body.get("docs") or [])

    km.engine.hook = hook
    return seen


def another_process(kemem: Kemem) -> Kemem:
    """A second Kemem on the same indices (a server worker of its own), sharing the model."""
    other = Kemem(kemem.settings)
    other.embedder = kemem.embedder
    return other


@pytest.mark.engine
def test_a_session_created_again_never_shows_the_old_turns(kemem: Kemem) -> None:
    kemem.init()
    for i in range(3):
        kemem.add(turn(i, "旧"), session_id="s", **A)
    kemem.drain()
    assert len(dialogue(kemem, "s")) == 6  # read and held by this process
    kemem.delete_session("s", **A)
    assert dialogue(kemem, "s") == []
    kemem.add(turn(0, "新"), session_id="s", **A)  # numbers 0 and 1 again
    got = dialogue(kemem, "s")
    assert len(got) == 2 and all(t.startswith("新") for t in got)
    kemem.close()


@pytest.mark.engine
def test_created_again_by_another_process_never_shows_the_old_turns(kemem: Kemem) -> None:
    kemem.init()
    other = another_process(kemem)
    for i in range(3):
        kemem.add(turn(i, "旧"), session_id="s", **A)
    assert len(dialogue(kemem, "s")) == 6  # this process holds the old incarnation's turns
    other.delete_session("s", **A)  # not this process: nothing here is told
    other.add(turn(0, "新"), session_id="s", **A)
    got = dialogue(kemem, "s")
    assert len(got) == 2 and all(t.startswith("新") for t in got)
    other.close()
    kemem.close()


@pytest.mark.engine
def test_another_process_messages_are_seen(kemem: Kemem) -> None:
    kemem.init()
    other = another_process(kemem)
    kemem.add(turn(0, "甲"), session_id="s", **A)
    assert len(dialogue(kemem, "s")) == 2
    other.add(turn(1, "乙"), session_id="s", **A)
    kemem.add(turn(2, "甲"), session_id="s", **A)
    got = dialogue(kemem, "s")
    assert [t[:1] for t in got] == ["甲", "甲", "乙", "乙", "甲", "甲"]
    assert [t[:1] for t in dialogue(other, "s")] == ["甲", "甲", "乙", "乙", "甲", "甲"]
    other.close()
    kemem.close()


@pytest.mark.engine
def test_a_turns_view_reads_a_few_documents_not_the_window(kemem: Kemem) -> None:
    kemem.init()
    for i in range(4):  # 8 turns: the window holds them all (the trigger is 20)
        kemem.add(turn(i, "问"), session_id="s", **A)
    kemem.drain()
    seen = counting(kemem)
    view = kemem.sessions.manager.view(scope_of(kemem), "s")
    assert len(view.turns) == 8
    assert seen == {"docs": 1, "mgets": 1}  # the state, one round trip
    kemem.add(turn(4, "问"), session_id="s", **A)
    kemem.drain()
    seen.update(docs=0, mgets=0)
    ctx = kemem.context("你还记得我去公园吗", session_id="s", max_tokens=2000, **A)
    assert [t.content[:1] for t in ctx.dialogue[:-1]] == ["问"] * 10
    assert seen["docs"] <= 3, seen  # the state (and an open batch, if any)
    kemem.engine.hook = None
    kemem.close()
