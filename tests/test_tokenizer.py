"""Tokenizer: same tokens at index and query time, user words, no global jieba state."""

from __future__ import annotations

import jieba
import pytest

from kemem_es.text import Tokenizer, default_stopwords, default_tokenizer, normalize


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer(words=["木木"], stopwords=["的"])


def test_punctuation_and_whitespace_dropped(tok: Tokenizer) -> None:
    tokens = tok.tokenize("今天，我们去 吃火锅！！ 好吗？\n")
    assert all(t.strip() == t and t for t in tokens)
    assert not {"，", "！", "？", " ", "\n"} & set(tokens)
    assert "火锅" in "".join(tokens)


def test_latin_lowercased_and_fullwidth_normalised(tok: Tokenizer) -> None:
    assert tok.tokenize("ＡＢＣ Hello") == tok.tokenize("abc hello") == ["abc", "hello"]
    assert normalize("Ｔ恤") == "t恤"


def test_index_text_is_tokens_joined_by_single_spaces(tok: Tokenizer) -> None:
    text = "木木喜欢  蓝玫瑰和星座。"
    assert tok.index_text(text) == " ".join(tok.tokenize(text))
    assert "  " not in tok.index_text(text)


def test_same_tokens_every_time(tok: Tokenizer) -> None:
    text = "祁煜提议在画廊的圣诞装饰中加入红色元素"
    assert tok.tokenize(text) == tok.tokenize(text)


def test_added_words_stay_whole_without_touching_global_jieba(tok: Tokenizer) -> None:
    assert "木木" in tok.tokenize("木木去看海")
    tok.add_words(["祁煜"])  # after initialisation too
    assert "祁煜" in tok.tokenize("祁煜在画画")
    assert "祁煜" not in jieba.dt.FREQ


def test_user_dict_file(tmp_path) -> None:
    path = tmp_path / "user.txt"
    path.write_text("# names\n阿狸喵 10 nr\n星语者\n", encoding="utf-8")
    tok = Tokenizer(user_dict_paths=[path])
    assert tok.tokenize("阿狸喵和星语者") == ["阿狸喵", "和", "星语者"]
    bad = tmp_path / "bad.txt"
    bad.write_text("好词 many\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:1"):
        tok.load_user_dict(bad)


def test_default_tokenizer_is_cached_with_shipped_files() -> None:
    tok = default_tokenizer()
    assert tok is default_tokenizer()
    assert tok.stopwords == default_stopwords()
    assert {"的", "我", "了"} <= tok.stopwords
    assert "剧本杀" in tok.tokenize("周末去玩剧本杀")  # shipped user dictionary


def test_stop_words_are_kept_in_tokens(tok: Tokenizer) -> None:
    # Stop words only stop base-word picking; the index text keeps the sentence as said.
    assert "的" in tok.tokenize("红色的花")
