"""jieba tokenisation shared by indexing and querying, so both sides see the same tokens.

The cutting runs in jieba-rs (``rjieba``), the Rust port of jieba: the same dictionary and the
same non-HMM algorithm, so the same tokens (checked against Python jieba on the demo corpus and
the dev sets, tests/unit/test_tokenizer.py), at about a sixth of the CPU — tokenising was ~40 % of
the client's time in a bulk load and part of every query. Python jieba stays the source of the
dictionary file, the IDF table and the lexicon build."""

from __future__ import annotations

import copy
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import jieba
import rjieba

from kemem_es.bounded import Bounded
from kemem_es.text.shipped import LEXICON_DIR
from kemem_es.text.stemming import stem
from kemem_es.text.stopwords import default_stopwords

USER_DICT_PATH = LEXICON_DIR / "userdict.txt"

# A token is kept when it holds a letter or digit of any script; punctuation and spaces are dropped.
_WORDY = re.compile(r"[^\W_]")
_HAN = re.compile(r"^[\u3400-\u9fff]+$")
# jieba keeps a run of latin letters and digits whole by itself; as a dictionary word such a
# run can only cut longer words apart (a user named Ed: need → ne + ed, education → ed + ucat).
_LATIN_RUN = re.compile(r"[a-z0-9]+")
VIEWS_CACHED = 1_000  # scoped views kept (one per scope's names; the oldest built go first)


def dictionary_word(word: str) -> bool:
    """Whether a (normalised) word belongs in jieba's dictionary: not blank, no spaces, and not
    a plain latin/digit run, which jieba keeps whole without it."""
    return bool(word) and not any(c.isspace() for c in word) and not _LATIN_RUN.fullmatch(word)


def name_word(word: str) -> bool:
    """Whether a normalised name is kept whole in its scope's texts: 2–12 characters that a
    dictionary could hold (``dictionary_word``)."""
    return 1 < len(word) <= 12 and dictionary_word(word)


_KEPT_NAMES_MAX = 200_000
_KEPT_NAMES: Bounded[str, str] = Bounded(_KEPT_NAMES_MAX)  # a name → its kept form ("": not kept)


def _kept_name(name: str) -> str:
    """``name`` normalised as a scoped view keeps it, or "" when it is not a ``name_word``.
    Memoised: a scope's names are mostly an agent's official ones, shared by every user, and
    each new scope (or names renewed after their TTL) built its view by normalising all of
    them again — ~2,000 NFKC normalisations, milliseconds per new user (issue 42)."""
    kept = _KEPT_NAMES.get(name)
    if kept is None:
        norm = normalize(name).strip()
        kept = norm if name_word(norm) else ""
        _KEPT_NAMES.put(name, kept)
    return kept


# names that are their own kept form (the store's already are), as keys
_SELF_KEPT: Bounded[str, bool] = Bounded(_KEPT_NAMES_MAX)


def _kept_names(names: frozenset[str]) -> frozenset[str]:
    """The names a scoped view keeps (``_kept_name`` of each); ``names`` itself when each is
    already its own kept form, as a scope's names from the store are (store/names): then the
    check is one subset test in C, not a normalisation per name, and otherwise only the names
    not known to be their own form are looked at (a new user's few among the agent's ~2,000)."""
    todo = _SELF_KEPT.missing(names)
    if not todo:
        return names
    forms = {name: _kept_name(name) for name in todo}
    _SELF_KEPT.update((name, True) for name, form in forms.items() if form == name)
    return names.difference(forms).union(form for form in forms.values() if form)


def _join_names(
    norm: str, spans: list[tuple[str, int, int]], names: frozenset[str], longest: int
) -> list[tuple[str, int, int]]:
    """Consecutive tokens whose stretch of ``norm`` is a name become that name (the longest
    wins). Only whole tokens join, so a name never splits a word jieba found."""
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(spans):
        start = spans[i][1]
        best = -1
        for j in range(i + 1, len(spans)):
            end = spans[j][2]
            if end - start > longest:
                break
            if norm[start:end] in names:
                best = j
        if best < 0:
            out.append(spans[i])
            i += 1
        else:
            end = spans[best][2]
            out.append((norm[start:end], start, end))
            i = best + 1
    return out


def normalize(text: str) -> str:
    """NFKC (full-width latin/digits to ASCII) then lowercase, applied before cutting."""
    return unicodedata.normalize("NFKC", text).lower()


JIEBA_DICT_PATH = Path(jieba.__file__).resolve().parent / "dict.txt"


_CAPITALISED = re.compile(r"^(\S*[A-Z]\S*) (\d+)", re.MULTILINE)


@lru_cache(maxsize=1)
def _mixed_case_words() -> tuple[tuple[str, int], ...]:
    """jieba's dictionary words with (latin) capitals — T恤, B超, 66 of them — and their
    frequencies; one regex over the file (~0.1 s) rather than a loop over its 349k lines."""
    text = JIEBA_DICT_PATH.read_text(encoding="utf-8")
    return tuple((word, int(freq)) for word, freq in _CAPITALISED.findall(text))


class Tokenizer:
    """A private jieba (no global jieba state) with user words and stop words.

    The dictionary load costs ~0.2 s, so it happens on first use, not on construction.
    jieba-rs objects are not shared between threads while a word is being added, so cutting
    and adding words take the same (uncontended, sub-microsecond) lock.
    HMM new-word guessing is off by default: it glues unknown characters to their neighbours
    (木木去, 好开心), producing tokens the lexicon and the IDF table do not know; names belong in
    the user dictionary (``add_words``) instead.

    **Names** are one scope's: ``scoped(names)`` gives a view, sharing this jieba, that joins
    the pieces of those names back into one token (祁 煜 → 祁煜) after the cut. A name never
    enters the shared dictionary, so one tenant's names cannot change how another tenant's text
    is cut (an entity called 想去海边看日 would have cut every tenant's 看日出 apart), and a
    name can only join whole tokens: it never splits a dictionary word (树林深处 keeps 树林
    whatever a user is called).

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
        self._jieba: rjieba.Jieba | None = None
        self._lock = threading.Lock()
        self._pending_paths = [Path(p) for p in user_dict_paths]
        self._pending_words: list[str] = []
        self.hmm = hmm
        self.names: frozenset[str] = frozenset()
        self._longest_name = 0
        self._views: Bounded[frozenset[str], Tokenizer] = Bounded(VIEWS_CACHED)
        self.stopwords: frozenset[str] = (
            default_stopwords() if stopwords is None else frozenset(normalize(w) for w in stopwords)
        )
        self.add_words(words)

    def _engine(self) -> rjieba.Jieba:
        if self._jieba is not None:
            return self._jieba
        with self._lock:
            if self._jieba is None:
                tk = rjieba.Jieba()
                # Input is lowercased before cutting, so jieba's few mixed-case words (T恤, B超)
                # need lowercase twins to stay whole.
                for word, freq in _mixed_case_words():
                    tk.add_word(word.lower(), freq, None)
                for path in self._pending_paths:
                    for word, count, tag in _read_user_dict(path):
                        tk.add_word(word, count, tag)
                for word in self._pending_words:
                    tk.add_word(word, None, None)
                self._pending_paths.clear()
                self._pending_words.clear()
                self._jieba = tk
        return self._jieba

    def add_words(self, words: Iterable[str]) -> None:
        """Make words single tokens from now on, for every text this process cuts: the
        operator's domain terms (``KEMEM_USER_DICT``), never a tenant's names (``scoped``)."""
        clean = [normalize(w).strip() for w in words]
        clean = [w for w in clean if dictionary_word(w)]
        with self._lock:
            if self._jieba is None:
                self._pending_words.extend(clean)
                return
            for word in clean:
                self._jieba.add_word(word, None, None)

    def scoped(self, names: Iterable[str]) -> Tokenizer:
        """A view that keeps one scope's ``names`` whole (normalised; 2–12 characters, no
        spaces); the same object when there are none. Cheap: the jieba engine is shared."""
        key = names if isinstance(names, frozenset) else frozenset(names)
        view = self._views.peek(key)  # several a query (the oldest built goes first)
        if view is not None:
            return view
        kept = _kept_names(key)
        if kept == self.names:
            return self
        self._engine()  # loaded once, shared by every view
        view = copy.copy(self)
        view.names = kept
        view._longest_name = max(map(len, kept), default=0)
        view._views = Bounded(VIEWS_CACHED)
        self._views.put(key, view)  # a scope's names are one object while cached (store/names)
        return view

    def load_user_dict(self, path: str | Path) -> None:
        """Add a jieba-format user dictionary file (``word [freq] [pos]`` per line)."""
        entries = _read_user_dict(Path(path))
        with self._lock:
            if self._jieba is None:
                self._pending_paths.append(Path(path))
                return
            for word, freq, tag in entries:
                self._jieba.add_word(word, freq, tag)

    def tokenize_spans(self, text: str) -> tuple[str, list[tuple[str, int, int]]]:
        """The normalised text and its kept tokens with [start, end) offsets into it."""
        norm = normalize(text)
        spans: list[tuple[str, int, int]] = []
        pos = 0
        engine = self._engine()
        with self._lock:
            pieces = engine.cut(norm, self.hmm)
        for piece in pieces:
            end = pos + len(piece)
            token = piece.strip()
            if token and _WORDY.search(token):
                spans.append((stem(token), pos, end))
            pos = end
        if self.names:
            spans = _join_names(norm, spans, self.names, self._longest_name)
        return norm, spans

    def subwords(self, token: str) -> list[str]:
        """jieba search mode's pieces of a Han token: its dictionary words of two and three
        characters (吃火锅 → 火锅; 北京大学 → 北京, 大学), the token itself excluded."""
        if len(token) < 3 or not _HAN.match(token):
            return []
        engine = self._engine()
        out: list[str] = []
        with self._lock:
            for n in (2, 3):
                if len(token) <= n:
                    continue
                for i in range(len(token) - n + 1):
                    piece = token[i : i + n]
                    if piece not in out and engine.has_word(piece):
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

    def index_texts(self, texts: Sequence[str]) -> list[str]:
        """``index_text`` of each text, from one cut of them all (a record's keywords: one call
        instead of one per keyword). The texts are joined by line breaks, which jieba never
        cuts across and keyword values cannot hold, so each gets exactly its own tokens."""
        if len(texts) < 2 or any("\n" in t for t in texts):
            return [self.index_text(t) for t in texts]
        norm, spans = self.tokenize_spans("\n".join(texts))
        ends = [m.start() for m in re.finditer("\n", norm)] + [len(norm)]
        parts: list[list[str]] = [[] for _ in texts]
        i = 0
        for token, start, _ in spans:
            while start > ends[i]:
                i += 1
            parts[i].append(token)
        return [" ".join(p + [s for t in p for s in self.subwords(t)]) for p in parts]

    def is_stopword(self, word: str) -> bool:
        return word in self.stopwords


def _read_user_dict(path: Path) -> list[tuple[str, int | None, str | None]]:
    """Parse ``word [freq] [pos]`` lines; a missing freq lets jieba pick one that keeps it whole.
    Plain latin words (emo, yyds) are left out: jieba keeps them whole anyway."""
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
            if dictionary_word(parts[0]):
                entries.append((parts[0], freq, tag))
    return entries


@lru_cache(maxsize=1)
def default_tokenizer() -> Tokenizer:
    """Process-wide tokenizer with the shipped user dictionary and stop words."""
    return Tokenizer(user_dict_paths=[USER_DICT_PATH])
