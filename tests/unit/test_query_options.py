"""Query options (contract/params.py) refuse what would fail later: numbers that are not finite,
a ``now`` outside the records' time rule, too many ``exclude_ids``, filters the store would refuse
(checked up front) and text UTF-8 cannot encode. No engine needed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kemem_es.config import Settings
from kemem_es.contract.params import (
    MAX_CONTEXT_CHARS,
    MAX_EXCLUDE_IDS,
    MAX_QUERY_CHARS,
    QueryParams,
)
from kemem_es.errors import InvalidInput

LONE = "\ud800 x"  # a lone surrogate, as a JSON "\ud800" escape arrives


@pytest.mark.parametrize(
    "options",
    [
        {"half_life_days": float("inf")},
        {"strength_k": float("inf")},
        {"vec_floor": float("nan")},
        {"anchor_weight": float("nan")},
        {"weights": {"kw": float("nan"), "vec": 0.5, "time": 0.25, "strength": 0.25}},
        {"entity_weights": {"kw": float("inf")}},
    ],
)
def test_query_numbers_must_be_finite(options: dict) -> None:
    """half_life_days=Infinity was an OverflowError (500); a NaN weight passed the sum check."""
    with pytest.raises(ValidationError, match="finite number"):
        QueryParams(agent_id="a", user_id="u", **options)


@pytest.mark.parametrize("days", [1e308, 1e16, 36_501])
def test_half_life_is_at_most_a_century(days: float) -> None:
    """1e308 days overflowed building the engine's duration (a 500, even with degrade); from
    about 1e16 the engine refused the duration it was sent."""
    with pytest.raises(ValidationError, match="half_life_days"):
        QueryParams(agent_id="a", user_id="u", half_life_days=days)
    assert QueryParams(agent_id="a", user_id="u", half_life_days=36_500).half_life_days == 36_500


@pytest.mark.parametrize(
    ("now", "message"),
    [
        ("0001-01-01T00:00:00", "year 1 is outside"),
        ("2025-06-01T12:00:00+20:00", r"\+20:00"),
        (1700000000, "numbers are ambiguous"),
        ("1700000000", "not a date"),
    ],
)
def test_query_now_follows_the_records_time_rule(now: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        QueryParams(agent_id="a", user_id="u", now=now)
    assert QueryParams(agent_id="a", user_id="u", now="2025-06-01T12:00:00+08:00").now


def test_exclude_ids_are_bounded() -> None:
    QueryParams(agent_id="a", user_id="u", exclude_ids=["m"] * MAX_EXCLUDE_IDS)
    with pytest.raises(ValidationError, match="exclude_ids"):
        QueryParams(agent_id="a", user_id="u", exclude_ids=["m"] * (MAX_EXCLUDE_IDS + 1))


def test_the_utterance_and_its_context_are_bounded() -> None:
    """A 500 KB utterance held a core for 70 s in the CPU stages; /query took any length."""
    from kemem_es import Kemem

    QueryParams(agent_id="a", user_id="u", context=["嗯" * MAX_CONTEXT_CHARS])
    with pytest.raises(ValidationError, match="context"):
        QueryParams(agent_id="a", user_id="u", context="嗯" * (MAX_CONTEXT_CHARS + 1))
    with pytest.raises(ValidationError, match="context"):  # a list counts as its lines
        QueryParams(agent_id="a", user_id="u", context=["嗯" * 15_000, "嗯" * 15_000])
    km = Kemem(es_url="http://127.0.0.1:9")  # never reached
    with pytest.raises(InvalidInput, match=f"at most {MAX_QUERY_CHARS:,}") as exc:
        km.query("FUZZQ" * 1_000, user_id="u", agent_id="a")
    assert exc.value.field == "text"


@pytest.mark.parametrize("op", ["not", "and", "or"])
def test_deeply_nested_filters_are_refused_in_the_query_options(op: str) -> None:
    """2,000 nested {"not": ...} used to reach the search and die of RecursionError."""
    deep: dict[str, Any] = {"session_id": "s1"}
    for _ in range(2000):
        deep = {op: deep} if op == "not" else {op: [deep]}
    with pytest.raises(ValidationError, match="nested deeper than"):
        QueryParams(agent_id="a", user_id="u", filters=deep)
    with pytest.raises(ValidationError, match="unknown field"):
        QueryParams(agent_id="a", user_id="u", filters={"colour": "red"})


def test_a_query_option_with_a_lone_surrogate_is_refused() -> None:
    for option in ("context", "user_name", "exclude_ids"):
        value = [LONE] if option == "exclude_ids" else LONE
        with pytest.raises(ValidationError, match="lone surrogate"):
            QueryParams(agent_id="a", user_id="u", **{option: value})


@pytest.mark.parametrize(
    ("name", "value"), [("KEMEM_QUERY_TIMEOUT_S", "inf"), ("KEMEM_DEDUP_THRESHOLD", "nan")]
)
def test_settings_numbers_must_be_finite(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match="finite number"):
        Settings()


def test_the_decay_origin_is_now_as_given() -> None:
    """The engine reads an aware ``now`` with its offset (as it reads records; the engine test
    checks the instant), a naive one as UTC: nothing is converted here, so the edges of the
    time rule stay in the engine's years."""
    from datetime import datetime

    from kemem_es.search.events import engine_instant

    aware = "2025-06-15T03:00:09+08:00"
    assert engine_instant(datetime.fromisoformat(aware)) == aware
    assert engine_instant(datetime(2025, 6, 14, 19, 0, 9, 500)) == "2025-06-14T19:00:09"
    edge = "9999-12-31T23:00:00-01:00"  # 10000-01-01 in UTC
    assert engine_instant(QueryParams(agent_id="a", user_id="u", now=edge).now) == edge
