"""Weighted keyword clauses: base words above expansions, expansions by level, keywords above text.

Every word reaches the engine as a query value (term / match_phrase), never as script source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

BASE_BOOST = 1.0
EXPANSION_MAX_BOOST = 0.5  # the strongest association still weighs half a base word
MAX_LEVEL = 7


@dataclass(frozen=True)
class SearchWord:
    """A word to search: a base word (level None) or an expansion with its association level."""

    word: str
    level: int | None = None
    single_char: bool = False

    @property
    def boost(self) -> float:
        if self.level is None:
            return BASE_BOOST
        return EXPANSION_MAX_BOOST * min(max(self.level, 1), MAX_LEVEL) / MAX_LEVEL


# field → weight, for events; single-character words only match the keyword fields.
EVENT_FIELDS: dict[str, float] = {
    "keywords": 2.0,
    "keywords_tok": 1.5,
    "description_tok": 1.0,
    "deepinsight_tok": 0.4,
}
# Expansions only probe the tokenised fields: half the clauses, the same candidates.
EXPANSION_SKIP_FIELDS = {"keywords", "deepinsight_tok"}
KEYWORD_ONLY_FIELDS = {
    "keywords",
    "keywords_tok",
    "keyword",
    "keyword_tok",
    "entity_name",
    "entity_name_tok",
}
EXACT_FIELDS = {"keywords", "keyword", "entity_name"}  # keyword-typed: whole-value match


def word_clause(
    field: str, word: SearchWord, tokens: Sequence[str], boost: float
) -> dict[str, Any] | None:
    """One word on one field: term for exact fields and one-token words, else a phrase."""
    if field in EXACT_FIELDS:
        return {"term": {field: {"value": word.word, "boost": boost}}}
    if not tokens:
        return None
    if len(tokens) == 1:
        return {"term": {field: {"value": tokens[0].lower(), "boost": boost}}}
    return {"match_phrase": {field: {"query": " ".join(tokens), "boost": boost}}}


def keyword_clauses(
    words: Sequence[SearchWord],
    fields: dict[str, float],
    tokenize: Callable[[str], list[str]],
    named: bool = False,
) -> list[dict[str, Any]]:
    """Should-clauses for all words on all fields, with boost = word weight × field weight.

    ``named``: each word's field clauses are wrapped in one bool named after the word, so a hit's
    ``matched_queries`` lists the words it matched (a name must be unique per request)."""
    clauses = []
    for w in words:
        tokens = tokenize(w.word)
        per_word = []
        for field, field_weight in fields.items():
            if w.single_char and field not in KEYWORD_ONLY_FIELDS:
                continue
            if w.level is not None and field in EXPANSION_SKIP_FIELDS:
                continue
            clause = word_clause(field, w, tokens, round(w.boost * field_weight, 4))
            if clause is not None:
                per_word.append(clause)
        if named and per_word:
            clauses.append({"bool": {"should": per_word, "_name": w.word}})
        else:
            clauses.extend(per_word)
    return clauses
