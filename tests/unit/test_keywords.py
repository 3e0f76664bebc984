"""TF-IDF base words and the IDF table."""

from __future__ import annotations

import gzip
import json

import pytest

from kemem_es.text import IdfTable, Tokenizer, default_idf, pick_base_words, read_jsonl_texts
from kemem_es.text.keywords import base_words_with_tokens


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer(words=["木木"])  # shipped stop words


def picked(text: str, tok: Tokenizer, **kw) -> list[str]:
    return [b.word for b in pick_base_words(text, tokenizer=tok, **kw)]


def test_stop_words_and_names_dropped(tok: Tokenizer) -> None:
    words = picked("木木和祁煜今天一起去吃火锅了", tok, exclude=["木木", "祁煜"])
    assert "吃火锅" in words  # jieba keeps this compound whole; the expander resolves it
    assert not {"木木", "祁煜", "祁", "煜", "今天", "和", "了", "一起", "去"} & set(words)


def test_names_dropped_even_when_jieba_splits_them(tok: Tokenizer) -> None:
    # 星语喵 is unknown to jieba, so it is cut into pieces; none may become a base word.
    _, tokens = base_words_with_tokens("星语喵想喝咖啡", tokenizer=tok)
    assert "星语喵" not in tokens
    words = picked("星语喵想喝咖啡", tok, exclude=["星语喵"])
    assert words and not any(set(w) & set("星语喵") for w in words)
    assert any("咖啡" in w for w in words)


def test_a_latin_name_drops_only_whole_words(tok: Tokenizer) -> None:
    """Names are matched as characters so that a Chinese name jieba cuts is still dropped, but
    a latin name must not take the words it sits inside: with Ann and Jo among the names,
    annoyed, planned and enjoy once vanished from every query."""
    text = "Ann was annoyed that Jo planned to enjoy the renovation without her, Jo's idea"
    words = picked(text, tok, exclude=["Ann", "Jo", "Nova"])
    assert {"annoy", "plan", "enjoy", "renov", "idea"} <= set(words)
    assert not {"ann", "jo"} & set(words)
    assert "木木" not in picked("木木说好的", tok, exclude=["木木"])


def test_one_character_words_flagged(tok: Tokenizer) -> None:
    by_word = {b.word: b for b in pick_base_words("我的猫喜欢红色的玫瑰", tokenizer=tok)}
    assert by_word["猫"].single_char is True
    assert by_word["玫瑰"].single_char is False


def test_weights_descending_top_k_and_stable_ties(tok: Tokenizer) -> None:
    flat = IdfTable({}, default=1.0)  # equal idf: weight is tf, ties keep text order
    top = pick_base_words("咖啡 奶茶 蛋糕 奶茶", top_k=3, tokenizer=tok, idf=flat)
    assert [b.word for b in top] == ["奶茶", "咖啡", "蛋糕"]
    assert top[0].weight == pytest.approx(2 / 4)
    assert picked("咖啡 奶茶 蛋糕", tok, top_k=2, idf=flat) == ["咖啡", "奶茶"]
    assert pick_base_words("咖啡", top_k=0, tokenizer=tok) == []


def test_idf_decides_between_equal_counts(tok: Tokenizer) -> None:
    idf = IdfTable({"咖啡": 2.0, "奶茶": 9.0}, default=1.0)
    assert picked("咖啡 奶茶", tok, idf=idf) == ["奶茶", "咖啡"]


def test_numbers_and_symbols_are_not_base_words(tok: Tokenizer) -> None:
    assert picked("2024 年 ... 3.5", tok) == ["年"]


def test_jieba_default_idf() -> None:
    table = default_idf()
    assert table is default_idf()
    assert len(table) > 100_000
    assert table.get("生日") > table.get("的")
    assert table.get("完全没见过的词") == table.default


def test_idf_from_texts_save_load(tmp_path, tok: Tokenizer) -> None:
    texts = ["木木喜欢咖啡", "木木喜欢奶茶", "木木讨厌下雨"]
    table = IdfTable.from_texts(texts, tokenizer=tok)
    assert table.docs == 3
    assert table.get("木木") < table.get("咖啡") < table.get("从没出现")
    path = tmp_path / "idf.txt"
    table.save(path)
    again = IdfTable.load(path)
    assert again.docs == 3
    assert again.default == pytest.approx(table.default)
    assert again.get("咖啡") == pytest.approx(table.get("咖啡"))
    with pytest.raises(ValueError, match="empty corpus"):
        IdfTable.from_texts([], tokenizer=tok)


def test_read_jsonl_texts(tmp_path) -> None:
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "你好"}) + "\n\n" + json.dumps({"text": "再见"}) + "\n")
    assert list(read_jsonl_texts(path)) == ["你好", "再见"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"body": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: field 'text'"):
        list(read_jsonl_texts(bad))
    bad.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not valid JSON"):
        list(read_jsonl_texts(bad))


def test_english_idf_from_probabilities(tmp_path) -> None:
    """Words sharing a stem pool their probability; rarer stems weigh more; stems past the
    cut-off are left to the unseen-latin default; non-latin entries are ignored."""
    import math

    from kemem_es.text.english_idf import OFFSET, build, from_probabilities

    probs = {"walk": -9.0, "walked": -9.5, "walking": -9.2, "sourdough": -14.7, "zzz": -25.0}
    probs |= {"火锅": -5.0, "e-mail": -8.0}
    table = from_probabilities(probs)
    pooled = -math.log(math.exp(-9.0) + math.exp(-9.5) + math.exp(-9.2)) - OFFSET
    assert table["walk"] == pytest.approx(pooled, abs=1e-3)
    assert table["sourdough"] == pytest.approx(14.7 - OFFSET, abs=1e-3)
    assert set(table) == {"walk", "sourdough"}
    src = tmp_path / "p.json"
    src.write_text(json.dumps(probs), encoding="utf-8")
    out = tmp_path / "idf_en.txt.gz"
    assert build(src, out) == 2
    with gzip.open(out, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("# kemem-es english idf") and len(lines) == 3


def test_cli_rebuilds_the_english_table(tmp_path) -> None:
    """`kemem-es lexicon idf-en --source … -o …` writes the table from a probability file and
    says what it wrote; a bad source is a clear error, not a traceback."""
    from typer.testing import CliRunner

    from kemem_es.cli.app import app

    src = tmp_path / "p.json"
    src.write_text(json.dumps({"sourdough": -14.7, "dog": -9.0}), encoding="utf-8")
    out = tmp_path / "idf.txt.gz"
    run = CliRunner().invoke(app, ["lexicon", "idf-en", "--source", str(src), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "2 English stems" in run.output and out.is_file()
    bad = CliRunner().invoke(app, ["lexicon", "idf-en", "--source", str(tmp_path / "none.json")])
    assert bad.exit_code != 0 and "none.json" in bad.output
