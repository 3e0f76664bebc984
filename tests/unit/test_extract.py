"""infer=True's extractor against a loopback server speaking the chat-completions protocol.

No engine and no network: the stub listens on 127.0.0.1 (port 0), records each request and
answers with fixed JSON, a status, or nothing for a while."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from llm_stub import Reply, Stub, chat, serve_stub

from kemem_es.config import Settings
from kemem_es.errors import ExtractionError, InvalidInput
from kemem_es.memory.extract import (
    Extractor,
    OpenAIExtractor,
    load_prompt,
    parse_extraction,
)
from kemem_es.models import EntityRecord, EventRecord
from kemem_es.store.validation import validate_items

KEY = "sk-test-0123456789abcdef"
CST = timezone(timedelta(hours=8))
NOW = datetime(2025, 6, 8, 20, 15, 0, tzinfo=CST)
DIALOGUE = [
    {"role": "system", "content": "你是祁煜，一位温柔的画家。"},
    {"role": "user", "content": "昨天和室友小满去吃了螺蛳粉，辣得我眼泪都出来了！"},
    {"role": "assistant", "content": "哈哈，你还是这么爱吃辣。下次带我一起？"},
    {"role": "user", "content": "好呀，小满的生日是十一月八号，到时候一起去。"},
]
GOOD = {
    "events": [
        {
            "description": "木木昨天和室友小满去吃了螺蛳粉",
            "deepinsight": "这表明了木木很喜欢吃辣",
            "keywords": ["螺蛳粉", "室友", "吃辣"],
            "place": "",
            "scene": "聚餐",
            "time": "2025-06-07 00:00:00",
        },
        {"description": "木木和祁煜约好下次一起去吃螺蛳粉", "keywords": "约定、螺蛳粉"},
    ],
    "entities": [
        {
            "entity_name": "木木",
            "entity_type": "客体",
            "kind": "用户属性",
            "keyword": "饮食",
            "description": "木木很爱吃辣，喜欢螺蛳粉",
        },
        {
            "entity_name": "小满",
            "entity_type": "具体实体",
            "kind": "特殊实体属性",
            "keyword": "生日",
            "description": "小满的生日是11月8日",
        },
    ],
}


@pytest.fixture()
def stub() -> Iterator[Stub]:
    with serve_stub(GOOD) as s:
        yield s


def extractor(stub: Stub, **kw: Any) -> OpenAIExtractor:
    kw.setdefault("api_key", KEY)
    kw.setdefault("timeout_s", 5.0)
    return OpenAIExtractor(stub.url, "qwen-test", **kw)


def run(stub: Stub, **kw: Any):
    with extractor(stub, **kw) as ex:
        return ex.extract(DIALOGUE, user_name="木木", agent_name="祁煜", now=NOW)


def fails(stub: Stub, **kw: Any) -> ExtractionError:
    with pytest.raises(ExtractionError) as info:
        run(stub, **kw)
    return info.value


# -- a good answer --------------------------------------------------------------------------------


def test_good_answer_is_mapped_and_validated(stub: Stub) -> None:
    result = run(stub)
    assert len(result.events) == 2 and len(result.entities) == 2
    first, second = result.events
    assert first == {
        "description": "木木昨天和室友小满去吃了螺蛳粉",
        "deepinsight": "这表明了木木很喜欢吃辣",
        "keywords": ["螺蛳粉", "室友", "吃辣"],
        "place": "",
        "scene": "聚餐",
        "created_at": "2025-06-07T00:00:00+08:00",  # the model's local time, in now's zone
    }
    assert second["created_at"] == NOW.isoformat()  # no time → now
    assert second["keywords"] == ["约定", "螺蛳粉"]
    assert result.entities[1] == {
        "entity_name": "小满",
        "entity_type": "具体实体",
        "kind": "特殊实体属性",
        "keyword": "生日",
        "description": "小满的生日是11月8日",
        "updatetime": NOW.isoformat(),
    }
    assert result.ignored == []
    # No scope in the output; with the caller's scope each one is a valid record.
    for data in result.events:
        assert not {"agent_id", "user_id", "id", "strength"} & set(data)
        rec = EventRecord(agent_id="qiyu", user_id="u_mumu", **data)
        assert rec.created_at is not None and rec.created_at.utcoffset() == timedelta(hours=8)
    for data in result.entities:
        EntityRecord(agent_id="qiyu", user_id="u_mumu", **data)
    # …and they pass the one validation every write path runs.
    for kind in ("events", "entities"):
        items = [
            (f"{k}[{i}]", {**d, "agent_id": "qiyu", "user_id": "u_mumu"})
            for i, (k, d) in enumerate(result.items())
            if k == kind
        ]
        good, problems = validate_items(items, kind, "user", None)
        assert problems == [] and len(good) == 2


def test_the_request_is_an_openai_chat_completion(stub: Stub) -> None:
    run(stub)
    assert len(stub.requests) == 1
    req = stub.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "qwen-test"
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    # The system prompt is the shipped file with the names and the time filled in.
    shipped = load_prompt()
    assert system["content"].startswith(shipped.splitlines()[0])
    assert "主体（虚拟人 / AI 角色）的名字：祁煜" in system["content"]
    assert "客体（用户）的名字：木木" in system["content"]
    assert "2025-06-08 20:15:00 星期日（UTC+08:00）" in system["content"]
    assert "{now}" not in system["content"] and "{user_name}" not in system["content"]
    # The dialogue, speaker by speaker; the persona (system turn) is not dialogue.
    assert "木木：昨天和室友小满去吃了螺蛳粉，辣得我眼泪都出来了！" in user["content"]
    assert "祁煜：哈哈，你还是这么爱吃辣。下次带我一起？" in user["content"]
    assert "木木：好呀，小满的生日是十一月八号" in user["content"]
    assert "温柔的画家" not in user["content"]


def test_json_mode_off_and_no_key(stub: Stub) -> None:
    run(stub, json_mode=False, api_key=None)
    req = stub.requests[0]
    assert "response_format" not in req["body"]
    assert "Authorization" not in req["headers"]


def test_fenced_json_and_a_think_block_are_tolerated(stub: Stub) -> None:
    text = json.dumps(GOOD, ensure_ascii=False)
    stub.answer(Reply(body=chat(f"```json\n{text}\n```")))
    assert len(run(stub).events) == 2
    stub.answer(Reply(body=chat(f"<think>用户提到了螺蛳粉……</think>\n```\n{text}\n```")))
    assert len(run(stub).entities) == 2
    stub.answer(Reply(body=chat(f"好的，整理结果如下：\n{text}\n以上。")))
    assert len(run(stub).events) == 2


def test_content_parts_are_joined(stub: Stub) -> None:
    text = json.dumps(GOOD, ensure_ascii=False)
    parts = [{"type": "text", "text": text[:10]}, {"type": "text", "text": text[10:]}]
    stub.answer(Reply(body=chat(parts)))
    assert len(run(stub)) == 4


def test_extra_keys_are_dropped_and_reported_never_stored(stub: Stub) -> None:
    answer = {
        "events": [{"description": "木木去爬山", "agent_id": "evil", "strength": 1e5, "id": "x"}],
        "entities": [],
        "summary": "…",
    }
    stub.answer_json(answer)
    result = run(stub)
    assert set(result.events[0]) == {
        "description",
        "deepinsight",
        "keywords",
        "place",
        "scene",
        "created_at",
    }
    assert result.ignored == ["summary", "events[0].agent_id", "events[0].strength", "events[0].id"]


def test_exact_duplicates_are_kept_once_and_nulls_mean_not_said(stub: Stub) -> None:
    entity = dict(GOOD["entities"][0], keyword=None)
    event = {"description": "木木去爬山", "place": None, "keywords": ["爬山", " "], "time": None}
    stub.answer_json({"events": [event, event], "entities": [entity, dict(entity)]})
    result = run(stub)
    assert len(result.events) == 1 and len(result.entities) == 1
    assert result.events[0]["place"] == "" and result.events[0]["created_at"] == NOW.isoformat()
    assert result.entities[0]["keyword"] == "" and result.events[0]["keywords"] == ["爬山"]
    assert [kind for kind, _ in result.items()] == ["events", "entities"]


def test_nothing_to_remember_is_an_empty_extraction(stub: Stub) -> None:
    stub.answer_json({"events": [], "entities": []})
    result = run(stub)
    assert result.events == [] and result.entities == [] and len(result) == 0


# -- bad answers ----------------------------------------------------------------------------------


def test_malformed_json(stub: Stub) -> None:
    stub.answer(Reply(body=chat('{"events": [{"description": "木木去爬山"')))
    err = fails(stub)
    assert "not JSON" in str(err)
    stub.answer(Reply(body=chat('{"events": [', finish="length")))
    assert "cut off" in str(fails(stub))


def test_empty_answer_and_no_choices(stub: Stub) -> None:
    stub.answer(Reply(body=chat("")))
    assert "empty" in str(fails(stub))
    stub.answer(Reply(body=chat(None)))
    assert "empty" in str(fails(stub))
    stub.answer(Reply(body={"id": "x", "choices": []}))
    assert "no choices" in str(fails(stub))
    stub.answer(Reply(body="<html>gateway</html>"))
    assert "not JSON" in str(fails(stub))


def test_invalid_kind_names_the_item(stub: Stub) -> None:
    bad = json.loads(json.dumps(GOOD))
    bad["entities"][1]["kind"] = "喜好"
    stub.answer_json(bad)
    err = fails(stub)
    assert str(err).startswith("the extractor's answer is not valid memory JSON: entities[1].kind")
    assert "nothing was stored" in str(err)
    assert err.problems[0].startswith("entities[1].kind: Input should be '用户属性'")


def test_missing_description_and_every_problem_listed(stub: Stub) -> None:
    bad = json.loads(json.dumps(GOOD))
    del bad["events"][0]["description"]
    bad["events"][1]["time"] = "昨天下午"
    bad["entities"][0]["entity_type"] = "用户"
    stub.answer_json(bad)
    err = fails(stub)
    assert "events[0].description: Field required" in str(err)
    assert "(and 2 more)" in str(err)
    assert err.problems[0] == "events[0].description: Field required"
    assert err.problems[1].startswith("events[1].time: Value error, not a date")
    assert err.problems[2].startswith("entities[0].entity_type: Input should be '主体'")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("[1, 2]", "is a JSON list; expected an object"),
        ('{"memories": []}', "neither 'events' nor 'entities' (keys: memories)"),
        ('{"events": "木木去爬山"}', "events: expected a list, got str"),
        ('{"events": ["木木去爬山"]}', "events[0]: expected an object, got str"),
        ('{"events": [{"description": "  "}]}', "events[0].description: String should have"),
        ('{"entities": [{"entity_name": "木木"}]}', "entities[0].entity_type: Field required"),
        ('{"events": [{"description": "x", "time": 20250601}]}', "events[0].time: Value error"),
        (json.dumps({"events": [{"description": "x"}] * 101}), "events: 101 items; at most 100"),
    ],
)
def test_answers_that_are_not_memories(answer: str, message: str) -> None:
    with pytest.raises(ExtractionError) as info:
        parse_extraction(answer, now=NOW)
    assert message in str(info.value)


# -- the endpoint misbehaving ---------------------------------------------------------------------


def test_http_500_is_retried_once(stub: Stub) -> None:
    good = Reply(body=chat(json.dumps(GOOD)))
    stub.answer(Reply(500, {"error": {"message": "overloaded"}}), good)
    assert len(run(stub).events) == 2
    assert len(stub.requests) == 2

    stub.requests.clear()
    stub.answer(Reply(502, "bad gateway"))
    err = fails(stub)
    assert "failed (HTTP 502)" in str(err) and "bad gateway" not in str(err)
    assert err.detail == "bad gateway"  # the upstream's words: on the error, not its message
    assert len(stub.requests) == 2  # one retry, no more


def test_http_401_does_not_echo_the_key(stub: Stub) -> None:
    stub.answer(Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    err = fails(stub)
    assert "refused the credentials (HTTP 401); check KEMEM_LLM_API_KEY" in str(err)
    assert KEY not in str(err) and KEY not in repr(err.__cause__)
    assert len(stub.requests) == 1  # not retried


def test_http_400_explains_and_hints_json_mode(stub: Stub) -> None:
    stub.answer(Reply(400, {"error": {"message": f"response_format is not supported ({KEY})"}}))
    err = fails(stub)
    assert "refused the request (HTTP 400)" in str(err) and "not supported" not in str(err)
    assert err.detail == "response_format is not supported (***)"
    assert "KEMEM_LLM_JSON_MODE=false" in str(err)
    stub.answer(Reply(404, {"error": "no such route"}))
    assert "check KEMEM_LLM_BASE_URL" in str(fails(stub))


def test_slow_answer_hits_the_timeout(stub: Stub) -> None:
    stub.answer(Reply(body=chat(json.dumps(GOOD)), delay=10))
    started = time.monotonic()
    err = fails(stub, timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 + 2
    assert str(err).startswith(f"the extractor at {stub.url}/chat/completions did not answer")
    assert "within 0.5 s" in str(err)
    assert len(stub.requests) == 1  # a timeout spent the budget: no retry


def test_a_trickling_answer_is_cut_at_the_deadline(stub: Stub) -> None:
    stub.answer(Reply(body=chat(json.dumps(GOOD)), trickle=0.1))  # ~100 s for the whole body
    started = time.monotonic()
    err = fails(stub, timeout_s=0.5)
    assert time.monotonic() - started < 0.5 + 2
    assert "did not answer within 0.5 s" in str(err)


def test_an_oversized_answer_is_refused(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    from kemem_es.memory.extract import client

    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 2**20)
    stub.answer(Reply(body=chat("x" * (2**20 + 1))))
    assert "sent more than 1 MiB" in str(fails(stub))


def test_unreachable_endpoint_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the call: nothing listens
    ex = OpenAIExtractor(f"http://127.0.0.1:{port}/v1", "m", timeout_s=5)
    started = time.monotonic()
    with pytest.raises(ExtractionError, match="could not reach the extractor at http://127"):
        ex.extract("木木去爬山了", now=NOW)
    assert time.monotonic() - started < 2


# -- async ----------------------------------------------------------------------------------------


def test_aextract_good_and_timeout(stub: Stub) -> None:
    ex = extractor(stub)
    result = asyncio.run(ex.aextract(DIALOGUE, user_name="木木", agent_name="祁煜", now=NOW))
    assert len(result.events) == 2 and len(result.entities) == 2
    stub.answer(Reply(body=chat("{}"), delay=10))
    ex = extractor(stub, timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(ExtractionError, match=r"did not answer within 0\.5 s"):
        asyncio.run(ex.aextract(DIALOGUE, now=NOW))
    assert time.monotonic() - started < 0.5 + 2


# -- settings, prompt file, inputs, logs ----------------------------------------------------------


def test_from_settings_and_prompt_override(
    stub: Stub, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = tmp_path / "my_prompt.md"
    prompt.write_text("只输出 JSON。用户叫{user_name}，现在是{now}。", encoding="utf-8")
    monkeypatch.setenv("KEMEM_LLM_BASE_URL", stub.url + "/")
    monkeypatch.setenv("KEMEM_LLM_MODEL", "deepseek-chat")
    monkeypatch.setenv("KEMEM_LLM_API_KEY", KEY)
    monkeypatch.setenv("KEMEM_LLM_TIMEOUT_S", "7")
    monkeypatch.setenv("KEMEM_LLM_JSON_MODE", "false")
    monkeypatch.setenv("KEMEM_EXTRACT_PROMPT_PATH", str(prompt))
    settings = Settings()
    assert KEY not in repr(settings)  # a SecretStr
    ex = OpenAIExtractor.from_settings(settings)
    assert isinstance(ex, Extractor)
    assert ex.timeout_s == 7 and KEY not in repr(ex)
    ex.extract(DIALOGUE, user_name="木木", now=NOW)
    body = stub.requests[0]["body"]
    assert body["model"] == "deepseek-chat" and "response_format" not in body
    assert body["messages"][0]["content"] == (
        "只输出 JSON。用户叫木木，现在是2025-06-08 20:15:00 星期日（UTC+08:00）。"
    )
    assert stub.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def test_settings_without_an_llm_or_prompt() -> None:
    with pytest.raises(ExtractionError, match="set KEMEM_LLM_BASE_URL"):
        OpenAIExtractor.from_settings(Settings(llm_model="m"))
    with pytest.raises(ExtractionError, match=r"cannot read /nonexistent/p\.md"):
        OpenAIExtractor("http://127.0.0.1:1/v1", "m", prompt_path="/nonexistent/p.md")
    with pytest.raises(ExtractionError, match="llm_base_url"):
        OpenAIExtractor("127.0.0.1:8000", "m")


def test_the_shipped_prompt_example_is_itself_valid() -> None:
    """The model imitates the example: it must pass the validation its answer will meet."""
    prompt = load_prompt()
    for placeholder in ("{now}", "{user_name}", "{agent_name}"):
        assert placeholder in prompt
    example = [line for line in prompt.splitlines() if line.startswith('{"events"')]
    assert len(example) == 1
    result = parse_extraction(example[0], now=NOW)
    assert len(result.events) == 1 and len(result.entities) == 4 and result.ignored == []
    kinds = {e["kind"] for e in result.entities}
    assert kinds == {"用户属性", "用户关系", "特殊实体属性", "与主体和客体的关系"}


def test_bad_messages_are_the_callers_input(stub: Stub) -> None:
    ex = extractor(stub)
    for messages in ([], [{"role": "system", "content": "persona"}], [{"role": "user"}], {}):
        with pytest.raises(InvalidInput):
            ex.extract(messages, now=NOW)
    assert stub.requests == []  # refused before any call


def test_logs_carry_neither_text_nor_key(stub: Stub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    run(stub)
    stub.answer(Reply(500, f"boom {KEY}"))
    fails(stub)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "extracted 2 events, 2 entities from 4 messages" in logged
    assert KEY not in logged
    assert "螺蛳粉" not in logged and "木木" not in logged


def test_a_base_url_with_a_query_keeps_it_after_the_path(stub: Stub) -> None:
    ex = OpenAIExtractor(f"{stub.url}/?api-version=2024-06-01", "qwen-test", timeout_s=5)
    ex.extract(DIALOGUE, now=NOW)
    assert stub.requests[-1]["path"] == "/v1/chat/completions?api-version=2024-06-01"
    assert "api-version" not in ex.where  # a query may carry a key: not in messages


@pytest.mark.parametrize("key", ["sk-密钥", "sk-ab\ncd", "sk-ab cd"])
def test_a_key_no_header_can_carry_is_a_clear_settings_error(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kemem_es.config import get_settings

    monkeypatch.setenv("KEMEM_LLM_API_KEY", key)
    with pytest.raises(InvalidInput, match=r"KEMEM_LLM_API_KEY: .*printable ASCII") as exc:
        get_settings()
    assert key not in str(exc.value) and "密钥" not in str(exc.value)
    with pytest.raises(ExtractionError, match=r"llm_api_key: .*printable ASCII"):
        OpenAIExtractor("http://127.0.0.1:9/v1", "m", api_key=key)
