"""Tokenisation, stop words and TF-IDF base words (docs/SPEC.md §2 steps 1–2)."""

from kemem_es.text.keywords import (
    BaseWord,
    IdfTable,
    base_words_with_tokens,
    default_idf,
    pick_base_words,
    read_jsonl_texts,
)
from kemem_es.text.stopwords import default_stopwords, load_stopwords
from kemem_es.text.tokenizer import Tokenizer, default_tokenizer, normalize

__all__ = [
    "BaseWord",
    "IdfTable",
    "Tokenizer",
    "base_words_with_tokens",
    "default_idf",
    "default_stopwords",
    "default_tokenizer",
    "load_stopwords",
    "normalize",
    "pick_base_words",
    "read_jsonl_texts",
]
