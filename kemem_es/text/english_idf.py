"""English word weights on jieba's IDF scale, so English and mixed text get real TF-IDF.

jieba's IDF table has no latin words: every English word fell back to the same median value,
so the "top" words of an English text were simply its first content words (``final`` weighed
as much as ``sourdough``) — in the query's keyword shares and in keywords picked for memories.

The shipped table (``lexicon/idf_en.txt.gz``) maps each Snowball stem (the tokens the index and
the query both use) to ``−ln p(stem) − OFFSET``, where p(stem) sums the unigram probabilities of
the English words with that stem. Unigram surprisal tracks document IDF; OFFSET (2.3) is the
median gap between the two on 26 everyday words and their Chinese translations in jieba's table
(dog/狗 8.7 vs 7.0, birthday/生日 10.3 vs 8.1, ...), so an English word weighs about what its
Chinese counterpart does. Stems rarer than ``MAX_SURPRISAL`` are left out; an English word not
in the table (a name, a coinage) counts as that rare: ``LATIN_DEFAULT``.

Raw material: ``en_lexeme_prob`` of spacy-lookups-data (MIT licence, ExplosionAI GmbH), read at
build time only (``pip install kemem-es[build]``; ``kemem-es lexicon idf-en``)."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from kemem_es.text.shipped import LEXICON_DIR
from kemem_es.text.stemming import stem

ENGLISH_IDF_PATH = LEXICON_DIR / "idf_en.txt.gz"
OFFSET = 2.3
MAX_SURPRISAL = 16.0
LATIN_DEFAULT = MAX_SURPRISAL - OFFSET  # rarer than any listed stem
_WORD = re.compile(r"[a-z]+")


def from_probabilities(
    log_probs: Mapping[str, float], max_surprisal: float = MAX_SURPRISAL, offset: float = OFFSET
) -> dict[str, float]:
    """stem → IDF from word → natural-log unigram probability (lowercase latin words only)."""
    mass: dict[str, float] = {}
    for word, lp in log_probs.items():
        if _WORD.fullmatch(word):
            s = stem(word)
            mass[s] = mass.get(s, 0.0) + math.exp(lp)
    out = {}
    for s, p in mass.items():
        surprisal = -math.log(p)
        if surprisal <= max_surprisal:
            out[s] = round(max(surprisal - offset, 0.5), 3)
    return out


def spacy_lookups_source() -> Path:
    """The probability table inside the installed spacy-lookups-data (the ``[build]`` extra)."""
    try:
        import spacy_lookups_data
    except ImportError as e:
        raise ValueError(
            "spacy-lookups-data is not installed: pip install 'kemem-es[build]'"
        ) from e
    return Path(spacy_lookups_data.__file__).resolve().parent / "data" / "en_lexeme_prob.json.gz"


def build(source: Path, output: Path = ENGLISH_IDF_PATH) -> int:
    """Write the table (``stem idf`` lines, gzip) from a word → log-probability JSON(.gz)."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as f:
        table = from_probabilities(json.load(f))
    output.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(output, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write(f"# kemem-es english idf offset={OFFSET} max_surprisal={MAX_SURPRISAL}\n")
        for word, value in sorted(table.items()):
            f.write(f"{word} {value}\n")
    return len(table)


@lru_cache(maxsize=1)
def english_idf() -> dict[str, float]:
    """The shipped table, read once per process (empty if the package was built without it)."""
    if not ENGLISH_IDF_PATH.exists():
        return {}
    out = {}
    with gzip.open(ENGLISH_IDF_PATH, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#") and line.strip():
                word, value = line.split()
                out[word] = float(value)
    return out
