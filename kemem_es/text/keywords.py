"""TF-IDF base words: the query words worth expanding and searching, plus the IDF table."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path

import jieba
from pydantic import BaseModel, ConfigDict

from kemem_es.text.tokenizer import Tokenizer, default_tokenizer, normalize

JIEBA_IDF_PATH = Path(jieba.__file__).resolve().parent / "analyse" / "idf.txt"

# A base word must carry meaning: a Han character or a latin letter (no bare numbers or symbols).
_CONTENT = re.compile(r"[\u3400-\u9fffA-Za-z]")
_ALNUM = re.compile(r"[a-z0-9]")  # normalised (lowercase) latin letters and digits
_LATIN_WORD = re.compile(r"[a-z]+")


class BaseWord(BaseModel):
    """A picked keyword. One-character words are flagged: they are too ambiguous to match
    free-text descriptions and should only be matched against keyword fields."""

    model_config = ConfigDict(frozen=True)

    word: str
    weight: float
    single_char: bool


class IdfTable:
    """Word → inverse document frequency, with a fallback for unseen words.

    The default is jieba's own table (general Chinese); ``from_texts`` fits one on the indexed
    memories so that words common in *this* memory store weigh less.
    """

    def __init__(
        self,
        idf: dict[str, float],
        default: float,
        docs: int | None = None,
        latin_default: float | None = None,
    ) -> None:
        self.idf = idf
        self.default = default
        self.docs = docs
        # An unseen English word is a rare one (a name, a coinage), not a cutting artefact.
        self.latin_default = latin_default

    def get(self, word: str) -> float:
        value = self.idf.get(word)
        if value is not None:
            return value
        if self.latin_default is not None and _LATIN_WORD.fullmatch(word):
            return self.latin_default
        return self.default

    def __len__(self) -> int:
        return len(self.idf)

    @classmethod
    def load(cls, path: str | Path | None = None) -> IdfTable:
        """Read ``word idf`` lines (jieba's format). Unseen words get the median, as in jieba,
        unless a ``# kemem-es idf`` header written by :meth:`save` names the fallback."""
        path = Path(path) if path is not None else JIEBA_IDF_PATH
        idf: dict[str, float] = {}
        default: float | None = None
        docs: int | None = None
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if line.startswith("#"):
                    head = dict(kv.split("=", 1) for kv in line[1:].split() if "=" in kv)
                    default = float(head["default"]) if "default" in head else default
                    docs = int(head["docs"]) if "docs" in head else docs
                    continue
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 2:
                    raise ValueError(f"{path}:{n}: expected 'word idf', got {line.strip()!r}")
                idf[parts[0]] = float(parts[1])
        if default is None:
            default = statistics.median(idf.values()) if idf else 1.0
        return cls(idf, default, docs)

    @classmethod
    def from_texts(
        cls, texts: Iterable[str], tokenizer: Tokenizer | None = None, min_df: int = 1
    ) -> IdfTable:
        """Fit smoothed IDF (scikit-learn: ln((1+N)/(1+df)) + 1) on a corpus; unseen words get
        the df=0 value, i.e. they count as rarer than anything in the corpus."""
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
        except ImportError as e:
            raise ValueError(SKLEARN_MISSING) from e

        tok = tokenizer or default_tokenizer()
        docs = list(texts)
        if not docs:
            raise ValueError("cannot fit an IDF table on an empty corpus")
        vec = TfidfVectorizer(analyzer=tok.tokenize, min_df=min_df, smooth_idf=True, norm=None)
        vec.fit(docs)
        vocab = vec.get_feature_names_out()
        idf = dict(zip(vocab.tolist(), vec.idf_.tolist(), strict=True))
        return cls(idf, math.log(len(docs) + 1) + 1.0, len(docs))

    def save(self, path: str | Path) -> None:
        """jieba-compatible lines after a header carrying the unseen-word fallback."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"# kemem-es idf docs={self.docs or 0} default={self.default:.6f}\n")
            for word, value in sorted(self.idf.items(), key=lambda kv: (-kv[1], kv[0])):
                f.write(f"{word} {value:.6f}\n")


SKLEARN_MISSING = (
    "scikit-learn is not installed (only lexicon builds use it): pip install 'kemem-es[build]'"
)


@lru_cache(maxsize=1)
def default_idf() -> IdfTable:
    """jieba's general-Chinese IDF table plus the shipped English one (text/english_idf.py;
    jieba has no latin words), read once per process (~0.2 s)."""
    from kemem_es.text.english_idf import LATIN_DEFAULT, english_idf

    zh = IdfTable.load()
    english = english_idf()
    if not english:
        return zh
    return IdfTable({**english, **zh.idf}, zh.default, zh.docs, LATIN_DEFAULT)


def read_jsonl_texts(path: str | Path, field: str = "text") -> Iterator[str]:
    """Texts from a JSONL file (``.gz`` allowed); a bad line is reported by its number."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not valid JSON ({e.msg})") from e
            value = record.get(field) if isinstance(record, dict) else None
            if not isinstance(value, str):
                raise ValueError(f"{path}:{n}: field {field!r} missing or not a string")
            yield value


def _name_mask(norm: str, names: Iterable[str]) -> list[bool] | None:
    """Characters of ``norm`` covered by a name, so a name jieba splits (木/木) is still dropped.
    A name's latin or digit edge must meet a word boundary: Ann is not in annoyed, nor Jo in
    enjoy."""
    mask: list[bool] | None = None
    for name in names:
        if len(name) < 2:
            continue
        start = norm.find(name)
        while start != -1:
            end = start + len(name)
            if not (_cuts_run(norm, start - 1, start) or _cuts_run(norm, end - 1, end)):
                if mask is None:
                    mask = [False] * len(norm)
                mask[start:end] = [True] * len(name)
            start = norm.find(name, start + 1)
    return mask


def _cuts_run(text: str, left: int, right: int) -> bool:
    """Whether a boundary between ``left`` and ``right`` would split a latin/digit word."""
    return (
        left >= 0
        and right < len(text)
        and _ALNUM.match(text[left]) is not None
        and _ALNUM.match(text[right]) is not None
    )


def base_words_with_tokens(
    text: str,
    top_k: int = 10,
    exclude: Iterable[str] = (),
    tokenizer: Tokenizer | None = None,
    idf: IdfTable | None = None,
) -> tuple[list[BaseWord], list[str]]:
    """Base words and all tokens of ``text`` from one jieba pass (the expander needs both)."""
    tok = tokenizer or default_tokenizer()
    table = idf if idf is not None else default_idf()
    names = {normalize(n).strip() for n in exclude} - {""}
    norm, spans = tok.tokenize_spans(text)
    tokens = [t for t, _, _ in spans]
    if top_k <= 0 or not tokens:
        return [], tokens
    mask = _name_mask(norm, names)
    counts: dict[str, int] = {}
    for token, start, end in spans:
        if token in names or token in tok.stopwords or not _CONTENT.search(token):
            continue
        if mask is not None and any(mask[start:end]):
            continue
        counts[token] = counts.get(token, 0) + 1
    total = len(tokens)
    # dicts keep first-seen order, and sorted() is stable: equal weights stay in text order.
    scored = sorted(counts.items(), key=lambda kv: -kv[1] * table.get(kv[0]))
    picked = [
        BaseWord(word=w, weight=c / total * table.get(w), single_char=len(w) == 1)
        for w, c in scored[:top_k]
    ]
    return picked, tokens


def pick_base_words(
    text: str,
    top_k: int = 10,
    exclude: Iterable[str] = (),
    tokenizer: Tokenizer | None = None,
    idf: IdfTable | None = None,
) -> list[BaseWord]:
    """Top-k words by TF-IDF, strongest first; stop words, names in ``exclude`` (also when
    jieba splits them) and tokens without a Han or latin letter are dropped."""
    return base_words_with_tokens(text, top_k, exclude, tokenizer, idf)[0]
