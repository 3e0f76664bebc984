"""``context_vector="turns"`` through the API (issue 39): in a chat app's rolling conversation,
each turn is embedded once; a chat turn whose turns were prepared makes one model call, with
one text (its utterance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from support import stored_events

A = {"agent_id": "lishen", "user_id": "xiaoman"}


class Spy:
    """The real model, with each call's texts written down (query side and document side)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed_queries(texts)


def _hotpot_and_hike(kemem: Any) -> None:
    """Two memories of one user: the hot-pot place (e1) and a hike (e2), searchable now."""
    stored_events(
        kemem,
        [{**A, "id": "e1", "description": "小满公司楼下新开了一家火锅店，排队很长",
          "created_at": "2025-03-01 09:00:00"},
         {**A, "id": "e2", "description": "小满周末去爬山，拍了很多照片",
          "created_at": "2025-03-02 09:00:00"}],
    )  # fmt: skip


@pytest.mark.engine
def test_a_prepared_chat_turn_embeds_its_utterance_alone(kemem: Any) -> None:
    _hotpot_and_hike(kemem)
    opts = {**A, "score_threshold": 0.0, "expand": False, "context_vector": "turns"}
    kemem.query("预热", **opts)  # the calibration and the names read before the spy
    spy = Spy(kemem.searcher.text.embedder)
    kemem.searcher.text.embedder = spy
    history: list[dict[str, str]] = []
    said = ["我今天好累", "老板又让加班", "晚上想吃点好的"]
    replies = ["怎么啦？", "辛苦了，吃饭了吗？", "想吃什么呀？"]
    for i, (text, reply) in enumerate(zip(said, replies, strict=True)):
        spy.calls.clear()
        kemem.query(text, **opts, context=history)
        # the utterance and the reply that came since: the user's turns were utterances
        assert spy.calls == ([[text, replies[i - 1]]] if i else [[text]])
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    spy.calls.clear()
    assert kemem.prepare_context(history, context_vector="turns") is True  # after the reply
    assert spy.calls == [["想吃什么呀？"]]
    assert kemem.prepare_context(history, context_vector="turns") is False
    spy.calls.clear()
    resp = kemem.query("想吃楼下那家火锅", **opts, context=history)
    assert spy.calls == [["想吃楼下那家火锅"]]  # one model call, one text
    assert resp.memory_events[0].index == "e1"
    assert resp.additional_info.context_trimmed is False


@pytest.mark.engine
def test_turns_and_joint_find_the_same_memory(kemem: Any) -> None:
    """The per-turn window stands in for the joint one: a vague last turn whose topic sits in
    the earlier turns finds it both ways."""
    _hotpot_and_hike(kemem)
    context = [
        {"role": "user", "content": "公司楼下那家火锅店排队好长"},
        {"role": "assistant", "content": "那你们后来吃上了吗？"},
    ]
    got = {}
    for mode in ("joint", "turns"):
        resp = kemem.query(
            "对啊就那家", **A, context=context, context_vector=mode, score_threshold=0.0
        )
        got[mode] = [e.index for e in resp.memory_events]
    assert got["turns"][0] == got["joint"][0] == "e1"


@pytest.mark.engine
def test_a_prepared_split_window_embeds_the_utterance_alone(kemem: Any) -> None:
    """``prepare_context`` unset prepares for "split" (what a session's recall asks for): the
    earlier turns' window; the query then makes one model call with its utterance."""
    stored_events(
        kemem,
        [{**A, "id": "e1", "description": "小满公司楼下新开了一家火锅店，排队很长",
          "created_at": "2025-03-01 09:00:00"}],
    )  # fmt: skip
    opts = {**A, "score_threshold": 0.0, "expand": False}
    kemem.query("预热", **opts)
    spy = Spy(kemem.searcher.text.embedder)
    kemem.searcher.text.embedder = spy
    history = [
        {"role": "user", "content": "老板又让加班"},
        {"role": "assistant", "content": "辛苦了，晚上想吃什么？"},
    ]
    assert kemem.prepare_context(history) is True
    assert spy.calls == [["老板又让加班\n辛苦了，晚上想吃什么？"]]
    spy.calls.clear()
    resp = kemem.query("想吃楼下那家火锅", **opts, context=history, context_vector="split")
    assert spy.calls == [["想吃楼下那家火锅"]]
    assert resp.memory_events[0].index == "e1"


@pytest.mark.engine
def test_a_split_window_is_read_at_its_factor(kemem: Any) -> None:
    """A window rebuilt from its pieces (split) lifts every cosine; the query's vector floor and
    ceiling are divided by the factor that takes the lift back (search.window_scale), so each
    explained vector term is (f·c − floor) / (ceil − floor) of the engine's cosine c of the
    vector it is sent, and the explained signals add up to the score."""
    from kemem_es.contract.params import QueryParams
    from kemem_es.embed.calibrate import apply
    from kemem_es.search.profile import script_params
    from kemem_es.text.dialogue import context_turns

    _hotpot_and_hike(kemem)
    context = "用户：最近老加班\n助手：辛苦了，周末有什么安排吗？\n用户：想找个地方放松一下"
    opts = {**A, "score_threshold": 0.0, "expand": False, "context": context}
    mode = "split"
    resp = kemem.query("就上次那家吧", **opts, context_vector=mode, explain=True)
    assert {e.index for e in resp.memory_events} == {"e1", "e2"}
    params = apply(QueryParams(**opts, context_vector=mode), kemem.searcher.calibration())
    params, _ = script_params(params, ["就上次那家吧"])
    turns = context_turns(context, params.context_turns)
    qv = kemem.searcher.text.query_vectors("就上次那家吧", turns, params)
    assert 0 < qv.scale < 1
    texts = {"e1": "小满公司楼下新开了一家火锅店，排队很长", "e2": "小满周末去爬山，拍了很多照片"}
    weights = params.weights.model_dump()
    for e in resp.memory_events:
        mem = kemem.searcher.text.embedder.embed_one(texts[e.index])
        cos = float(np.asarray(qv.vector) @ mem)
        want = (qv.scale * cos - params.vec_floor) / (params.vec_ceil - params.vec_floor)
        assert e.signals.vec == pytest.approx(want, abs=3e-3)
        fused = sum(weights[k] * getattr(e.signals, k) for k in weights) + e.signals.anchor
        assert e.score == pytest.approx(min(max(fused, 0.0), 1.0), abs=3e-3)
