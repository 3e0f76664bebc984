"""Where the package's own word lists and tables live (``kemem_es/lexicon/``): stop words,
jieba's user dictionary, English irregular forms and IDF, the association lexicon."""

from __future__ import annotations

from pathlib import Path

LEXICON_DIR = Path(__file__).resolve().parent.parent / "lexicon"
