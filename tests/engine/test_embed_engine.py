"""The engine tests of the embedder work (issue 39): a wrong remote dimension writes nothing,
a query searches the LLM rewrite or falls back, prepare_context then a chat query."""

from __future__ import annotations

import time
from typing import Any

import pytest
from llm_stub import Reply, chat, serve_stub
from test_embed_remote import service
from test_embed_rewrite import CONTEXT

from kemem_es.embed.remote import RemoteEmbedder
from kemem_es.errors import KememError


@pytest.mark.engine
def test_wrong_dimension_writes_nothing(kemem: Any) -> None:
    """An add whose vectors come back with the wrong dimension fails before the bulk write."""
    with service() as svc:
        emb = RemoteEmbedder(svc.url, "m")  # probed: 8
        kemem.embedder = emb
        kemem.init()  # calibrated on the good answers
        svc.mode = "dim"  # from now on 12
        record = {
            "agent_id": "a",
            "user_id": "u",
            "id": "e1",
            "description": "用户喜欢爬山",
            "created_at": "2025-03-01 09:00:00",
        }
        with pytest.raises(KememError, match=r"0 of 1 .*12-dimensional"):
            kemem.index_records([record], "events")
        kemem.engine.client.indices.refresh(index=f"{kemem.settings.index_prefix}-*")
        assert kemem.engine.count(f"{kemem.settings.index_prefix}-user-events") == 0


@pytest.mark.engine
def test_query_searches_the_rewrite_or_falls_back(kemem: Any) -> None:
    kemem.init()
    A = {"agent_id": "lishen", "user_id": "xiaoman"}
    kemem.index_records(
        [
            {**A, "id": "e1", "description": "小满带豆包去新开的狗公园，豆包玩得很开心",
             "created_at": "2025-03-01 09:00:00", "keywords": ["豆包", "狗公园"]},
            {**A, "id": "e2", "description": "小满加班到深夜，点了一份麻辣烫",
             "created_at": "2025-02-01 23:00:00", "keywords": ["加班", "麻辣烫"]},
        ],
        "events",
    )  # fmt: skip
    kemem.engine.client.indices.refresh(index=f"{kemem.settings.index_prefix}-*")
    opts = {**A, "limit": 5, "score_threshold": 0.0, "context": CONTEXT, "rewrite": True}
    resp = kemem.query("那个地方它还想去吗", **opts)
    assert resp.additional_info.rewrite == {
        "fallback": "no rewriting model (set KEMEM_REWRITE_MODEL)"
    }
    with serve_stub("") as stub:
        stub.answer(Reply(body=chat("豆包 狗公园")))
        from kemem_es.search.rewrite import Rewriter as R

        kemem.searcher.rewriter = R(stub.url, "m", timeout_s=2)
        resp = kemem.query("那个地方它还想去吗", **opts)
        info = resp.additional_info
        assert info.rewrite == {"text": "豆包 狗公园"} and "rewrite" in info.timings_ms
        assert "豆包" in info.base_words
        assert resp.memory_events[0].index == "e1"
        stub.answer(Reply(body=chat("x"), delay=5))
        kemem.searcher.rewriter = R(stub.url, "m", timeout_s=0.3)
        t0 = time.monotonic()
        resp = kemem.query("那个地方它还想去吗", **opts)
        assert time.monotonic() - t0 < 3
        assert "took over" in resp.additional_info.rewrite["fallback"]
        assert resp.memory_events  # the plain query still answers
        plain = kemem.query("那个地方它还想去吗", **{**opts, "rewrite": False})
        assert plain.additional_info.rewrite is None


@pytest.mark.engine
def test_kemem_prepare_context_then_query(kemem: Any) -> None:
    kemem.init()
    A = {"agent_id": "lishen", "user_id": "xiaoman"}
    kemem.index_records(
        [{**A, "id": "e1", "description": "小满公司楼下新开了一家火锅店，排队很长",
          "created_at": "2025-03-01 09:00:00"}],
        "events",
    )  # fmt: skip
    kemem.engine.client.indices.refresh(index=f"{kemem.settings.index_prefix}-*")
    turns = [
        {"role": "user", "content": "老板又让加班"},
        {"role": "assistant", "content": "辛苦了"},
    ]
    assert kemem.prepare_context(turns) is True
    assert kemem.prepare_context(turns) is False
    resp = kemem.query(
        "想吃楼下那家火锅", **A, context=turns, context_vector="earlier", score_threshold=0.0
    )
    assert [e.index for e in resp.memory_events] == ["e1"]
