"""add(infer=True) end to end: the real OpenAI-compatible extractor against the loopback stub,
writing into the real engine."""

from __future__ import annotations

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
