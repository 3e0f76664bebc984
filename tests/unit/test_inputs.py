"""What the Memory API accepts as a memory before any engine is involved (memory/inputs.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from kemem_es.errors import InvalidInput
from kemem_es.memory.inputs import to_record_data
from kemem_es.models import EventRecord, has_visible_text
from kemem_es.store.layout import checked_kind
from kemem_es.store.scope import Scope

SCOPE = Scope.of(agent_id="qiyu", user_id="u1")
NOW = datetime(2025, 6, 1, 12, 0)


def record(data: object) -> dict:
    return to_record_data(data, "events", SCOPE, None, None, NOW)


@pytest.mark.parametrize("text", ["", "  \n\t", "\x00", "\x00\x01", "\u200b", "\u200b \ufeff"])
def test_text_without_anything_visible_is_not_a_memory(text: str) -> None:
    assert not has_visible_text(text)
    with pytest.raises(InvalidInput) as exc:
        record(text)
    assert exc.value.field == "text"


def test_messages_without_anything_visible_are_not_a_memory() -> None:
    with pytest.raises(InvalidInput) as exc:
        record([{"role": "user", "content": "\u200b"}, {"role": "assistant", "content": " "}])
    assert exc.value.field == "messages"


def test_bytes_are_refused_as_bytes_not_as_messages() -> None:
    with pytest.raises(InvalidInput) as exc:
        record(b"\xe8\x83\x83\xe7\x96\xbc")
    assert exc.value.field == "data" and "decode" in str(exc.value)


def test_visible_text_is_kept_as_written() -> None:
    for text in ("胃疼", "ok", "😀", "\u200b胃疼\u200b"):
        assert has_visible_text(text)
    assert record("  木木胃疼  ")["description"] == "  木木胃疼  "


def test_a_record_whose_description_shows_nothing_names_the_field() -> None:
    with pytest.raises(ValueError, match="description") as exc:
        EventRecord(agent_id="qiyu", user_id="u1", description="\u200b\x00", created_at=NOW)
    assert "no visible text" in str(exc.value)


@pytest.mark.parametrize(
    ("ids", "field"),
    [
        ({"agent_id": 5, "user_id": "u1"}, "agent_id"),
        ({"agent_id": "a1", "user_id": 5}, "user_id"),
        ({"agent_id": "a1", "user_id": "u\x1fx"}, "user_id"),  # the scope keys' separator
        ({"agent_id": "a1\x1fu", "user_id": "x"}, "agent_id"),
        ({"agent_id": "a" * 201, "user_id": "u1"}, "agent_id"),
    ],
)
def test_scope_ids_follow_the_records_rule(ids: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        Scope.of(**ids)
    assert exc.value.field == field and str(exc.value).startswith(f"{field}: ")


def test_scope_ids_with_surrounding_spaces_are_refused_not_stripped() -> None:
    """Issue 40: " u1" read u1's memories; an id is taken as given (docs/consistency.md)."""
    for ids, field in (({"agent_id": " a1", "user_id": "u1"}, "agent_id"),
                       ({"agent_id": "a1", "user_id": "u1 "}, "user_id")):  # fmt: skip
        with pytest.raises(InvalidInput) as exc:
            Scope.of(**ids)
        assert exc.value.field == field


@pytest.mark.parametrize("value", ["x", "event", None, 5, ["events"]])
def test_a_kind_is_one_of_the_two(value: object) -> None:
    with pytest.raises(InvalidInput) as exc:
        checked_kind(value)
    assert exc.value.field == "kind"
    assert checked_kind("events") == "events" and checked_kind("entities") == "entities"


def test_metadata_must_be_a_mapping() -> None:
    with pytest.raises(InvalidInput) as exc:
        to_record_data("木木胃疼", "events", SCOPE, None, [1], NOW)
    assert exc.value.field == "metadata"


LONE = "\ud800 x"  # a lone surrogate, as a JSON "\ud800" escape arrives


def test_text_utf8_cannot_encode_is_refused_not_a_unicode_error() -> None:
    """It reached the id's sha1 (UnicodeEncodeError, a 500 over HTTP)."""
    with pytest.raises(InvalidInput, match="lone surrogate") as exc:
        record(LONE)
    assert exc.value.field == "text"
    with pytest.raises(InvalidInput, match="lone surrogate") as exc:
        record([{"role": "user", "content": "你好"}, {"role": "assistant", "content": LONE}])
    assert exc.value.field == "messages[1].content"


def test_a_query_utf8_cannot_encode_is_refused_before_the_engine() -> None:
    from kemem_es import Kemem

    km = Kemem(es_url="http://127.0.0.1:9")  # never reached
    with pytest.raises(InvalidInput, match="lone surrogate") as exc:
        km.query(LONE, user_id="u1", agent_id="qiyu")
    assert exc.value.field == "text"


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("KEMEM_QUERY_TIMEOUT_S", "-1"),
        ("KEMEM_ENGINE_PORT", "abc"),
        ("KEMEM_SERVER_API_KEYS", "notjson"),
    ],
)
def test_a_bad_setting_names_its_variable(monkeypatch, env: str, value: str) -> None:
    """A pydantic traceback before; now one InvalidInput naming the variable (the CLI: exit 2),
    without its value (it may be a key)."""
    import subprocess
    import sys

    from kemem_es.config import get_settings

    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidInput) as err:
        get_settings()
    assert err.value.field == env and value not in str(err.value)
    proc = subprocess.run(
        [sys.executable, "-m", "kemem_es.cli.app", "engine", "status"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and env in proc.stderr and "Traceback" not in proc.stderr


def test_the_cluster_url_must_be_http() -> None:
    """ftp://… was accepted and timed out 12 s later; empty still means the local engine."""
    from kemem_es.config import get_settings

    with pytest.raises(InvalidInput) as err:
        get_settings(es_url="ftp://127.0.0.1:9281")
    assert err.value.field == "es_url"
    assert get_settings(es_url="https://search.example:443").url.startswith("https://")
    assert get_settings(es_url="").url == get_settings().local_url
