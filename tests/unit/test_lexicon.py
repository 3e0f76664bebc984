"""Lexicon storage, overrides, merging, the build and the shipped default."""

from __future__ import annotations

import numpy as np
import pytest

from kemem_es.expand import DEFAULT_LEXICON_PATH, Lexicon, default_lexicon
from kemem_es.expand.build import (
    BuildConfig,
    build_from_cooccurrence,
    build_from_vectors,
    nearest_neighbours,
    quantile_levels,
    shared_vector_mask,
)
from kemem_es.text import Tokenizer, default_tokenizer

SMALL = {
    "红色": [("玫瑰", 6), ("革命", 7), ("红色", 3), ("玫瑰", 2), ("零", 0)],
    "咖啡": [("奶茶", 4)],
}


def test_from_mapping_sorts_dedups_and_drops_self_and_zero() -> None:
    lex = Lexicon.from_mapping(SMALL)
    assert lex.get("红色") == [("革命", 7), ("玫瑰", 6)]
    assert lex.get("玫瑰") == [] and lex.get("没有") == []
    assert "红色" in lex and "玫瑰" not in lex
    assert sorted(lex.words()) == ["咖啡", "红色"] and len(lex) == 2


def test_save_load_round_trip(tmp_path) -> None:
    lex = Lexicon.from_mapping(SMALL, meta={"source": "test"})
    path = tmp_path / "lex.npz"
    lex.save(path)
    again = Lexicon.load(path)
    assert dict(again.items()) == dict(lex.items())
    assert again.meta == {"source": "test"}


def write(tmp_path, text: str):
    path = tmp_path / "over.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_overrides_add_relevel_remove(tmp_path) -> None:
    over = write(
        tmp_path,
        "# comment\n\n红色\t喜庆\t7\n红色\t玫瑰\t3\n红色\t革命\t0\n咖啡\t奶茶\t-1\n绿色\t森林\t5\n",
    )
    lex = Lexicon.from_mapping(SMALL)
    lex.apply_overrides(over)
    assert lex.get("红色") == [("喜庆", 7), ("玫瑰", 3)]
    assert lex.get("咖啡") == [] and "咖啡" not in lex
    assert lex.get("绿色") == [("森林", 5)]
    assert sorted(lex.words()) == ["红色", "绿色"]


def test_override_entries_rank_first_among_equal_levels(tmp_path) -> None:
    lex = Lexicon.from_mapping({"红色": [("黄色", 7), ("蓝色", 6)]})
    lex.apply_overrides(write(tmp_path, "红色\t革命\t7\n红色\t红旗\t7\n"))
    assert [w for w, _ in lex.get("红色")] == ["革命", "红旗", "黄色", "蓝色"]


def test_override_star_clears_then_adds(tmp_path) -> None:
    path = write(tmp_path, "红色\t*\t0\n红色\t中国红\t4\n")
    lex = Lexicon.from_mapping(SMALL)
    lex.apply_overrides(path)
    assert lex.get("红色") == [("中国红", 4)]
    saved = tmp_path / "folded.npz"
    lex.save(saved)  # overrides are folded into the saved file
    assert Lexicon.load(saved).get("红色") == [("中国红", 4)]
    assert Lexicon.load(saved, overrides=[write(tmp_path, "红色\t*\t0\n")]).get("红色") == []


@pytest.mark.parametrize(
    ("text", "match"),
    [("红色\t喜庆\n", "over.tsv:1"), ("# c\n红色\t喜庆\tseven\n", "over.tsv:2: level"),
     ("红色\t*\t3\n", "over.tsv:1")],
)  # fmt: skip
def test_bad_override_lines_name_the_line(tmp_path, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Lexicon.from_mapping(SMALL).apply_overrides(write(tmp_path, text))


def test_overrides_are_normalised_like_tokens(tmp_path) -> None:
    lex = Lexicon.from_mapping({})
    lex.apply_overrides(write(tmp_path, "ＫＴＶ\tK歌\t5\n"))
    assert lex.get("ktv") == [("k歌", 5)]


def test_merge_keeps_higher_level() -> None:
    a = Lexicon.from_mapping({"红色": [("革命", 5), ("玫瑰", 4)]}, meta={"source": "vectors"})
    b = Lexicon.from_mapping({"红色": [("革命", 7), ("喜庆", 4)], "蛋糕": [("生日", 6)]})
    m = a.merge(b)
    assert m.get("红色") == [("革命", 7), ("玫瑰", 4), ("喜庆", 4)]
    assert m.get("蛋糕") == [("生日", 6)]
    assert a.merge(b, max_per_word=1).get("红色") == [("革命", 7)]


# ---- build --------------------------------------------------------------------------------


def test_nearest_neighbours_and_levels() -> None:
    v = np.array([[1, 0], [0.9, 0.1], [0.5, 0.5], [0, 1]], dtype=np.float32)
    idx, sims = nearest_neighbours(v, 2, np.array([True, True, True, False]), block=3)
    assert idx[0].tolist() == [1, 2] and idx[3].tolist() == [2, 1]  # row 3 never a neighbour
    assert np.all(np.diff(sims, axis=1) <= 0)
    levels, cuts = quantile_levels(np.linspace(0, 1, 70))
    assert levels.min() == 1 and levels.max() == 7 and len(cuts) == 6
    assert np.bincount(levels)[1:].tolist() == [10] * 7


def test_build_from_vectors_filters_junk(tmp_path) -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 8))
    words = ["红色", "黄色", "蓝色", "咖啡", "奶茶", "Point", "{v}}", "下周", "慰问组",
             "革命性突破的年代啊", "李白"]  # fmt: skip
    vecs = np.vstack([
        base[0], base[0] + 0.1, base[0] + 0.2,  # colours
        base[1], base[1] + 0.1,  # drinks
        base[0] + 0.3, base[0] + 0.4,  # latin / debris
        base[2], base[2],  # one placeholder vector shared by two words
        base[0] + 0.5, base[0] + 0.05,  # too long; a person's name (POS nr)
    ]).astype(np.float16)  # fmt: skip
    path = tmp_path / "vec.npz"
    np.savez(path, words=np.array(words), vectors=vecs)
    lex = build_from_vectors(path, BuildConfig(neighbours=2, min_sim=0.0))
    assert set(lex.words()) == {"红色", "黄色", "蓝色", "咖啡", "奶茶"}
    assert [w for w, _ in lex.get("红色")] == ["黄色", "蓝色"]
    assert lex.get("咖啡")[0][0] == "奶茶"
    assert all(1 <= lv <= 7 for _, pairs in lex.items() for _, lv in pairs)
    assert len(lex.meta["level_cuts"]) == 6
    assert shared_vector_mask(vecs).tolist() == [False] * 7 + [True] * 2 + [False] * 2


def test_build_from_cooccurrence() -> None:
    tok = Tokenizer(stopwords=["的", "和", "了"])
    texts = ["生日 蛋糕 蜡烛"] * 4 + ["火锅 麻辣"] * 4 + ["生日 火锅"]
    lex = build_from_cooccurrence(texts, tok, BuildConfig(pmi_min_count=3, pmi_min_npmi=0.2))
    assert [w for w, _ in lex.get("生日")] == ["蛋糕", "蜡烛"]
    assert "生日" not in [w for w, _ in lex.get("火锅")]  # co-occurs once: below min_count
    assert all(1 <= lv <= 7 for _, pairs in lex.items() for _, lv in pairs)


# ---- shipped default ----------------------------------------------------------------------


def test_shipped_lexicon_is_compact_and_sensible() -> None:
    assert DEFAULT_LEXICON_PATH.stat().st_size < 15_000_000
    lex = default_lexicon()
    assert lex is default_lexicon()
    assert len(lex) > 30_000
    assert [w for w, _ in lex.get("红色")][:3] == ["革命", "红旗", "喜庆"]
    for word in ("咖啡", "生日", "火锅", "失恋", "画画", "演唱会", "猫", "剧本杀"):
        pairs = lex.get(word)
        assert len(pairs) >= 5, word
        assert all(1 <= lv <= 7 for _, lv in pairs)
        assert [lv for _, lv in pairs] == sorted((lv for _, lv in pairs), reverse=True)
    assert "分手" in dict(lex.get("失恋")) and "巡演" in dict(lex.get("演唱会"))


def test_curated_words_are_single_tokens() -> None:
    from kemem_es.text.shipped import LEXICON_DIR

    tok = default_tokenizer()
    for line in (LEXICON_DIR / "curated.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            word, assoc, _ = line.split("\t")
            assert tok.tokenize(word) == [word] and tok.tokenize(assoc) == [assoc], line
