"""Expander strategies pinned on a hand-made lexicon (docs/SPEC.md §3)."""

from __future__ import annotations

import json

import pytest

from kemem_es.expand import Expander, Expansion, Lexicon, default_expander, pooled, round_robin
from kemem_es.text import IdfTable, Tokenizer

# A's and B's lists overlap on y and z, so the two strategies order them differently.
LISTS = {
    "甲": [("x", 7), ("y", 6), ("z", 3)],
    "乙": [("z", 5), ("w", 4), ("y", 2)],
}


def words(result) -> list[tuple[str, int]]:
    return [(e.word, e.level) for e in result]


def test_round_robin_worked_example() -> None:
    got = round_robin(["甲", "乙"], [LISTS["甲"], LISTS["乙"]], 100)
    # turn 1: 甲→x, 乙→z; turn 2: 甲→y, 乙→w; turn 3: 甲's z and 乙's y are taken → done.
    assert words(got) == [("x", 7), ("z", 5), ("y", 6), ("w", 4)]
    assert [e.source for e in got] == ["甲", "乙", "甲", "乙"]


def test_pooled_worked_example_with_recurrence_bonus() -> None:
    got = pooled(["甲", "乙"], [LISTS["甲"], LISTS["乙"]], 100)
    # y: best 6, proposed by both → 8;  z: best 5, both → 7;  x: 7 once;  w: 4 once.
    # x and z tie at 7: x was seen first (rank 0 of 甲 before rank 0 of 乙).
    assert words(got) == [("y", 8), ("x", 7), ("z", 7), ("w", 4)]
    y = got[0]
    assert (y.source, y.sources) == ("甲", ["甲", "乙"])
    assert got[2].sources == ["乙", "甲"]


def test_strategies_differ_and_cut_at_max_words() -> None:
    args = (["甲", "乙"], [LISTS["甲"], LISTS["乙"]])
    assert [e.word for e in round_robin(*args, 3)] == ["x", "z", "y"]
    assert [e.word for e in pooled(*args, 3)] == ["y", "x", "z"]
    assert round_robin(*args, 0) == [] and pooled(*args, 0) == []


def test_pooled_three_way_recurrence() -> None:
    got = pooled(["a", "b", "c"], [[("q", 1)], [("q", 1)], [("q", 3), ("r", 6)]], 10)
    assert words(got) == [("q", 3 + 2 * 2), ("r", 6)]


def test_round_robin_exhausted_targets_drop_out() -> None:
    got = round_robin(["a", "b"], [[("p", 5)], [("q", 4), ("r", 3), ("s", 2)]], 10)
    assert [e.word for e in got] == ["p", "q", "r", "s"]


# ---- through Expander, on real sentences -------------------------------------------------

LEX = {
    "红色": [
        ("革命", 7),
        ("喜庆", 7),
        ("灯笼", 6),
        ("玫瑰", 6),
        ("太阳", 5),
        ("木木", 5),
        ("的", 4),
    ],
    "玫瑰": [("爱情", 7), ("灯笼", 5), ("花园", 4), ("红色", 4), ("喜庆", 2)],
    "火锅": [("麻辣烫", 6), ("聚餐", 5)],
    "猫": [("小猫", 7), ("宠物", 6)],
}
# 红色 outweighs 玫瑰 so the target order is fixed: 红色, 玫瑰.
IDF = IdfTable({"红色": 9.0, "玫瑰": 8.0, "火锅": 7.0, "猫": 6.0}, default=1.0)


@pytest.fixture(scope="module")
def expander() -> Expander:
    tok = Tokenizer(words=["木木"])
    return Expander(Lexicon.from_mapping(LEX), tok, IDF)


def test_expand_strategy_0(expander: Expander) -> None:
    r = expander.expand("木木喜欢红色的玫瑰", strategy=0, exclude=["木木"])
    assert [k.word for k in r.keywords][:2] == ["红色", "玫瑰"]
    assert "木木" in r.tokens and "木木" not in [k.word for k in r.keywords]
    # base words (玫瑰, 红色), the name 木木 and the stop word 的 are never emitted
    assert words(r.expanded) == [
        ("革命", 7), ("爱情", 7), ("喜庆", 7), ("灯笼", 5), ("太阳", 5), ("花园", 4),
    ]  # fmt: skip
    # 灯笼 went to 玫瑰 (its strongest untaken, level 5) only because 红色 took 喜庆 first;
    # order: 红色→革命, 玫瑰→爱情, 红色→喜庆, 玫瑰→灯笼, 红色→太阳, 玫瑰→花园.
    assert [e.source for e in r.expanded] == ["红色", "玫瑰"] * 3


def test_expand_strategy_1(expander: Expander) -> None:
    r = expander.expand("木木喜欢红色的玫瑰", strategy=1, exclude=["木木"])
    # 喜庆 7 (+2: also from 玫瑰) = 9, 灯笼 6 (+2) = 8; then 革命 7, 爱情 7 by first sight.
    assert words(r.expanded) == [
        ("喜庆", 9), ("灯笼", 8), ("革命", 7), ("爱情", 7), ("太阳", 5), ("花园", 4),
    ]  # fmt: skip


def test_filter_levels(expander: Expander) -> None:
    r = expander.expand("红色的玫瑰", strategy=0, filter_levels=[7], exclude=["木木"])
    # 革命, 喜庆 (红色) and 爱情 (玫瑰) are level 7; 玫瑰's weaker 喜庆 2 is then still free.
    assert words(r.expanded) == [("灯笼", 6), ("花园", 4), ("太阳", 5), ("喜庆", 2)]
    # in strategy 1 a filtered association neither appears nor adds a recurrence bonus
    r = expander.expand("红色的玫瑰", strategy=1, filter_levels=[2, 5])
    assert ("喜庆", 7) in words(r.expanded) and ("灯笼", 6) in words(r.expanded)
    assert words(expander.expand("红色", filter_levels=[0]).expanded)[0] == ("革命", 7)


def test_max_words(expander: Expander) -> None:
    assert len(expander.expand("红色的玫瑰", max_words=3).expanded) == 3
    assert expander.expand("红色的玫瑰", max_words=0).expanded == []


def test_names_never_expanded_or_emitted(expander: Expander) -> None:
    r = expander.expand("红色", exclude=["木木"])
    assert "木木" not in [e.word for e in r.expanded]
    assert "木木" in [e.word for e in expander.expand("红色").expanded]  # only when named


def test_single_char_keyword_flagged_and_expanded(expander: Expander) -> None:
    r = expander.expand("我的猫")
    assert [(k.word, k.single_char) for k in r.keywords] == [("猫", True)]
    assert [e.word for e in r.expanded] == ["小猫", "宠物"]


def test_unknown_compound_uses_its_known_part(expander: Expander) -> None:
    r = expander.expand("想吃火锅")
    assert "吃火锅" in [k.word for k in r.keywords]
    assert words(r.expanded) == [("火锅", 7), ("麻辣烫", 6), ("聚餐", 5)]


def test_an_unknown_word_costs_the_same_whatever_its_length(expander: Expander) -> None:
    """Every prefix and suffix of an unknown word was looked up: one latin "word" of 500 KB
    in a /query held a core for 70 s. Parts are now at most MAX_PART_CHARS long."""
    from kemem_es.expand.expander import MAX_PART_CHARS

    looked: list[str] = []
    lexicon = Lexicon.from_mapping(LEX)
    get = lexicon.get
    lexicon.get = lambda word: looked.append(word) or get(word)  # type: ignore[method-assign]
    counted = Expander(lexicon, expander.tokenizer, IDF)
    assert counted.associations("fuzzq" * 10_000) == []
    assert len(looked) <= 1 + 2 * MAX_PART_CHARS
    assert max(len(w) for w in looked[1:]) == MAX_PART_CHARS
    # the head of a long compound is still found
    assert counted.associations("很" * 1_000 + "火锅")[:2] == [("火锅", 7), ("麻辣烫", 6)]


def test_deterministic_and_serialisable(expander: Expander) -> None:
    a = expander.expand("红色的玫瑰和火锅", strategy=1)
    b = expander.expand("红色的玫瑰和火锅", strategy=1)
    assert a == b
    again = Expansion.model_validate_json(a.model_dump_json())
    assert again == a
    assert a.level_pairs()[0] == {a.expanded[0].word: a.expanded[0].level}
    with pytest.raises(ValueError, match="strategy"):
        expander.expand("红色", strategy=2)


def test_default_expander_on_shipped_lexicon() -> None:
    exp = default_expander()
    assert exp is default_expander()
    r = exp.expand("红色", max_words=12)
    assert [e.word for e in r.expanded][:3] == ["革命", "红旗", "喜庆"]
    assert all(1 <= e.level <= 7 for e in r.expanded)
    r = exp.expand("下周我生日，想和闺蜜去看演唱会", max_words=100, strategy=1)
    found = {e.word for e in r.expanded}
    assert {"蛋糕", "礼物", "巡演"} <= found and 50 < len(r.expanded) <= 100


def test_cli_expand_json() -> None:
    from typer.testing import CliRunner

    from kemem_es.cli.app import app

    out = CliRunner().invoke(
        app, ["expand", "我和木木去吃火锅", "--json", "--max-words", "5", "--names", "木木"]
    )
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert len(payload["expanded"]) == 5
    assert "木木" not in [k["word"] for k in payload["keywords"]]
    table = CliRunner().invoke(app, ["expand", "红色", "--strategy", "1", "--filter-levels", "7"])
    assert table.exit_code == 0 and "灯笼" in table.stdout
