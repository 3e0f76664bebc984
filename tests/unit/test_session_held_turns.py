"""The turns a process holds of its sessions (session/held.py): keyed by scope, session and
incarnation, only messages stamped with the incarnation, bounded, dropped on delete."""

from __future__ import annotations

from typing import Any

from kemem_es.session.held import HeldTurns
from kemem_es.store.scope import Scope

A = Scope.of(agent_id="a1", user_id="u1")
B = Scope.of(agent_id="a1", user_id="u2")


def msg(seq: int, inc: str | None = "t1", content: str = "") -> dict[str, Any]:
    doc: dict[str, Any] = {"seq": seq, "role": "user", "content": content or f"m{seq}"}
    if inc is not None:
        doc["incarnation"] = inc
    return doc


def test_held_turns_come_back_by_number() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", "t1", [msg(0), msg(1), msg(2)])
    got = c.turns(A, "s", "t1", range(1, 5))
    assert sorted(got) == [1, 2] and got[1]["content"] == "m1"


def test_another_incarnation_sees_nothing_of_the_old_one() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", "t1", [msg(0, content="old")])
    assert c.turns(A, "s", "t2", range(3)) == {}  # the session created again: seq 0 is new


def test_a_message_of_another_incarnation_is_not_kept() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", "t2", [msg(0, "t1"), msg(1, None), msg(2, "t2")])
    assert sorted(c.turns(A, "s", "t2", range(3))) == [2]


def test_no_incarnation_holds_nothing() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", None, [msg(0, None)])
    c.put_done(A, "s", None, 0)
    assert c.turns(A, "s", None, range(3)) == {} and c.done(A, "s", None) == set()
    assert len(c) == 0


def test_the_scope_is_part_of_the_key() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", "t1", [msg(0)])
    c.put_done(A, "s", "t1", 0)
    assert c.turns(B, "s", "t1", range(3)) == {} and c.done(B, "s", "t1") == set()


def test_drop_forgets_a_session_or_a_scope() -> None:
    c = HeldTurns()
    for sid in ("s", "t"):
        c.put_turns(A, sid, "t1", [msg(0)])
    c.put_turns(B, "s", "t1", [msg(0)])
    c.drop(A, "s")
    assert c.turns(A, "s", "t1", [0]) == {} and c.turns(A, "t", "t1", [0])
    c.drop(A)
    assert c.turns(A, "t", "t1", [0]) == {} and c.turns(B, "s", "t1", [0])


def test_prune_drops_turns_before_the_dialogue_not_done_batches() -> None:
    c = HeldTurns()
    c.put_turns(A, "s", "t1", [msg(n) for n in range(12)])
    c.put_done(A, "s", "t1", 0)
    c.put_done(A, "s", "t1", 10)
    c.prune(A, "s", "t1", 10)
    assert sorted(c.turns(A, "s", "t1", range(20))) == [10, 11]
    assert c.done(A, "s", "t1") == {0, 10}  # a state may list batch 0 until the next add


def test_bounded_in_sessions_least_recently_used_out() -> None:
    c = HeldTurns(sessions=2)
    c.put_turns(A, "s1", "t", [msg(0, "t")])
    c.put_turns(A, "s2", "t", [msg(0, "t")])
    assert c.turns(A, "s1", "t", [0])  # s1 used: s2 is the oldest now
    c.put_turns(A, "s3", "t", [msg(0, "t")])
    assert len(c) == 2
    assert c.turns(A, "s2", "t", [0]) == {} and c.turns(A, "s1", "t", [0])


def test_bounded_in_turns_per_session_oldest_out() -> None:
    c = HeldTurns(turns=3)
    c.put_turns(A, "s", "t1", [msg(n) for n in range(5)])
    assert sorted(c.turns(A, "s", "t1", range(5))) == [2, 3, 4]


def test_what_is_held_is_a_copy() -> None:
    c = HeldTurns()
    doc = msg(0)
    c.put_turns(A, "s", "t1", [doc])
    doc["content"] = "changed"
    assert c.turns(A, "s", "t1", [0])[0]["content"] == "m0"
