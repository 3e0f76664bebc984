"""bench.load's chat-app workload and how a throughput is read at a p99 bound (issue 42)."""

from __future__ import annotations

import pytest

from bench.load import TURN_OPS, Workload, api_call, client_counts, within_slo


def test_a_session_turn_is_a_context_call_then_the_turn_remembered() -> None:
    work = Workload(5, add_share=0.1, kind="session", session="s-1")
    ops = [work.next() for _ in range(6)]
    assert [op for op, _ in ops] == ["context", "remember"] * 3
    for (_, ctx), (_, rem) in zip(ops[::2], ops[1::2], strict=True):
        assert ctx["session_id"] == rem["session_id"] == "s-1"
        assert ctx["user_id"] == rem["user_id"]
        said = ctx["message"]
        user, agent = rem["messages"]
        assert user == {"role": "user", "content": said}
        assert agent["role"] == "assistant" and agent["content"]
    # the same user all session long, and the Python call a remember is: add(messages, ...)
    assert len({body["user_id"] for _, body in ops}) == 1
    verb, text, kw = api_call("remember", ops[1][1])
    assert verb == "add" and text == ops[1][1]["messages"] and kw["session_id"] == "s-1"
    assert TURN_OPS["session"] == ("context",)


def test_client_counts() -> None:
    assert client_counts("16") == [16]
    assert client_counts("1,2, 4") == [1, 2, 4]
    with pytest.raises(SystemExit):
        client_counts("0,2")


def _sm(rate: float, p99: float, errors: int = 0) -> dict[str, float]:
    return {"turns_per_s_median": rate, "turn_p99_ms_median": p99, "errors": errors}


def test_throughput_is_read_where_the_p99_bound_holds() -> None:
    summary = {
        "before@1": _sm(10.0, 80.0),
        "before@2": _sm(14.0, 130.0),  # faster, but over the bound
        "after@1": _sm(20.0, 40.0),
        "after@2": _sm(31.0, 90.0),
        "after@4": _sm(40.0, 95.0, errors=1),  # an error disqualifies
    }
    slo = within_slo(summary, 100.0)["trees"]
    assert slo["before"]["turns_per_s"] == 10.0 and slo["before"]["clients"] == 1
    assert slo["after"]["turns_per_s"] == 31.0 and slo["after"]["clients"] == 2
    assert slo["after"]["x_first"] == 3.1


def test_no_count_within_the_bound_reads_zero() -> None:
    slo = within_slo({"before@4": _sm(30.0, 400.0), "after@4": _sm(50.0, 90.0)}, 100.0)
    assert slo["trees"]["before"]["turns_per_s"] == 0.0
    assert slo["trees"]["after"]["x_first"] is None  # no ratio to a zero
