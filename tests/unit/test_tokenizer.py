"""Tokenizer: same tokens at index and query time, user words, no global jieba state."""

from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jieba
import pytest
import rjieba

from kemem_es.text import Tokenizer, default_stopwords, default_tokenizer, normalize
from kemem_es.text.stemming import stem
from kemem_es.text.tokenizer import _HAN, _WORDY, USER_DICT_PATH, dictionary_word


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
    assert not rjieba.has_word("祁煜")


def test_a_scopes_names_join_whole_tokens_in_its_view_only() -> None:
    """``scoped`` keeps one scope's names whole after the cut, in that view alone: the shared
    tokenizer (every other tenant's) is untouched, and a name never splits a word jieba found
    (树林深处 keeps 树林 and 深处 for a user called 林深)."""
    base = Tokenizer()
    text = "祁煜陪阿杰去树林深处看日出，小K也来了"
    plain = base.tokenize(text)
    view = base.scoped(["祁煜", "阿杰", "林深", "看日", "小K", "x", "有 空格"])
    assert view.names == {"祁煜", "阿杰", "林深", "看日", "小k"}
    assert view.tokenize(text) == [
        "祁煜", "陪", "阿杰", "去", "树林", "深处", "看", "日出", "小k", "也", "来", "了",
    ]  # fmt: skip
    assert base.tokenize(text) == plain and "祁煜" not in plain
    assert base.scoped([]) is base
    norm, spans = view.tokenize_spans("祁煜，祁煜")
    assert [(t, norm[a:b]) for t, a, b in spans] == [("祁煜", "祁煜"), ("祁煜", "祁煜")]
    assert view.index_text("祁煜在画画") == base.scoped(["祁煜"]).index_text("祁煜在画画")


def test_latin_names_do_not_cut_english_words_apart(tmp_path) -> None:
    """A user named Ed once made `need` two tokens (ne, ed), in every tenant's text: a plain
    latin word in jieba's dictionary can only cut longer latin words, which jieba keeps whole
    without it. Names with Han characters still become words."""
    text = "I need to call Ann about the planned education trip, she was annoyed"
    plain = Tokenizer().tokenize(text)
    tok = Tokenizer()
    tok.add_words(["Ed", "Al", "Ann", "Dev", "小K"])
    assert tok.tokenize(text) == plain
    assert "ann" in plain and "need" in plain and "educ" in plain
    assert tok.tokenize("小K和Ed去了") == ["小k", "和", "ed", "去", "了"]
    path = tmp_path / "user.txt"
    path.write_text("al 100\n星语者\n", encoding="utf-8")
    assert Tokenizer(user_dict_paths=[path]).tokenize(text) == plain


def test_stemming_from_many_threads_at_once() -> None:
    """Queries tokenise on many threads (a server's workers, AsyncKemem's thread pool). A
    Snowball stemmer keeps the word it works on in its own fields: one shared by threads
    returned wrong stems or raised IndexError (CI's guard test hit it). Switching threads
    every microsecond makes the race near certain if it is there."""
    rng = random.Random(0)
    ends = ("ing", "ies", "ed", "s", "ly", "ness", "ational")
    letters = "abcdefghilmnoprstuy"
    words = [
        "".join(rng.choice(letters) for _ in range(rng.randint(4, 14))) + rng.choice(ends)
        for _ in range(3000)
    ]
    uncached = stem.__wrapped__  # past the cache: every call reaches a stemmer
    want = [uncached(w) for w in words]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda ws: [uncached(w) for w in ws], [words] * 8))
    finally:
        sys.setswitchinterval(interval)
    assert all(g == want for g in got)


def test_irregular_past_forms_meet_their_base_form(tok: Tokenizer) -> None:
    """A memory says what happened ("Caroline bought", "grew", "met"), a question asks in the
    base form ("when did she buy"); Snowball leaves irregular forms apart, the table joins them.
    Ambiguous forms stay themselves (a bit, a rose, a flu shot)."""
    said = tok.tokenize("She bought tomatoes, grew basil and met Ann's brother, who ran.")
    asked = tok.tokenize("when did she buy tomatoes, grow basil, meet him and run?")
    assert {"buy", "grow", "meet", "run"} <= set(said) & set(asked)
    assert tok.tokenize("a bit of a rose after the flu shot") == [
        "a",
        "bit",
        "of",
        "a",
        "rose",
        "after",
        "the",
        "flu",
        "shot",
    ]


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


REPO = Path(__file__).resolve().parents[2]


def _corpus_texts() -> list[str]:
    """Every text of the demo corpus and of the dialogue dev set's memories and turns."""
    texts: list[str] = []
    paths = [
        *(REPO / "kemem_es" / "demo").glob("*.jsonl"),
        *(REPO / "bench" / "dialogue").glob("*.jsonl"),
    ]
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts += [v for v in record.values() if isinstance(v, str)]
            texts += [k for k in record.get("keywords", []) if isinstance(k, str)]
    for path in (REPO / "bench" / "dialogue").glob("*.txt"):
        texts += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts


def test_cuts_exactly_like_python_jieba() -> None:
    """jieba-rs must give Python jieba's tokens (same dictionary, user words, lowercase twins):
    indices written before the switch are then queried with the same tokens."""
    names = ["木木", "小满", "豆包", "祁煜", "李深", "阿杰"]
    ours = Tokenizer(user_dict_paths=[USER_DICT_PATH], words=names)
    ref = jieba.Tokenizer()
    ref.initialize()
    for word in [w for w, f in ref.FREQ.items() if f and w != w.lower()]:
        ref.add_word(word.lower(), ref.FREQ[word])
    for line in USER_DICT_PATH.read_text(encoding="utf-8").splitlines():
        parts = normalize(line).split()
        if parts and not parts[0].startswith("#") and dictionary_word(parts[0]):
            ref.add_word(parts[0], int(parts[1]) if len(parts) > 1 else None)
    for name in names:
        ref.add_word(name)
    texts = _corpus_texts()
    assert len(texts) > 3000
    extra = ["买了件T恤去做B超", "Caroline went running, 然后吃火锅", "a memory, 好emo"]
    for text in [*texts, *extra]:
        norm = normalize(text)
        want = [
            stem(t.strip()) for t in ref.lcut(norm, HMM=False) if t.strip() and _WORDY.search(t)
        ]
        assert ours.tokenize(text) == want, text
        for token in want:
            if len(token) >= 3 and _HAN.match(token):
                pieces = [
                    token[i : i + n]
                    for n in (2, 3)
                    if len(token) > n
                    for i in range(len(token) - n + 1)
                ]
                assert ours.subwords(token) == list(
                    dict.fromkeys(p for p in pieces if ref.FREQ.get(p))
                )


def test_index_texts_gives_each_text_its_own_index_text(tok: Tokenizer) -> None:
    keywords = ["吃火锅", "木木", "Running", "北京大学", "T恤", "的", "ＡＢＣ 好的", "。"]
    assert tok.index_texts(keywords) == [tok.index_text(k) for k in keywords]
    assert tok.index_texts([]) == []
    assert tok.index_texts(["a\nb", "火锅"]) == [tok.index_text("a\nb"), tok.index_text("火锅")]
    records = [json.loads(x) for x in (REPO / "kemem_es" / "demo" / "user_events.jsonl").open()]
    for record in records:
        kws = record.get("keywords", [])
        assert tok.index_texts(kws) == [tok.index_text(k) for k in kws]
