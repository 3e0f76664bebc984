"""English stemming for latin tokens: Snowball's English stemmer, with irregular past forms
mapped to their base form first (bought → buy), so a memory's and a query's forms of a word
meet as one search word."""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Protocol

from kemem_es.text.shipped import LEXICON_DIR

_LATIN = re.compile(r"[a-z]+")
IRREGULAR_PATH = LEXICON_DIR / "irregular_en.txt"


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


_local = threading.local()


def _stemmer() -> _Stemmer:
    """Snowball's English stemmer (running → run, summaries → summari), one per thread: a
    stemmer keeps the word it is working on in its own fields, so threads sharing one mix
    their words up (wrong stems, or an IndexError inside it)."""
    stemmer: _Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


@lru_cache(maxsize=1)
def _irregular() -> dict[str, str]:
    """English irregular past forms → base form (bought → buy), which Snowball leaves apart."""
    pairs = (line.split() for line in IRREGULAR_PATH.read_text(encoding="utf-8").splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2 and not p[0].startswith("#")}


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of a lowercase latin word (an irregular past form stems as its base form:
    bought → buy, grew → grow); other tokens unchanged."""
    if not _LATIN.fullmatch(word):
        return word
    word = _irregular().get(word, word)
    if len(word) < 4:
        return word
    return _stemmer().stemWord(word)
