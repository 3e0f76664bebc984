"""What the engine would refuse is refused before anything is written, by one rule each: dates,
offsets, metadata size, filter values, text UTF-8 cannot encode and memory ids. No engine
needed (the query options: test_query_options.py)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from kemem_es.errors import InvalidInput
from kemem_es.models import MAX_METADATA_ITEMS, EntityRecord
from kemem_es.store.documents import date_value, meta_entries
from kemem_es.store.filters import compile_filters
from kemem_es.store.validation import validate_items

SCOPE = {"agent_id": "qiyu", "user_id": "u1"}
LONE = "\ud800 x"  # a lone surrogate, as a JSON "\ud800" escape arrives


def event(**fields: Any) -> dict[str, Any]:
    return {**SCOPE, "description": "木木胃疼", "created_at": "2025-06-01 12:00:00", **fields}


def problems(*records: dict[str, Any]) -> list[str]:
    _, bad = validate_items(
        ((f"record {i}", r) for i, r in enumerate(records, 1)), "events", "user", None
    )
    return bad


# -- 1. dates: real calendar dates, offsets within ±18:00 ---------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2025-13-45", "month must be in 1..12"),
        ("2025-02-30", "day is out of range"),
        ("2025-06-01 24:00", "hour must be in 0..23"),
        ("2025-06-01T12:61:00", "minute must be in 0..59"),
        ("2025-06-01T12:00:00+20:00", r"offset \+20:00 is beyond ±18:00"),
        ("2025-06-01T12:00:00-1801", r"offset -18:01 is beyond ±18:00"),
        ("2025-06-01T12:00:00+0860", "minutes over 59"),
    ],
)
def test_a_date_that_is_not_a_real_time_names_record_and_field(text: str, message: str) -> None:
    for field in ("created_at", "updatetime"):
        (problem,) = problems(event(), event(**{field: text}))
        assert problem.startswith(f"record 2: {field}: ")
        assert re.search(message, problem), problem


def test_offsets_up_to_18_hours_and_leap_days_are_times() -> None:
    assert (
        problems(
            event(created_at="2025-06-01T12:00:00+18:00"),
            event(created_at="2025-06-01T12:00:00-18:00", description="b"),
            event(created_at="2024-02-29", description="c"),
        )
        == []
    )


def test_a_python_time_with_an_offset_beyond_18_hours_is_refused() -> None:
    far = datetime(2025, 6, 1, 12, tzinfo=timezone(timedelta(hours=20, minutes=30)))
    with pytest.raises(ValidationError, match=r"offset \+20:30 is beyond ±18:00"):
        EntityRecord(
            **SCOPE, entity_name="木木", entity_type="客体", kind="用户属性",
            description="木木喜欢蓝玫瑰", updatetime=far,
        )  # fmt: skip


@pytest.mark.parametrize(
    "value", ["2025-02-30", "2025-13-45", "2025-06-01T12:00:00+20:00", "0999-01-01"]
)
def test_metadata_that_only_looks_like_a_date_stays_text(value: str) -> None:
    """Metadata is the caller's own data: kept, matched as text, never sent as a date."""
    assert problems(event(metadata={"code": value})) == []
    assert meta_entries({"code": value}) == [{"key": "code", "kw": value}]


def test_metadata_dates_reach_the_engine_in_the_form_its_format_reads() -> None:
    # The engine's format reads neither "2025-06-01 12:00" nor a space before an offset.
    assert date_value("2025-06-01 12:00") == "2025-06-01T12:00:00"
    assert date_value("2025-06-01") == "2025-06-01T00:00:00"
    assert date_value("2025-06-01 12:00:00+0800") == "2025-06-01T12:00:00+08:00"
    (clause,) = compile_filters({"metadata.day": {"gte": "2025-06-01 12:00"}})
    assert clause["nested"]["query"]["bool"]["filter"][1] == {
        "range": {"meta.date": {"gte": "2025-06-01T12:00:00"}}
    }
    (clause,) = compile_filters({"metadata.code": {"gte": "2025-02-30"}})
    assert clause["nested"]["query"]["bool"]["filter"][1] == {
        "range": {"meta.kw": {"gte": "2025-02-30"}}
    }


@pytest.mark.parametrize(
    "when", ["2025-02-30", "2025-13-45", "2025-06-01T00:00:00+20:00", "0001-01-01"]
)
def test_a_date_filter_that_is_not_a_real_time_is_refused(when: str) -> None:
    """Before, the engine failed on it: list answered [] silently, delete_all a 503."""
    with pytest.raises(InvalidInput) as exc:
        compile_filters({"created_at": {"gte": when}})
    assert exc.value.field == "filters.created_at.gte"


# -- 2. metadata: at most 10,000 values in all (the engine's nested-document limit) --------
def test_metadata_over_10000_values_is_refused_before_writing() -> None:
    half = MAX_METADATA_ITEMS // 2
    assert problems(event(metadata={"a": list(range(half)), "b": list(range(half))})) == []
    (problem,) = problems(event(metadata={"a": list(range(half)), "b": list(range(half + 1))}))
    assert problem.startswith("record 1: metadata: ") and "10001 values" in problem


# -- 3. filters: 64-bit integers, flat metadata keys ----------------------
@pytest.mark.parametrize(
    "filters",
    [
        {"recall_count": {"gt": 99999999999999999999}},
        {"strength": {"lt": -(2**63) - 1}},
        {"metadata.n": {"gt": 2**64}},
        {"metadata.n": {"in": [1, 2**70]}},
        {"metadata.n": 2**63},
    ],
)
def test_integers_beyond_64_bits_are_refused_not_an_engine_error(filters: dict) -> None:
    with pytest.raises(InvalidInput, match="signed 64-bit range"):
        compile_filters(filters)
    compile_filters({"recall_count": {"gt": 2**63 - 1}, "metadata.n": {"gte": -(2**63)}})


@pytest.mark.parametrize("key", ["metadata.a.b", "metadata.", "metadata.a b"])
def test_a_metadata_key_no_memory_can_have_is_refused(key: str) -> None:
    """``metadata.a.b`` matched nothing, silently: metadata keys cannot hold a dot."""
    with pytest.raises(InvalidInput, match="no dots") as exc:
        compile_filters({key: "x"})
    assert exc.value.field == f"filters.{key}.eq"


# -- 4. text UTF-8 cannot encode ----------------------------------------------------------
@pytest.mark.parametrize(
    "fields",
    [
        {"description": LONE},
        {"deepinsight": LONE},
        {"place": LONE},
        {"keywords": ["ok", LONE]},
        {"user_name": LONE},
        {"metadata": {"mood": LONE}},
        {"metadata": {"tags": ["ok", LONE]}},
        {"id": LONE},
    ],
)
def test_a_record_with_a_lone_surrogate_names_the_field(fields: dict) -> None:
    (problem,) = problems(event(**fields))
    assert "lone surrogate" in problem and problem.startswith("record 1: ")
    assert next(iter(fields)) in problem


def test_a_filter_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(InvalidInput, match="lone surrogate"):
        compile_filters({"metadata.mood": {"in": ["ok", LONE]}})


# -- 5. memory ids the HTTP API can address ------------------------------------------------
@pytest.mark.parametrize("memory_id", ["foo/history", "a/b", "/"])
def test_a_memory_id_with_a_slash_is_refused(memory_id: str) -> None:
    """Starlette decodes %2F before routing: 'foo/history' would be foo's history route."""
    (problem,) = problems(event(id=memory_id))
    assert problem.startswith("record 1: id: ") and "'/'" in problem
    assert problems(event(id="foo-history_1.2")) == []


@pytest.mark.parametrize("memory_id", [".", "..", " .. "])
def test_a_dot_segment_memory_id_is_refused(memory_id: str) -> None:
    """URL clients resolve '.' and '..' away: /v1/memories/./history is /v1/memories/history,
    and the dashboard's delete of '.' reached the scope delete."""
    (problem,) = problems(event(id=memory_id))
    # " .. " is refused before: ids are not stripped (issue 40), so it never becomes ".."
    why = "whitespace" if memory_id != memory_id.strip() else "dot segments"
    assert problem.startswith("record 1: id: ") and why in problem
    assert problems(event(id="..."), event(id=".x"), event(id="x..")) == []
