"""Weighted keyword clauses: base words above expansions, expansions by level, keywords above text.

Every word reaches the engine as a query value (term / match_phrase), never as script source.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    tokens: tuple[str, ...] | None = None  # as the index tokenised it; None: the word itself

    @property
    def toks(self) -> tuple[str, ...]:
        return self.tokens if self.tokens is not None else (self.word.lower(),)

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
        return {"term": {field: {"value": tokens[0], "boost": boost}}}
    return {"match_phrase": {field: {"query": " ".join(tokens), "boost": boost}}}


def keyword_clauses(words: Sequence[SearchWord], fields: dict[str, float]) -> list[dict[str, Any]]:
    """Should-clauses, boost = word weight × field weight.

    Base words get one BM25-scored clause per field. Expansions (up to ~100 words) are grouped
    by level into one ``terms`` query per (field, level): a constant score per group, which keeps
    the request small and the engine fast; they weigh by association level as SPEC §2 asks.
    """
    clauses: list[dict[str, Any]] = []
    groups: dict[tuple[str, float], list[str]] = {}
    for w in words:
        tokens = w.toks
        for field, field_weight in fields.items():
            if w.single_char and field not in KEYWORD_ONLY_FIELDS:
                continue
            if w.level is not None and field in EXPANSION_SKIP_FIELDS:
                continue
            boost = round(w.boost * field_weight, 4)
            groupable = field in EXACT_FIELDS or len(tokens) == 1
            if w.level is not None and groupable:
                value = w.word if field in EXACT_FIELDS else tokens[0]
                groups.setdefault((field, boost), []).append(value)
                continue
            clause = word_clause(field, w, tokens, boost)
            if clause is not None:
                clauses.append(clause)
    for (field, boost), values in groups.items():
        clauses.append({"terms": {field: sorted(set(values)), "boost": boost}})
    return clauses


def matched_words(
    source: dict[str, Any], words: Sequence[SearchWord], fields: Sequence[str]
) -> list[str]:
    """Which search words a hit matched, read off its stored tokens (what the engine matched
    on), in search-word order: base words first, then expansions by strength."""
    exact = {str(source.get(f) or "") for f in fields if f in EXACT_FIELDS}
    tokenised = {f: str(source.get(f) or "").split() for f in fields if f not in EXACT_FIELDS}
    out = []
    for w in words:
        toks = list(w.toks)
        searchable = [
            seq
            for f, seq in tokenised.items()
            if not (w.single_char and f not in KEYWORD_ONLY_FIELDS)
        ]
        if w.word in exact or (toks and any(_contains(seq, toks) for seq in searchable)):
            out.append(w.word)
    return out


def _contains(seq: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(seq[i : i + n] == part for i in range(len(seq) - n + 1))
