"""The association lexicon (联想词库): word → associated words with integer levels.

Stored as compressed sparse rows in one ``.npz`` so the shipped ~50k-word lexicon loads in tens
of milliseconds: ``vocab`` (UTF-8, newline-joined, as uint8), ``offsets`` (int32, one row per
vocab word + 1), ``targets`` (int32 vocab ids) and ``levels`` (uint8), each row strongest first,
plus ``meta`` (JSON: how it was built).

Override files are TSV, ``word<TAB>assoc<TAB>level`` per line (``#`` comments allowed):
a level ≥ 1 adds the association or changes its level; a level ≤ 0 removes it; ``assoc`` ``*``
with a level ≤ 0 clears the word's whole list (later lines may then add new entries).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np

from kemem_es.text.shipped import LEXICON_DIR
from kemem_es.text.tokenizer import normalize

DEFAULT_LEXICON_PATH = LEXICON_DIR / "associations.npz"

Assoc = tuple[str, int]


def _sort_strongest_first(pairs: Iterable[Assoc]) -> list[Assoc]:
    """Level descending; sorted() is stable, so equal levels keep their given order."""
    return sorted(pairs, key=lambda p: -p[1])


class Lexicon:
    """Read-only association lookups with an in-memory overlay for user overrides."""

    def __init__(
        self,
        vocab: list[str],
        offsets: np.ndarray,
        targets: np.ndarray,
        levels: np.ndarray,
        meta: dict | None = None,
    ) -> None:
        if len(offsets) != len(vocab) + 1 or len(targets) != len(levels):
            raise ValueError("inconsistent lexicon arrays")
        self.vocab = vocab
        self.meta = meta or {}
        self._index = {w: i for i, w in enumerate(vocab)}
        self._offsets = offsets.astype(np.int64, copy=False)
        self._targets = targets
        self._levels = levels
        self._overlay: dict[str, list[Assoc]] = {}

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Iterable[Assoc]], meta: dict | None = None):
        """Build from ``{word: [(assoc, level), ...]}``; each list is re-sorted strongest first
        and repeated associations keep their highest level."""
        index: dict[str, int] = {}
        rows: list[list[Assoc]] = []
        for word, pairs in mapping.items():
            best: dict[str, int] = {}
            for assoc, level in pairs:
                if assoc != word and int(level) > 0:
                    best[assoc] = max(int(level), best.get(assoc, 0))
            index.setdefault(word, len(index))
            rows.append(_sort_strongest_first(best.items()))
        words = list(mapping)
        for row in rows:
            for assoc, _ in row:
                index.setdefault(assoc, len(index))
        vocab = list(index)
        counts = np.zeros(len(vocab), dtype=np.int64)
        counts[[index[w] for w in words]] = [len(r) for r in rows]
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        flat = [p for r in rows for p in r]
        targets = np.fromiter((index[a] for a, _ in flat), dtype=np.int32, count=len(flat))
        levels = np.fromiter((lv for _, lv in flat), dtype=np.int64, count=len(flat))
        if len(levels) and levels.max() > 255:
            raise ValueError("association levels must fit in 1..255")
        return cls(vocab, offsets, targets, levels.astype(np.uint8), meta)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str | Path] = ()) -> Lexicon:
        """Load a built lexicon (``None``: the shipped default), then apply override files."""
        path = Path(path) if path is not None else DEFAULT_LEXICON_PATH
        with np.load(path, allow_pickle=False) as z:
            vocab = z["vocab"].tobytes().decode("utf-8").split("\n")
            meta = json.loads(z["meta"].tobytes().decode("utf-8")) if "meta" in z.files else {}
            lex = cls(vocab, z["offsets"], z["targets"], z["levels"], meta)
        for override in overrides:
            lex.apply_overrides(override)
        return lex

    def save(self, path: str | Path) -> None:
        """Write the compact form, overrides folded in."""
        lex = self._folded() if self._overlay else self
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        as_bytes = lambda s: np.frombuffer(s.encode("utf-8"), dtype=np.uint8)  # noqa: E731
        with open(path, "wb") as f:
            np.savez_compressed(
                f,
                vocab=as_bytes("\n".join(lex.vocab)),
                offsets=lex._offsets.astype(np.int32),
                targets=lex._targets.astype(np.int32),
                levels=lex._levels.astype(np.uint8),
                meta=as_bytes(json.dumps(lex.meta, ensure_ascii=False, sort_keys=True)),
            )

    def _folded(self) -> Lexicon:
        return Lexicon.from_mapping(dict(self.items()), self.meta)

    # ---- lookups ------------------------------------------------------------------------
    def get(self, word: str) -> list[Assoc]:
        """Associations of ``word``, strongest first (ties in build order); [] if unknown."""
        over = self._overlay.get(word)
        if over is not None:
            return list(over)
        i = self._index.get(word)
        if i is None:
            return []
        s, e = self._offsets[i], self._offsets[i + 1]
        vocab = self.vocab
        return [
            (vocab[t], lv)
            for t, lv in zip(self._targets[s:e].tolist(), self._levels[s:e].tolist(), strict=True)
        ]

    def __contains__(self, word: object) -> bool:
        return bool(self.get(word)) if isinstance(word, str) else False

    def words(self) -> Iterator[str]:
        """Words that have at least one association."""
        for word in self.vocab:
            if word not in self._overlay and self._row_len(word):
                yield word
        yield from (w for w, pairs in self._overlay.items() if pairs)

    def items(self) -> Iterator[tuple[str, list[Assoc]]]:
        for word in self.words():
            yield word, self.get(word)

    def __len__(self) -> int:
        return sum(1 for _ in self.words())

    def _row_len(self, word: str) -> int:
        i = self._index.get(word)
        return 0 if i is None else int(self._offsets[i + 1] - self._offsets[i])

    # ---- editing ------------------------------------------------------------------------
    def set(self, word: str, assoc: str, level: int) -> None:
        """Add or re-level one association; a level ≤ 0 removes it (``*`` removes all)."""
        self.edit(word, [(assoc, level)])

    def edit(self, word: str, ops: Iterable[Assoc]) -> None:
        """Apply ``(assoc, level)`` edits to one word in order. Entries set here rank ahead of
        stored ones of the same level (an operator's explicit choice beats a computed one)."""
        kept = self.get(word)
        explicit: dict[str, int] = {}
        for assoc, level in ops:
            if assoc == "*":
                if level > 0:
                    raise ValueError("'*' can only clear a word (level ≤ 0)")
                kept, explicit = [], {}
                continue
            kept = [p for p in kept if p[0] != assoc]
            explicit.pop(assoc, None)
            if level > 0 and assoc != word:
                explicit[assoc] = level
        self._overlay[word] = _sort_strongest_first([*explicit.items(), *kept])

    def apply_overrides(self, path: str | Path) -> None:
        """Apply a TSV override file (see the module docstring for its rules)."""
        grouped: dict[str, list[Assoc]] = {}
        for n, word, assoc, level in _read_tsv(Path(path)):
            if assoc == "*" and level > 0:
                raise ValueError(f"{path}:{n}: '*' can only clear a word (level ≤ 0)")
            grouped.setdefault(word, []).append((assoc, level))
        for word, ops in grouped.items():
            self.edit(word, ops)

    def merge(self, other: Lexicon, max_per_word: int | None = None) -> Lexicon:
        """Union of two lexicons; a pair in both keeps the higher level, ties keep ``self``'s
        order first. Used to fold co-occurrence associations into vector neighbours."""
        merged: dict[str, list[Assoc]] = {w: p for w, p in self.items()}
        for word, pairs in other.items():
            best = dict(merged.get(word, []))
            for assoc, level in pairs:
                best[assoc] = max(level, best.get(assoc, 0))
            merged[word] = _sort_strongest_first(best.items())
        if max_per_word is not None:
            merged = {w: p[:max_per_word] for w, p in merged.items()}
        return Lexicon.from_mapping(merged, {**self.meta, "merged": other.meta})


def _read_tsv(path: Path) -> Iterator[tuple[int, str, str, int]]:
    """(line number, word, assoc, level); words normalised like tokens (NFKC, lowercase)."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = [p.strip() for p in line.split("\t")]
            if len(parts) != 3 or not parts[0] or not parts[1]:
                raise ValueError(f"{path}:{n}: expected 'word<TAB>assoc<TAB>level'")
            try:
                level = int(parts[2])
            except ValueError:
                raise ValueError(
                    f"{path}:{n}: level must be an integer, got {parts[2]!r}"
                ) from None
            yield n, normalize(parts[0]), normalize(parts[1]), level


@lru_cache(maxsize=1)
def default_lexicon() -> Lexicon:
    """The shipped lexicon, loaded once per process."""
    return Lexicon.load()
