"""Stop words: the shipped list plus any extra files, never turned into search words."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from kemem_es.text.shipped import LEXICON_DIR
from kemem_es.text.stemming import stem

STOPWORDS_PATH = LEXICON_DIR / "stopwords.txt"
STOPWORDS_EN_PATH = LEXICON_DIR / "stopwords_en.txt"


def read_word_list(path: str | Path) -> list[str]:
    """One word per line; blank lines and ``#`` comments skipped; latin lowercased like tokens."""
    words: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            word = line.strip()
            if word and not word.startswith("#"):
                words.append(word.lower())
    return words


@lru_cache(maxsize=1)
def default_stopwords() -> frozenset[str]:
    """The shipped Chinese and English lists (English also in stemmed form, as tokens are),
    read once per process."""
    english = read_word_list(STOPWORDS_EN_PATH)
    return frozenset(read_word_list(STOPWORDS_PATH) + english + [stem(w) for w in english])


def load_stopwords(
    paths: Iterable[str | Path] = (), *, include_default: bool = True
) -> frozenset[str]:
    """The shipped list (unless disabled) merged with the given files."""
    words = set(default_stopwords()) if include_default else set()
    for path in paths:
        words.update(read_word_list(path))
    return frozenset(words)
