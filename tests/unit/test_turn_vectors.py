"""``context_vector="turns"``: the dialogue window's vector made of each turn's own vector
(weighted by its tokens), each turn embedded once — as the utterance it was, in the query's one
model call, or by ``prepare_context`` — and kept in a bounded LRU."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search.query_text import EMBED_MAX_TOKENS, QueryText, utterance_weight
from kemem_es.search.turn_vectors import (
    TurnCache,
    missing_turns,
    turn_key,
    weighted_mean,
    window_from_turns,
)
from kemem_es.search.window_scale import GAMMA, pieces_mean
from kemem_es.text.dialogue import Turn, context_turns, dialogue_window, window_turns
from kemem_es.text.tokenizer import Tokenizer
from tests.counting_model import Counting

CONTEXT = "用户：我今天好累\n助手：怎么啦？\n用户：老板又让加班\n助手：辛苦了，吃饭了吗？"


def _params(**kw: object) -> QueryParams:
    kw.setdefault("context_vector", "turns")
    return QueryParams(agent_id="a", user_id="u", context=CONTEXT, **kw)  # type: ignore[arg-type]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


# -- the combination ---------------------------------------------------------------------------
def test_weighted_mean_weighs_by_tokens_and_renormalises() -> None:
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert np.allclose(weighted_mean([a, b], [3, 1]), _unit(np.array([3.0, 1.0])))
    assert np.allclose(weighted_mean([a], [5]), a)
    assert np.isclose(np.linalg.norm(weighted_mean([a, b, a], [1, 2, 7])), 1.0)
    # no weight at all: the plain mean, never a division by zero
    assert np.allclose(weighted_mean([a, b], [0, 0]), _unit(np.array([1.0, 1.0])))
    with pytest.raises(ValueError):
        weighted_mean([], [])


def test_window_from_turns_weighs_each_piece_by_its_length() -> None:
    u, t1, t2 = np.eye(3)
    vec = window_from_turns(("四个字啊", u), ["一", "两个"], {"一": t1, "两个": t2}, len)
    assert np.allclose(vec, _unit(np.array([4.0, 1.0, 2.0])))
    # a turn without a vector is left out
    assert np.allclose(window_from_turns(("ab", u), ["x"], {}, len), u)


def test_window_turns_keeps_what_the_joint_window_keeps() -> None:
    turns = [
        Turn(None, "三个字"),
        Turn("小雨", "四个字啊"),
        Turn(None, "五个字啊啊"),
    ]  # newest first
    for budget in (3, 8, 12, 17, 100):
        kept, cut = window_turns("现在的话", turns, budget)
        text, cut2 = dialogue_window("现在的话", turns, budget)
        assert cut == cut2
        if kept:
            assert text == "\n".join([*reversed(kept), "现在的话"])  # speaker labels never in it
    assert window_turns("现在的话", turns, 100) == (["三个字", "四个字啊", "五个字啊啊"], False)
    assert window_turns("现在的话", turns, 12) == (["三个字"], True)


# -- the cache -----------------------------------------------------------------------------------
def test_turn_cache_is_a_bounded_lru_keyed_by_words() -> None:
    cache = TurnCache(size=2)
    cache.put("a", np.array([1.0]))
    cache.put("b", np.array([2.0]))
    assert cache.found(["a"])["a"][0] == 1.0  # a is now the most recently used
    cache.put("c", np.array([3.0]))  # evicts b
    assert "b" not in cache and "a" in cache and "c" in cache and len(cache) == 2
    assert turn_key(" 我  今天\n好累 ") == "我 今天 好累"
    cache.put("我\n今天", np.array([4.0]))
    assert cache.found(["我 今天"])["我 今天"][0] == 4.0
    cache.put("   ", np.array([5.0]))  # nothing to key: not kept
    assert len(cache) == 2


def test_missing_turns_lists_each_uncached_text_once() -> None:
    cache = TurnCache()
    cache.put("有了", np.zeros(2))
    found, todo = missing_turns(["有了", "没有", "没有", "还没有"], cache)
    assert list(found) == ["有了"] and todo == ["没有", "还没有"]


def test_turn_cache_survives_threads() -> None:
    cache = TurnCache(size=50)

    def work(k: int) -> None:
        for i in range(300):
            cache.put(f"{k}-{i}", np.array([float(i)]))
            cache.found([f"{k}-{i - 1}", f"{(k + 1) % 4}-{i}"])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 50


# -- the query path ------------------------------------------------------------------------------
def test_turns_window_approximates_the_joint_vector_by_tokens() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params(sentence_weight=0.0)
    turns = context_turns(p.context, p.context_turns)
    vec, cut, parts = qt.query_vector("你还记得那家店吗", turns, p)
    assert not cut and parts == []
    # one model call: the utterance and the four turns, each alone
    assert emb.calls == [["你还记得那家店吗", "辛苦了，吃饭了吗？", "老板又让加班", "怎么啦？",
                          "我今天好累"]]  # fmt: skip
    texts = ["你还记得那家店吗", "辛苦了，吃饭了吗？", "老板又让加班", "怎么啦？", "我今天好累"]
    vecs, sizes = [emb._vec(t) for t in texts], [len(t) for t in texts]
    d = weighted_mean(vecs, sizes)
    u = emb._vec(texts[0])
    w = utterance_weight(p, texts[0], turns)  # 0.7 × its share of the dialogue's characters
    expect = _unit(w * u + (1 - w) * d)  # "turns" keeps the renormalised window
    assert np.allclose(vec, expect, atol=1e-4)


def test_a_rolling_conversation_embeds_each_turn_once() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params()
    said = ["我今天好累", "老板又让加班", "想吃火锅了"]
    replies = ["怎么啦？", "辛苦了，吃饭了吗？", "好呀，去哪家？"]
    lines: list[str] = []
    for i, text in enumerate(said):
        turns = context_turns("\n".join(lines), p.context_turns)
        emb.calls.clear()
        qt.query_vector(text, turns, p)
        # the utterance, and the agent's reply that came since (the user's turns were utterances)
        assert emb.calls == [[text, replies[i - 1]]] if i else [[text]]
        lines += [f"用户：{text}", f"助手：{replies[i]}"]
    # the app prepares after its reply: the next query embeds its utterance alone
    turns = context_turns("\n".join(lines), p.context_turns)
    emb.calls.clear()
    assert qt.prepare_context(turns, "turns") is True
    assert emb.calls == [["好呀，去哪家？"]]
    assert qt.prepare_context(turns, "turns") is False
    emb.calls.clear()
    qt.query_vector("就楼下那家吧", turns, p)
    assert emb.calls == [["就楼下那家吧"]]


def test_prepared_turns_give_the_same_vector_as_cold_ones() -> None:
    p = _params()
    turns = context_turns(p.context, p.context_turns)
    said = "我想吃火锅。你还记得那家店吗？"
    cold = QueryText(Counting(), Tokenizer(), None).query_vector(said, turns, p)
    emb = Counting()
    warm = QueryText(emb, Tokenizer(), None)
    warm.prepare_context(turns, "turns")
    emb.calls.clear()
    assert warm.query_vector(said, turns, p) == cold
    assert emb.calls == [["我想吃火锅。你还记得那家店吗？", "我想吃火锅", "你还记得那家店吗"]]


def test_turns_respect_the_models_budget() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params(sentence_weight=0.0)
    long_turn = "长" * (EMBED_MAX_TOKENS - 5)
    turns = [Turn(None, "新的话"), Turn(None, long_turn), Turn(None, "更早的话")]
    _, cut, _ = qt.query_vector("嗯那个", turns, p)
    assert cut
    assert emb.calls == [["嗯那个", "新的话"]]  # the long turn and what is before it dropped


def test_joint_and_earlier_cache_the_utterance_too() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    turns = context_turns(CONTEXT, 8)
    qt.query_vector("第一句话", turns, QueryParams(agent_id="a", user_id="u"))
    qt.query_vector("第二句话", (), QueryParams(agent_id="a", user_id="u"))
    assert "第一句话" in qt.turn_vectors and "第二句话" in qt.turn_vectors


def test_prepare_for_joint_does_nothing() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    assert qt.prepare_context(context_turns(CONTEXT, 8), "joint") is False
    assert emb.calls == []


def test_the_latency_benchmarks_chat_is_a_rolling_conversation() -> None:
    """Each context is the one before it without its oldest exchange, plus the previous
    utterance and the reply to it: the user's turns were utterances, each reply is one text."""
    from bench.latency import PREPARED_REPLIES, chat_contexts

    texts = [f"第{i}句话说的是事情{i}" for i in range(10)]
    for replies in ((), PREPARED_REPLIES):
        ctxs = chat_contexts(texts, 6, replies) if replies else chat_contexts(texts, 6)
        for i in range(4, 10):
            before, now = ctxs[i - 1].split("\n"), ctxs[i].split("\n")
            assert now[:4] == before[2:]
            assert now[4] == f"用户：{texts[i - 1]}"
    plain, prepared = chat_contexts(texts), chat_contexts(texts, replies=PREPARED_REPLIES)
    assert set(plain[5].split("\n")[1::2]).isdisjoint(prepared[5].split("\n")[1::2])


def test_split_rebuilds_the_window_from_the_earlier_turns_and_the_utterance() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params(context_vector="split", sentence_weight=0.0)
    turns = context_turns(p.context, p.context_turns)
    window = "我今天好累\n怎么啦？\n老板又让加班\n辛苦了，吃饭了吗？"
    assert qt.prepare_context(turns, "split") is True  # the earlier window, as "earlier"
    assert emb.calls == [[window]]
    emb.calls.clear()
    vec, _, _ = qt.query_vector("你还记得那家店吗", turns, p)
    assert emb.calls == [["你还记得那家店吗"]]
    u, e = emb._vec("你还记得那家店吗"), emb._vec(window)
    sizes = [len("你还记得那家店吗"), len(window)]
    d = weighted_mean([u, e], sizes)
    # the window's cosines read at n^γ of their renormalised value (search.window_scale)
    n = float(np.linalg.norm(pieces_mean([u, e], sizes)))
    g = GAMMA * sizes[1] / sum(sizes)  # γ = GAMMA × the earlier turns' share of the tokens
    w = utterance_weight(p, "你还记得那家店吗", turns)
    assert np.allclose(vec, _unit(w * u + (1 - w) * n**g * d), atol=1e-4)


def test_prepare_context_and_a_sessions_recall_agree_on_the_window() -> None:
    """What ``prepare_context`` prepares unless told, a session's recall asks for: with the
    joint default that is "split" (its earlier window is the one "earlier" prepares)."""
    from kemem_es.contract.params import prepared_default

    assert QueryParams(agent_id="a", user_id="u").context_vector == "joint"
    assert prepared_default() == "split"


def test_a_rolling_conversation_counts_each_turns_tokens_once() -> None:
    emb = Counting()
    measured: list[str] = []
    count = emb.count_tokens
    emb.count_tokens = lambda texts: measured.extend(texts) or count(texts)  # type: ignore[method-assign]
    qt = QueryText(emb, Tokenizer(), None)
    p = QueryParams(agent_id="a", user_id="u")  # the joint window: each turn measured
    lines: list[str] = []
    chat = [("我今天好累", "怎么啦？"), ("老板又让加班", "辛苦了"), ("想吃火锅了", "好呀")]
    for said, reply in chat:
        qt.query_vector(said, context_turns("\n".join(lines), p.context_turns), p)
        lines += [f"用户：{said}", f"助手：{reply}"]
    assert measured and len(measured) == len(set(measured))  # never the same text twice
    assert qt.length("我今天好累") == len("我今天好累") and measured.count("我今天好累") == 1
