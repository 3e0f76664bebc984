"""Reliability round 3 (issue 40), items 2 and 3: every failure of the public verbs is a
KememError, whatever the input or the LLM's answer, and an upstream LLM's error body never
reaches an HTTP answer (a status and a generic reason; the body at DEBUG in the log)."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import Any

import pytest
from llm_stub import Reply, Stub, chat, serve_stub

from kemem_es.errors import ExtractionError, InternalError, KememError
from kemem_es.memory.extract import OpenAIExtractor, parse_extraction

A = {"agent_id": "qiyu", "user_id": "u_mumu"}
GOOD = {"events": [{"description": "木木昨天去吃了螺蛳粉", "keywords": ["螺蛳粉"]}], "entities": []}


def nested(depth: int) -> str:
    return '{"events": ' + "[" * depth + "]" * depth + "}"


# -- engine-free ------------------------------------------------------------------------------
def test_a_deeply_nested_answer_is_an_extraction_error_not_a_recursion_error() -> None:
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    with pytest.raises(ExtractionError, match="nested too deeply"):
        parse_extraction(nested(50_000), now=now)


def test_a_nested_http_body_and_a_nested_answer_are_extraction_errors() -> None:
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    with serve_stub(GOOD) as stub:
        ex = OpenAIExtractor(stub.url, "m", timeout_s=5)
        stub.answer(Reply(body=chat(nested(50_000))))
        with pytest.raises(ExtractionError, match="nested too deeply"):
            ex.extract("我昨天去吃了螺蛳粉", now=now)
        deep_body = '{"choices": ' + "[" * 50_000 + "]" * 50_000 + "}"
        stub.answer(Reply(body=deep_body))
        with pytest.raises(ExtractionError, match="nested too deeply"):
            ex.extract("我昨天去吃了螺蛳粉", now=now)


def test_the_upstream_body_is_on_the_error_not_in_its_message(caplog) -> None:
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    with serve_stub(GOOD) as stub:
        ex = OpenAIExtractor(stub.url, "m", api_key="sk-secret-key-123", timeout_s=5)
        stub.answer(Reply(500, "oops upstream secret-token-xyz sk-secret-key-123"))
        with (
            caplog.at_level(logging.DEBUG, "kemem_es.extract"),
            pytest.raises(ExtractionError) as info,
        ):
            ex.extract("我昨天去吃了螺蛳粉", now=now)
    assert "secret-token-xyz" not in str(info.value)
    assert "HTTP 500" in str(info.value)
    assert info.value.detail and "secret-token-xyz" in info.value.detail
    assert "sk-secret-key-123" not in info.value.detail  # scrubbed of the key
    assert "secret-token-xyz" in caplog.text and "sk-secret-key-123" not in caplog.text


# -- hostile LLM answers through add(infer=True) ---------------------------------------------
def hostile_answers(rng: random.Random) -> list[Reply]:
    big = "字" * 300_000
    fixed: list[Any] = [
        nested(50_000),
        nested(900),
        '{"events": [{"description": {"a": ' * 2000 + "1" + "}}]" * 2000 + "}",
        "{not json",
        "",
        "null",
        "[]",
        "1e400",
        '{"events": "x"}',
        '{"events": [1, null, "x"]}',
        '{"events": [{"description": NaN}]}',
        '{"events": [{"description": "\\ud800"}]}',
        '{"events": [{"description": "a\\u0000b"}]}',
        json.dumps({"events": [{"description": big}]}),
        json.dumps({"events": [{"description": "x", "time": "9999-99-99"}]}),
        json.dumps({"events": [{"description": "x", "keywords": [[[]]]}]}),
        json.dumps({"entities": [{"entity_name": {"x": 1}}]}),
        json.dumps({"events": [{"description": "x"}] * 500}),
        json.dumps({"k" * 10_000: 1}),
    ]
    replies = [Reply(body=chat(text)) for text in fixed]
    replies += [
        Reply(body={"choices": "x"}),
        Reply(body={"choices": [{"message": {"content": [{"type": "text", "text": 5}]}}]}),
        Reply(body="<html>gateway</html>"),
        Reply(status=500, body="oops upstream secret-token-xyz"),
        Reply(status=429, body={"error": {"message": "quota org-123"}}),
        Reply(status=301, body=""),
    ]
    for _ in range(15):  # random JSON-ish junk
        replies.append(Reply(body=chat(json.dumps(_junk(rng, 4)))))
    return replies


def _junk(rng: random.Random, depth: int) -> Any:
    pick = rng.randrange(8 if depth else 5)
    if pick == 0:
        return rng.choice([None, True, 0, -1, 2**70, 1.5, float("1e308")])
    if pick == 1:
        return "".join(chr(rng.choice([0x41, 0x4E2D, 0x1F600, 0x7F, 0x20])) for _ in range(9))
    if pick == 2:
        return rng.choice(["events", "entities", "description", "time", "keywords"])
    if pick == 3:
        return ""
    if pick == 4:
        return rng.random()
    if pick == 5:
        return [_junk(rng, depth - 1) for _ in range(rng.randrange(4))]
    keys = ["events", "entities", "description", "time", "keywords", "entity_name", "x"]
    return {rng.choice(keys): _junk(rng, depth - 1) for _ in range(rng.randrange(4))}


@pytest.mark.engine
def test_hostile_llm_answers_only_ever_raise_kemem_errors(kemem) -> None:
    kemem.init()
    rng = random.Random(40)
    with serve_stub(GOOD) as stub:
        kemem.extractor = OpenAIExtractor(stub.url, "m", timeout_s=5)
        for reply in hostile_answers(rng):
            stub.answer(reply)
            try:
                kemem.add("我昨天去吃了螺蛳粉", **A, infer=True)
            except KememError:
                pass
            except BaseException as exc:
                pytest.fail(f"{type(exc).__name__} escaped for answer {str(reply.body)[:80]!r}")


# -- hostile inputs over the public verbs ----------------------------------------------------
def _hostile_values(rng: random.Random) -> list[Any]:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    deep_list: Any = []
    for _ in range(5000):
        deep_list = [deep_list]
    out: list[Any] = [
        None, "", " ", "\x00", "\ud800", "a\ud800b", "字" * 100_000, 0, -1, 2**64, 1.5,
        float("nan"), float("inf"), True, b"bytes", bytearray(b"x"), object(), [], [None],
        {}, {"": None}, {"description": None}, {"description": deep}, deep, deep_list,
        {"$where": "1"}, {"kind": {"ne": 1}}, {"kind": {"in": "events"}}, {"and": [deep]},
        {"created_at": {"gt": "not a date"}}, {"metadata.x": {"gt": deep_list}},
        [{"role": "user", "content": deep}], [{"role": object(), "content": "x"}],
        "../../etc/passwd", "a" * 10_000, {"not": {"not": {"not": {}}}}, ("tuple",),
        {1, 2}, -(2**70),
    ]  # fmt: skip
    for _ in range(20):
        out.append(_junk(rng, 3))
    return out


def _label(value: Any) -> str:
    try:
        return repr(value)[:40]
    except RecursionError:
        return f"<deep {type(value).__name__}>"


def _verbs(km: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    return [
        ("add", lambda v: km.add(v, **A)),
        ("add.metadata", lambda v: km.add("好", **A, metadata=v)),
        ("add.user_id", lambda v: km.add("好", agent_id="qiyu", user_id=v)),
        ("add.kind", lambda v: km.add("好", **A, kind=v)),
        ("get", lambda v: km.get(v, **A)),
        ("get.agent_id", lambda v: km.get("x", agent_id=v, user_id="u")),
        ("get_all.filters", lambda v: km.get_all(**A, filters=v)),
        ("get_all.limit", lambda v: km.get_all(**A, limit=v)),
        ("get_all.cursor", lambda v: km.get_all(**A, cursor=v)),
        ("update", lambda v: km.update("m1", v, **A)),
        ("update.id", lambda v: km.update(v, "新的", **A)),
        ("delete", lambda v: km.delete(v, **A)),
        ("count.filters", lambda v: km.count(**A, filters=v)),
        ("history", lambda v: km.history(v, **A)),
        ("history.limit", lambda v: km.history("m1", **A, limit=v)),
        ("search", lambda v: km.search(v, **A)),
        ("search.filters", lambda v: km.search("螺蛳粉", **A, filters=v)),
        ("search.limit", lambda v: km.search("螺蛳粉", **A, limit=v)),
        ("delete_all.filters", lambda v: km.delete_all(agent_id="qiyu", user_id="nb", filters=v)),
    ]  # fmt: skip


@pytest.mark.engine
def test_hostile_inputs_to_the_public_verbs_only_ever_raise_kemem_errors(kemem) -> None:
    kemem.init()
    m1 = {"id": "m1", "description": "木木喜欢螺蛳粉", "created_at": "2025-03-01 09:00:00"}
    kemem.add(m1, **A, refresh=True)
    rng = random.Random(4040)
    escaped = []
    for name, verb in _verbs(kemem):
        for value in _hostile_values(rng):
            try:
                verb(value)
            except InternalError as exc:  # the net caught it: an input nobody checked
                escaped.append(f"{name}({_label(value)}): {exc.__cause__!r}"[:300])
            except KememError:
                pass
            except BaseException as exc:
                escaped.append(f"{name}({_label(value)}): {type(exc).__name__}: {exc}"[:300])
    firsts = {e.split("(", 1)[0]: e for e in reversed(escaped)}  # one per verb
    assert not escaped, f"{len(escaped)} escaped:\n" + "\n".join(firsts.values())


# -- over HTTP ----------------------------------------------------------------------------------
@pytest.mark.engine
def test_http_nested_answer_is_502_and_upstream_body_never_answered(kemem) -> None:
    pytest.importorskip("fastapi")
    from test_server import client, error_of

    kemem.init()
    stub: Stub
    with serve_stub(GOOD) as stub:
        c = client(kemem)
        c.app.state.kemem.core.extractor = OpenAIExtractor(stub.url, "m", timeout_s=5)
        body = {"text": "我昨天去吃了螺蛳粉", **A, "infer": True}
        stub.answer(Reply(body=chat(nested(50_000))))
        err = error_of(c.post("/v1/memories", json=body), 502)
        assert err["code"] == "extraction_failed"
        stub.answer(Reply(500, "oops upstream secret-token-xyz"))
        r = c.post("/v1/memories", json=body)
        err = error_of(r, 502)
        assert err["code"] == "extraction_failed"
        assert "secret-token-xyz" not in r.text and "oops" not in r.text
        assert "<engine>" not in r.text and "HTTP 500" in err["message"]
        assert stub.url.split("//")[1].split("/")[0] not in r.text


# -- log noise (item 8) -------------------------------------------------------------------------
@pytest.mark.engine
def test_a_hung_engine_logs_one_line_per_request_not_a_traceback(kemem, caplog) -> None:
    from support import HangingProxy

    from kemem_es import Kemem

    kemem.init()
    with HangingProxy(kemem.settings.url) as proxy:
        settings = kemem.settings.model_copy(update={"es_url": proxy.url, "query_timeout_s": 1.0})
        km = Kemem(settings)
        km.get_all(**A)  # connected
        proxy.hang()
        with caplog.at_level(logging.WARNING), pytest.raises(KememError):
            km.get_all(**A)
    client = [
        r for r in caplog.records if r.name.split(".")[0] in ("opensearch", "elastic_transport")
    ]
    assert client, "the client's own line is kept"
    assert all(r.exc_info is None for r in client)
    assert "Traceback" not in caplog.text and len(caplog.text.splitlines()) <= 4 * len(client)


def test_httpx_does_not_log_the_llm_url_at_info(caplog) -> None:
    from datetime import datetime, timezone

    with serve_stub(GOOD) as stub:
        ex = OpenAIExtractor(f"{stub.url}?api-key=SECRET-IN-URL", "m", timeout_s=5)
        with caplog.at_level(logging.INFO):
            ex.extract("我昨天去吃了螺蛳粉", now=datetime.now(timezone.utc))
    assert "SECRET-IN-URL" not in caplog.text
    assert stub.requests  # the request was made
