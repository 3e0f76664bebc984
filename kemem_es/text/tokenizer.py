"""jieba tokenisation shared by indexing and querying, so both sides see the same tokens."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import jieba

from kemem_es.text.stopwords import LEXICON_DIR, default_stopwords

USER_DICT_PATH = LEXICON_DIR / "userdict.txt"

# A token is kept when it holds a letter or digit of any script; punctuation and spaces are dropped.
_WORDY = re.compile(r"[^\W_]")
_LATIN = re.compile(r"[a-z]+")
_HAN = re.compile(r"^[\u3400-\u9fff]+$")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    """Snowball's English stemmer (running → run, summaries → summari), one per process."""
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of a lowercase latin word; other tokens unchanged."""
    if len(word) < 4 or not _LATIN.fullmatch(word):
        return word
    return str(_stemmer().stemWord(word))


def normalize(text: str) -> str:
    """NFKC (full-width latin/digits to ASCII) then lowercase, applied before cutting."""
    return unicodedata.normalize("NFKC", text).lower()


class Tokenizer:
    """A private ``jieba.Tokenizer`` (no global jieba state) with user words and stop words.

    jieba's dictionary load costs ~0.5 s, so it happens on first use, not on construction;
    jieba caches the parsed dictionary in the system temp dir across processes.
    HMM new-word guessing is off by default: it glues unknown characters to their neighbours
    (木木去, 好开心), producing tokens the lexicon and the IDF table do not know; names belong in
    the user dictionary (``add_words``) instead.

    Latin words are lowercased (NFKC) and stemmed with Snowball's English stemmer, so
    ``running``/``runs`` meet ``run`` at index and query time alike. Han tokens of three or
    more characters also have **sub-words** (jieba's search mode: the dictionary words of two
    and three characters inside them, 吃火锅 → 火锅), which the index text carries and the
    query side searches, so 吃火锅 meets 火锅 in both directions.
    """

    def __init__(
        self,
        user_dict_paths: Iterable[str | Path] = (),
        words: Iterable[str] = (),
        stopwords: Iterable[str] | None = None,
        hmm: bool = False,
    ) -> None:
        self._jieba = jieba.Tokenizer()
        self._lock = threading.Lock()
        self._ready = False
        self._pending_paths = [Path(p) for p in user_dict_paths]
        self._pending_words: list[str] = []
        self.hmm = hmm
        self.stopwords: frozenset[str] = (
            default_stopwords() if stopwords is None else frozenset(normalize(w) for w in stopwords)
        )
        self.add_words(words)

    def _engine(self) -> jieba.Tokenizer:
        if self._ready:
            return self._jieba
        with self._lock:
            if not self._ready:
                tk = self._jieba
                tk.initialize()
                # Input is lowercased before cutting, so jieba's few mixed-case words (T恤, B超)
                # need lowercase twins to stay whole.
                for word in [w for w, f in tk.FREQ.items() if f and w != w.lower()]:
                    tk.add_word(word.lower(), tk.FREQ[word])
                for path in self._pending_paths:
                    for word in _read_user_dict(path):
                        tk.add_word(*word)
                for word in self._pending_words:
                    tk.add_word(word)
                self._pending_paths.clear()
                self._pending_words.clear()
                self._ready = True
        return self._jieba

    def add_words(self, words: Iterable[str]) -> None:
        """Make words (entity, user and agent names, domain terms) single tokens from now on."""
        clean = [normalize(w).strip() for w in words]
        clean = [w for w in clean if w and not any(c.isspace() for c in w)]
        with self._lock:
            if not self._ready:
                self._pending_words.extend(clean)
                return
            for word in clean:
                self._jieba.add_word(word)

    def load_user_dict(self, path: str | Path) -> None:
        """Add a jieba-format user dictionary file (``word [freq] [pos]`` per line)."""
        entries = _read_user_dict(Path(path))
        with self._lock:
            if not self._ready:
                self._pending_paths.append(Path(path))
                return
            for entry in entries:
                self._jieba.add_word(*entry)

    def tokenize_spans(self, text: str) -> tuple[str, list[tuple[str, int, int]]]:
        """The normalised text and its kept tokens with [start, end) offsets into it."""
        norm = normalize(text)
        spans: list[tuple[str, int, int]] = []
        pos = 0
        for piece in self._engine().lcut(norm, HMM=self.hmm):
            end = pos + len(piece)
            token = piece.strip()
            if token and _WORDY.search(token):
                spans.append((stem(token), pos, end))
            pos = end
        return norm, spans

    def subwords(self, token: str) -> list[str]:
        """jieba search mode's pieces of a Han token: its dictionary words of two and three
        characters (吃火锅 → 火锅; 北京大学 → 北京, 大学), the token itself excluded."""
        if len(token) < 3 or not _HAN.match(token):
            return []
        freq = self._engine().FREQ
        out: list[str] = []
        for n in (2, 3):
            if len(token) <= n:
                continue
            for i in range(len(token) - n + 1):
                piece = token[i : i + n]
                if freq.get(piece) and piece not in out:
                    out.append(piece)
        return out

    def tokenize(self, text: str) -> list[str]:
        """Tokens in order: punctuation and spaces dropped, latin lowercased, stop words kept."""
        return [t for t, _, _ in self.tokenize_spans(text)[1]]

    def index_text(self, text: str) -> str:
        """Tokens joined by single spaces, for the engine's whitespace-analysed text field; the
        sub-words of long tokens follow after all tokens, so phrases over the sentence's own
        tokens still match position by position."""
        tokens = self.tokenize(text)
        subs = [s for t in tokens for s in self.subwords(t)]
        return " ".join(tokens + subs)

    def is_stopword(self, word: str) -> bool:
        return word in self.stopwords


def _read_user_dict(path: Path) -> list[tuple[str, int | None, str | None]]:
    """Parse ``word [freq] [pos]`` lines; a missing freq lets jieba pick one that keeps it whole."""
    entries: list[tuple[str, int | None, str | None]] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = normalize(line).split()
            if not parts or parts[0].startswith("#"):
                continue
            if len(parts) > 1 and not parts[1].isdigit():
                raise ValueError(f"{path}:{n}: frequency must be an integer, got {parts[1]!r}")
            freq = int(parts[1]) if len(parts) > 1 else None
            tag = parts[2] if len(parts) > 2 else None
            entries.append((parts[0], freq, tag))
    return entries


@lru_cache(maxsize=1)
def default_tokenizer() -> Tokenizer:
    """Process-wide tokenizer with the shipped user dictionary and stop words."""
    return Tokenizer(user_dict_paths=[USER_DICT_PATH])
