"""The utterance's share of the query vector (issue 39): on by default (0.7); a long
last turn that tells the episode itself outweighs the turns before it."""

from __future__ import annotations

import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search.query_text import utterance_weight
from kemem_es.text.dialogue import Turn

TURNS = [Turn("阿栗", "团子吞发圈那次花了不少钱吧"), Turn("小满", "两千八 心疼死我了")]


def params(**kw: float) -> QueryParams:
    return QueryParams(agent_id="a", user_id="u", **kw)


def test_off_keeps_utterance_weight() -> None:
    long = "还有更吓人的 它趁我拿东西溜出门 我举着手机电筒在地底下那层一个个轮子旁边照"
    assert params().utterance_share_weight == pytest.approx(0.7)  # the default (issue 39)
    assert params().utterance_weight == pytest.approx(0.05)  # the floor (issue 39)
    assert utterance_weight(params(utterance_share_weight=0), long, TURNS) == pytest.approx(0.05)


def test_share_raises_a_long_utterance_not_a_vague_one() -> None:
    p = params(utterance_share_weight=0.7)
    long = "还有更吓人的 它趁我拿东西溜出门 我举着手机电筒在地底下那层一个个轮子旁边照"
    total = len(long) + sum(len(t.text) for t in TURNS)
    assert utterance_weight(p, long, TURNS) == pytest.approx(0.7 * len(long) / total)
    vague = "对啊 就那回"
    share = len(vague) / (len(vague) + sum(len(t.text) for t in TURNS))
    assert utterance_weight(p, vague, TURNS) == pytest.approx(0.7 * share)  # its share
    assert utterance_weight(params(utterance_weight=0.5), vague, TURNS) == pytest.approx(0.5)
    assert utterance_weight(p, "嗯", []) == pytest.approx(0.7)  # no turns: all utterance
