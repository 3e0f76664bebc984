"""Build an association lexicon from word vectors, optionally adding corpus co-occurrence (PMI).

Vector neighbours give paradigmatic associations (红色 → 黄色, 大红色); co-occurrence in the
operator's own memories gives syntagmatic ones (红色 → 喜庆) — the two are merged, a pair found
by both keeping its higher level.

Level mapping (documented because search weights depend on it):
- vectors: cosine similarities of all kept neighbour pairs are cut at their 1/7 … 6/7
  quantiles, so each level 1–7 holds about one seventh of the pairs and level 7 is the
  strongest seventh; pairs below ``min_sim`` are dropped. The cut points are stored in ``meta``.
- PMI: normalised PMI in (0, 1] maps to ``ceil(7 · npmi)`` clipped to 1–7.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jieba
import numpy as np

from kemem_es.expand.lexicon import Assoc, Lexicon
from kemem_es.text.stopwords import default_stopwords
from kemem_es.text.tokenizer import USER_DICT_PATH, Tokenizer, default_tokenizer

LEVELS = 7
_HAN = re.compile(r"^[\u4e00-\u9fff]+$")
# jieba POS tags never worth associating: person names, numerals, function words, pronouns,
# adverbs, measure words, bound morphemes, organisation names.
EXCLUDED_POS = frozenset(
    {"nr", "nrt", "nrfg", "m", "mq", "x", "u", "uj", "ul", "ud", "ug", "uz", "uv", "p", "c",
     "e", "y", "o", "k", "f", "r", "rr", "rz", "rg", "q", "g", "zg", "ng", "vg", "ag", "tg",
     "dg", "mg", "nt", "d", "df", "h", "yg"}
)  # fmt: skip


@dataclass
class BuildConfig:
    """Knobs of the vector build; the defaults produced the shipped lexicon."""

    neighbours: int = 25
    min_sim: float = 0.5
    min_freq: int = 10  # jieba dictionary frequency: rarer words are mostly wiki debris
    single_char_min_freq: int = 1000  # only common characters (猫, 茶, 雨) get a list
    max_len: int = 6
    excluded_pos: frozenset[str] = field(default_factory=lambda: EXCLUDED_POS)
    block: int = 2048
    # PMI
    pmi_min_count: int = 3
    pmi_min_npmi: float = 0.2
    pmi_per_word: int = 15


def jieba_dictionary() -> dict[str, tuple[int, str]]:
    """word → (frequency, POS) from jieba's main dictionary."""
    path = Path(jieba.__file__).resolve().parent / "dict.txt"
    out: dict[str, tuple[int, str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                out[parts[0]] = (int(parts[1]), parts[2] if len(parts) > 2 else "")
    return out


def user_dictionary_words(paths: Iterable[str | Path] = (USER_DICT_PATH,)) -> set[str]:
    words: set[str] = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            words.update(p.split()[0] for p in f if p.strip() and not p.startswith("#"))
    return words


def load_vectors(path: str | Path) -> tuple[list[str], np.ndarray]:
    """(words, float32 vectors) from an npz with ``words`` and ``vectors`` arrays."""
    with np.load(path, allow_pickle=False) as z:
        words = [w.strip() for w in z["words"].tolist()]
        vectors = z["vectors"].astype(np.float32)
    if len(words) != len(vectors):
        raise ValueError(f"{path}: {len(words)} words but {len(vectors)} vectors")
    return words, vectors


def shared_vector_mask(vectors: np.ndarray) -> np.ndarray:
    """Rows whose vector is identical to another row's: the source file gives ~39k words it had
    no embedding for one common placeholder vector, which would make them all each other's
    nearest neighbours (下周 → 慰问组, 阿囡, 近世)."""
    rows = np.ascontiguousarray(vectors).view(
        np.dtype((np.void, vectors.dtype.itemsize * vectors.shape[1]))
    )
    _, inverse, counts = np.unique(rows.ravel(), return_inverse=True, return_counts=True)
    return counts[inverse.ravel()] > 1


def select_vocabulary(
    words: list[str],
    dictionary: dict[str, tuple[int, str]],
    extra_words: set[str],
    stopwords: frozenset[str],
    cfg: BuildConfig,
    placeholder: np.ndarray | None = None,
) -> list[int]:
    """Row indices of useful words: pure Han, short, known to the tokenizer (jieba's dictionary
    with enough frequency and a content POS, or the shipped user dictionary), not stop words,
    and with a real vector (``placeholder`` marks rows that share one)."""
    keep: list[int] = []
    seen: set[str] = set()
    for i, w in enumerate(words):
        if w in seen or w in stopwords or not _HAN.match(w) or len(w) > cfg.max_len:
            continue
        if placeholder is not None and placeholder[i]:
            continue
        if w in extra_words:
            ok = True
        elif w in dictionary:
            freq, pos = dictionary[w]
            min_freq = cfg.single_char_min_freq if len(w) == 1 else cfg.min_freq
            ok = freq >= min_freq and pos not in cfg.excluded_pos
        else:
            ok = False
        if ok:
            seen.add(w)
            keep.append(i)
    return keep


def nearest_neighbours(
    vectors: np.ndarray, k: int, candidate_mask: np.ndarray, block: int = 2048
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k cosine neighbours of every row among the rows in ``candidate_mask`` (self
    excluded), by blocked matrix products so memory stays at block × n floats."""
    x = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    n = len(x)
    k = min(k, int(candidate_mask.sum()) - 1)
    idx = np.empty((n, k), dtype=np.int32)
    sims = np.empty((n, k), dtype=np.float32)
    blocked = ~candidate_mask
    for start in range(0, n, block):
        stop = min(start + block, n)
        s = x[start:stop] @ x.T
        s[:, blocked] = -np.inf
        rows = np.arange(stop - start)
        s[rows, rows + start] = -np.inf
        part = np.argpartition(-s, k, axis=1)[:, :k]
        ps = np.take_along_axis(s, part, axis=1)
        # Stable order: similarity descending, then vocabulary index (deterministic ties).
        order = np.lexsort((part, -ps), axis=1)
        idx[start:stop] = np.take_along_axis(part, order, axis=1)
        sims[start:stop] = np.take_along_axis(ps, order, axis=1)
    return idx, sims


def quantile_levels(sims: np.ndarray, levels: int = LEVELS) -> tuple[np.ndarray, list[float]]:
    """Map similarities to 1..levels by their own quantiles; returns (levels, cut points)."""
    cuts = np.quantile(sims, np.arange(1, levels) / levels).astype(np.float64)
    return (np.searchsorted(cuts, sims, side="right") + 1).astype(np.uint8), cuts.tolist()


def build_from_vectors(
    vectors_path: str | Path,
    cfg: BuildConfig | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Lexicon:
    cfg = cfg or BuildConfig()
    t0 = time.perf_counter()
    words, vectors = load_vectors(vectors_path)
    placeholder = shared_vector_mask(vectors)
    keep = select_vocabulary(
        words, jieba_dictionary(), user_dictionary_words(), default_stopwords(), cfg, placeholder
    )
    vocab = [words[i] for i in keep]
    log(f"vocabulary: {len(vocab)} of {len(words)} words ({time.perf_counter() - t0:.1f}s)")
    # One-character words get lists but are never proposed: they match too much.
    multi = np.array([len(w) > 1 for w in vocab])
    idx, sims = nearest_neighbours(vectors[keep], cfg.neighbours, multi, cfg.block)
    log(f"neighbours: {idx.shape} ({time.perf_counter() - t0:.1f}s)")
    ok = sims >= cfg.min_sim
    lv, cuts = quantile_levels(sims[ok])
    level_grid = np.zeros_like(idx, dtype=np.uint8)
    level_grid[ok] = lv
    mapping: dict[str, list[Assoc]] = {}
    for i, word in enumerate(vocab):
        row = [(vocab[j], int(level_grid[i, c])) for c, j in enumerate(idx[i]) if ok[i, c]]
        if row:
            mapping[word] = row
    meta = {
        "source": "vectors",
        "vectors": Path(vectors_path).name,
        "config": {k: sorted(v) if isinstance(v, frozenset) else v for k, v in asdict(cfg).items()},
        "level_cuts": [round(c, 4) for c in cuts],
        "words": len(mapping),
    }
    log(f"lexicon: {len(mapping)} words ({time.perf_counter() - t0:.1f}s)")
    return Lexicon.from_mapping(mapping, meta)


def build_from_cooccurrence(
    texts: Iterable[str],
    tokenizer: Tokenizer | None = None,
    cfg: BuildConfig | None = None,
) -> Lexicon:
    """Associations from document-level co-occurrence, scored by normalised PMI."""
    try:
        from sklearn.feature_extraction.text import CountVectorizer
    except ImportError as e:
        from kemem_es.text.keywords import SKLEARN_MISSING

        raise ValueError(SKLEARN_MISSING) from e

    cfg = cfg or BuildConfig()
    tok = tokenizer or default_tokenizer()
    stop = tok.stopwords
    pos = {w: p for w, (_, p) in jieba_dictionary().items() if p in cfg.excluded_pos}

    def analyse(text: str) -> list[str]:
        # Same junk rules as the vectors: Han only, no stop words, no names or function words.
        return [
            t
            for t in tok.tokenize(text)
            if len(t) > 1 and t not in stop and t not in pos and _HAN.match(t)
        ]

    docs = list(texts)
    vec = CountVectorizer(analyzer=analyse, binary=True, min_df=cfg.pmi_min_count)
    x = vec.fit_transform(docs).tocsc().astype(np.float64)
    vocab = vec.get_feature_names_out().tolist()
    n_docs = max(len(docs), 1)
    df = np.asarray(x.sum(axis=0)).ravel()
    co = (x.T @ x).tocoo()
    keep = (co.row != co.col) & (co.data >= cfg.pmi_min_count)
    r, c, n_ab = co.row[keep], co.col[keep], co.data[keep]
    p_ab = n_ab / n_docs
    pmi = np.log(p_ab / ((df[r] / n_docs) * (df[c] / n_docs)))
    npmi = np.where(p_ab < 1.0, pmi / -np.log(np.minimum(p_ab, 1 - 1e-12)), 1.0)
    good = npmi >= cfg.pmi_min_npmi
    r, c, npmi = r[good], c[good], npmi[good]
    levels = np.clip(np.ceil(npmi * LEVELS), 1, LEVELS).astype(int)
    # Strongest first per word, ties by score then vocabulary order (deterministic).
    order = np.lexsort((c, -npmi, r))
    mapping: dict[str, list[Assoc]] = {}
    for i in order:
        row = mapping.setdefault(vocab[r[i]], [])
        if len(row) < cfg.pmi_per_word:
            row.append((vocab[c[i]], int(levels[i])))
    meta = {"source": "pmi", "docs": len(docs), "min_count": cfg.pmi_min_count}
    return Lexicon.from_mapping(mapping, meta)


def build_lexicon(
    vectors_path: str | Path,
    corpus_texts: Iterable[str] | None = None,
    extra: Iterable[str | Path] = (),
    cfg: BuildConfig | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Lexicon:
    """Vectors, then PMI merged in (if a corpus is given), then curated TSV files applied."""
    cfg = cfg or BuildConfig()
    lex = build_from_vectors(vectors_path, cfg, log)
    if corpus_texts is not None:
        pmi = build_from_cooccurrence(corpus_texts, cfg=cfg)
        log(f"co-occurrence: {len(pmi)} words")
        lex = lex.merge(pmi, max_per_word=cfg.neighbours + cfg.pmi_per_word)
    for path in extra:
        lex.apply_overrides(path)
        lex.meta.setdefault("extra", []).append(os.path.basename(str(path)))
    return lex
