"""Chat turns: one model call per query for the utterance, its sentences and the dialogue
window; with ``context_vector="earlier"`` the earlier turns' window is a text known before the
user speaks, so ``prepare_context`` computes it off the request path and the query embeds its
utterance alone."""

from __future__ import annotations

from kemem_es.contract.params import QueryParams
from kemem_es.search.query_text import QueryText
from kemem_es.text.dialogue import context_turns
from kemem_es.text.tokenizer import Tokenizer
from tests.counting_model import Counting

CONTEXT = "用户：我今天好累\n助手：怎么啦？\n用户：老板又让加班\n助手：辛苦了，吃饭了吗？"


def _params(**kw: object) -> QueryParams:
    return QueryParams(agent_id="a", user_id="u", context=CONTEXT, **kw)  # type: ignore[arg-type]


def test_one_model_call_for_utterance_sentences_and_window() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params()
    turns = context_turns(p.context, p.context_turns)
    vec, cut, parts = qt.query_vector("我想吃火锅。你还记得那家店吗？", turns, p)
    assert len(emb.calls) == 1 and len(emb.calls[0]) == 4  # utterance, window, 2 sentences
    assert len(parts) == 2 and not cut and len(vec) == emb.dim
    emb.calls.clear()
    qt.query_vector("你还记得那家店吗", (), p)
    assert len(emb.calls) == 1 and len(emb.calls[0]) == 1


def test_earlier_window_is_prepared_off_the_request_path() -> None:
    emb = Counting()
    qt = QueryText(emb, Tokenizer(), None)
    p = _params(context_vector="earlier")
    turns = context_turns(p.context, p.context_turns)
    cold = qt.query_vector("你还记得那家店吗", turns, p)
    assert emb.calls == [
        ["你还记得那家店吗", "我今天好累\n怎么啦？\n老板又让加班\n辛苦了，吃饭了吗？"]
    ]
    emb.calls.clear()
    assert qt.query_vector("你还记得那家店吗", turns, p) == cold  # the window is cached
    assert emb.calls == [["你还记得那家店吗"]]
    more = context_turns(CONTEXT + "\n用户：就是楼下那家\n助手：哦哦", 8)
    emb.calls.clear()
    assert qt.prepare_context(more) is True and len(emb.calls) == 1
    assert qt.prepare_context(more) is False  # already there
    emb.calls.clear()
    qt.query_vector("好想再去一次", more, p)
    assert emb.calls == [["好想再去一次"]]  # the utterance alone


def test_the_joint_window_stays_the_default() -> None:
    assert QueryParams(agent_id="a", user_id="u").context_vector == "joint"
