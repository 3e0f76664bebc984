"""add(infer=True) end to end: the real OpenAI-compatible extractor against the loopback stub,
writing into the real engine."""

from __future__ import annotations

import json

import pytest
from llm_stub import Reply, Stub, chat, serve_stub
from test_extract import DIALOGUE, GOOD

from kemem_es.errors import ExtractionError
from kemem_es.memory.extract import OpenAIExtractor

pytestmark = pytest.mark.engine


@pytest.fixture()
def stub():
    with serve_stub(GOOD) as s:
        yield s


A = {"agent_id": "qiyu", "user_id": "u_mumu"}


def use_stub(kemem, stub: Stub, timeout_s: float = 5.0) -> None:
    kemem.extractor = OpenAIExtractor(stub.url, "qwen-test", timeout_s=timeout_s)


def test_infer_writes_the_extracted_entities_and_events(kemem, stub: Stub) -> None:
    kemem.init()
    use_stub(kemem, stub)
    results = kemem.add(DIALOGUE, **A, infer=True, refresh=True, user_name="木木")
    kinds = sorted(r.memory.kind for r in results)
    assert kinds == ["entities", "entities", "events", "events"]
    assert {r.event for r in results} == {"ADD"}
    page = kemem.get_all(**A, kind="entities")
    assert {m.text for m in page.results} == {e["description"] for e in GOOD["entities"]}
    assert all(m.user_name == "木木" for m in page.results)
    assert "昨天和室友小满去吃了螺蛳粉" in stub.requests[0]["body"]["messages"][-1]["content"]
    # The same dialogue again: nothing new piles up.
    again = kemem.add(DIALOGUE, **A, infer=True, refresh=True)
    assert {r.event for r in again} == {"NOOP"}
    assert kemem.count(**A) == 4


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body=chat("{not json")),
        Reply(body=chat("")),
        Reply(body=chat('{"events": [{"keywords": ["无描述"]}], "entities": []}')),
        Reply(status=500, body={"error": "boom"}),
    ],
)
def test_bad_extractions_write_nothing(kemem, stub: Stub, reply: Reply) -> None:
    kemem.init()
    use_stub(kemem, stub)
    stub.answer(reply)
    with pytest.raises(ExtractionError):
        kemem.add(DIALOGUE, **A, infer=True, refresh=True)
    assert kemem.count(**A) == 0


def test_slow_extractor_times_out_and_writes_nothing(kemem, stub: Stub) -> None:
    import time

    kemem.init()
    use_stub(kemem, stub, timeout_s=0.5)
    stub.answer(Reply(body=chat("{}"), delay=5))
    t0 = time.monotonic()
    with pytest.raises(ExtractionError, match="did not answer"):
        kemem.add(DIALOGUE, **A, infer=True)
    assert time.monotonic() - t0 < 3
    assert kemem.count(**A) == 0


def test_background_stores_the_raw_turn_first(kemem, stub: Stub) -> None:
    kemem.init()
    use_stub(kemem, stub)
    (raw,) = kemem.add(DIALOGUE, **A, infer="background", refresh=True)
    assert raw.event == "ADD" and "螺蛳粉" in raw.memory.text
    extracted = kemem.drain(timeout_s=30)
    assert len(extracted) == 4
    stub.answer(Reply(body=chat("{not json")))
    kemem.add("又说了一句", **A, infer="background")
    assert kemem.drain(timeout_s=30) == []
    assert isinstance(kemem.extraction_errors[-1], ExtractionError)


def test_an_extraction_stopped_part_way_says_what_was_written(
    kemem, stub: Stub, monkeypatch
) -> None:
    """The engine failing at the third of four facts: the error names the two stored."""
    from kemem_es.errors import EngineUnavailable, WriteInterrupted

    kemem.init()
    use_stub(kemem, stub)
    service = kemem.memories
    real, calls = service.add_records, []

    def failing_third(*args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise EngineUnavailable("engine unavailable (ConnectionError)")
        return real(*args, **kw)

    monkeypatch.setattr(service, "add_records", failing_third)
    with pytest.raises(WriteInterrupted, match="after 2 of 4 memories were written") as exc:
        kemem.add(DIALOGUE, **A, infer=True, refresh=True)
    assert exc.value.written == 2
    ids = str(exc.value).split("written: ")[1].split(";")[0].split(", ")
    assert len(ids) == 2 and all(kemem.get(i, **A).text for i in ids)


def test_finished_background_jobs_kept_for_drain_are_bounded(
    kemem, stub: Stub, monkeypatch
) -> None:
    """A server never calls drain(): the results it would return must not pile up forever."""
    from kemem_es.memory import writes

    monkeypatch.setattr(writes, "KEPT_DONE", 2)
    kemem.init()
    use_stub(kemem, stub)
    for i in range(5):
        kemem.add(f"第{i}句话", **A, infer="background", dedup=False)
        kemem.writes._pending[-1].result(timeout=30)  # finished before the next one comes
    assert len(kemem.writes._pending) <= 3  # the two latest finished, plus the newest
    assert len(kemem.drain(timeout_s=30)) <= 3 * 4


def test_background_failures_are_logged_counted_kept_bounded(kemem, stub: Stub, caplog) -> None:
    import logging

    from kemem_es.memory.writes import KEPT_ERRORS

    kemem.init()
    use_stub(kemem, stub)
    stub.answer(Reply(body=chat("{not json")))
    with caplog.at_level(logging.INFO, logger="kemem_es"):
        (raw,) = kemem.add(DIALOGUE, **A, infer="background")
        assert kemem.drain(timeout_s=30) == []
    (line,) = [r.getMessage() for r in caplog.records if "background extraction" in r.message]
    assert "not JSON" in line and raw.id in line
    assert "agent_id=qiyu" in line and "user_id=u_mumu" in line
    said = [m["content"] for m in DIALOGUE]
    for record in caplog.records:  # no user text at INFO or above
        if record.levelno >= logging.INFO:
            assert not any(text[:6] in record.getMessage() for text in said)
    assert kemem.extraction_failures == 1
    # A long-running process keeps only the latest failures, and counts them all.
    kemem.writes.extraction_errors += [ExtractionError("old")] * (KEPT_ERRORS + 5)
    kemem.add("又说了一句", **A, infer="background")
    kemem.drain(timeout_s=30)
    assert len(kemem.extraction_errors) == KEPT_ERRORS
    assert "not JSON" in str(kemem.extraction_errors[-1])
    assert kemem.extraction_failures == 2


def test_a_failure_that_is_not_a_kemem_error_is_kept_and_close_still_flushes(kemem) -> None:
    class Broken:
        def extract(self, messages, **kw):
            raise ValueError("a bug in my extractor")

    kemem.init()
    kemem.extractor = Broken()
    kemem.add("今天天气不错", **A, infer="background")
    assert kemem.drain(timeout_s=30) == []
    err = kemem.extraction_errors[-1]  # every failure is a KememError; the bug is its cause
    assert isinstance(err, ExtractionError) and isinstance(err.__cause__, ValueError)
    assert kemem.extraction_failures == 1
    kemem.add("明天也不错", **A, infer="background")
    closed: list[bool] = []
    real_close = kemem.reinforcer.close
    kemem.reinforcer.close = lambda: (closed.append(True), real_close())
    kemem.close()  # does not raise, and reinforcement is still flushed and stopped
    assert closed == [True] and len(kemem.extraction_errors) == 2


def test_drain_past_its_timeout_keeps_the_jobs(kemem, stub: Stub) -> None:
    import time

    from kemem_es.errors import ExtractionPending, KememError

    kemem.init()
    use_stub(kemem, stub, timeout_s=10)
    stub.answer(Reply(body=chat(json.dumps(GOOD, ensure_ascii=False)), delay=1.5))
    kemem.add(DIALOGUE, **A, infer="background")
    with pytest.raises(ExtractionPending) as exc:
        kemem.drain(timeout_s=0.2)
    assert isinstance(exc.value, KememError) and exc.value.pending == 1
    t0 = time.monotonic()
    assert len(kemem.drain(timeout_s=30)) == 4  # still tracked: waited for, results returned
    assert time.monotonic() - t0 > 0.5


def test_background_refuses_what_has_no_dialogue_up_front(kemem, stub: Stub) -> None:
    from kemem_es.errors import InvalidInput

    kemem.init()
    use_stub(kemem, stub)
    persona = [{"role": "system", "content": "你是祁煜，一个温柔体贴的画家"}]
    for infer in (True, "background"):
        with pytest.raises(InvalidInput, match="no dialogue"):
            kemem.add(persona, **A, infer=infer)
    assert kemem.count(**A) == 0 and stub.requests == []


def test_names_given_to_add_are_kept_without_infer(kemem, stub: Stub) -> None:
    kemem.init()
    use_stub(kemem, stub)
    names = {"user_name": "木木", "agent_name": "祁煜"}
    (plain,) = kemem.add("今天去了海边散步", **A, **names)
    (raw,) = kemem.add(DIALOGUE, **A, infer="background", **names)
    kemem.drain(timeout_s=30)
    own = {
        "description": "木木去海边捡了贝壳",
        "created_at": "2025-06-01 10:00:00",
        "user_name": "小木",
    }
    (record,) = kemem.add(own, **A, **names)  # a record's own name wins
    for res, user in ((plain, "木木"), (raw, "木木"), (record, "小木")):
        got = kemem.get(res.id, **A)
        assert (got.user_name, got.agent_name) == (user, "祁煜")


def test_close_with_an_extraction_timeout_gives_up_what_is_still_running(
    kemem, stub: Stub, caplog
) -> None:
    """A stopping server must exit before it is killed: close() given a timeout waits that
    long for background extractions, then gives them up with a count in the log (the raw
    turn is stored already). Without a timeout it waits for all (a library's close)."""
    import logging
    import time

    kemem.init()
    use_stub(kemem, stub, timeout_s=10)
    stub.answer(Reply(body=chat(json.dumps(GOOD, ensure_ascii=False)), delay=8))
    for i in range(3):  # one runs, the others wait in the pool's queue
        assert len(kemem.add(f"{DIALOGUE}\n第{i}次", **A, infer="background")) == 1
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kemem_es.memory.writes"):
        kemem.close(extraction_timeout_s=0.5)
    took = time.monotonic() - t0
    stub.release.set()
    assert took < 5, took
    (line,) = [r.getMessage() for r in caplog.records if "given up" in r.getMessage()]
    assert line.startswith("3 background extraction(s) not finished") and "小满" not in line
    t0 = time.monotonic()
    kemem.close()  # again, waiting for all: the one that ran finishes, the given-up never run
    assert time.monotonic() - t0 < 15
