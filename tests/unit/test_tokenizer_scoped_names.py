"""A scoped view's names: the memoised normalisation (issue 42) keeps what the plain one
kept, and a scope's names that are already normal are taken as they are."""

from __future__ import annotations

from kemem_es.text import tokenizer as tk
from kemem_es.text.tokenizer import Tokenizer, name_word, normalize


def reference(names: frozenset[str]) -> frozenset[str]:
    """What ``scoped`` kept before the memo: each name normalised, then ``name_word``."""
    return frozenset(n for n in (normalize(x).strip() for x in names) if name_word(n))


RAW = frozenset(
    {
        "祁煜",
        " 木木 ",
        "ＡＢＣ名",
        "Grace",
        "x",
        "豆",
        "a b",
        "想去海边看日出的人啊啊啊",
        "123",
        "T恤店",
    }
)


def test_kept_names_match_the_plain_normalisation() -> None:
    assert tk._kept_names(RAW) == reference(RAW)
    assert tk._kept_names(RAW) == reference(RAW)  # memoised: the same again


def test_names_already_normal_are_taken_as_they_are() -> None:
    normal = reference(RAW)
    first = tk._kept_names(normal)
    assert first == normal
    again = frozenset(set(normal))  # another object with the same names (a renewed scope)
    assert tk._kept_names(again) is again


def test_a_cleared_memo_gives_the_same_names() -> None:
    tk._KEPT_NAMES.clear()
    tk._SELF_KEPT.clear()
    assert tk._kept_names(RAW) == reference(RAW)


def test_scoped_view_joins_names_as_before() -> None:
    base = Tokenizer()
    view = base.scoped(frozenset({" 祁煜 ", "ＡＢＣ名"}))
    assert view.names == frozenset({"祁煜", "abc名"})
    assert view._longest_name == 4
    assert "祁煜" in view.tokenize("我今天见到了祁煜")
    assert base.scoped(frozenset({"x"})) is base  # nothing kept: the base itself
