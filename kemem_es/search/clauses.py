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
SUBWORD_FACTOR = 0.7  # 火锅 found inside 吃火锅 (or the other way round) counts 70 %
# Coverage (fusion's keyword term): how much a field's match counts of a word's share.
COVERAGE_FIELDS: dict[str, float] = {
    "keywords": 1.0,
    "keywords_tok": 1.0,
    "description_tok": 0.9,
    "deepinsight_tok": 0.4,
}
EXPANSION_SHARE = 0.2  # expansions alone reach at most this much coverage
# Proximity: pairs among the utterance's strongest words, probed in the memory's own text.
PROXIMITY_WORDS = 6  # 15 pairs (10 words measured a little better, at 45 clauses)
PROXIMITY_GAPS = 10  # at most this many tokens between the two words of a pair
PROXIMITY_FIELD = "description_tok"


@dataclass(frozen=True)
class SearchWord:
    """A word to search: a base word (level None) or an expansion with its association level."""

    word: str
    level: int | None = None
    single_char: bool = False
    tokens: tuple[str, ...] | None = None  # as the index tokenised it; None: the word itself
    weight: float = 1.0  # share of the query's keyword evidence (TF-IDF × turn weight)
    subwords: tuple[str, ...] = ()  # jieba search-mode pieces (吃火锅 → 火锅)
    context: bool = False  # from an earlier turn or a bridge, not the utterance's own words
    earlier: bool = False  # from an earlier turn (context too): scores, but picks no window

    @property
    def toks(self) -> tuple[str, ...]:
        return self.tokens if self.tokens is not None else (self.word.lower(),)

    @property
    def weighted(self) -> bool:
        """Counts towards keyword coverage: a base word of the utterance or of the context."""
        return self.level is None or self.context

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
    the request small and the engine fast; they weigh by association level as docs/SPEC.md §2 asks.
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
            if w.subwords and field not in EXACT_FIELDS and not w.single_char:
                sub_boost = round(boost * SUBWORD_FACTOR, 4)
                clauses.append({"terms": {field: list(w.subwords), "boost": sub_boost}})
    for (field, boost), values in groups.items():
        clauses.append({"terms": {field: sorted(set(values)), "boost": boost}})
    return clauses


def match_clauses(words: Sequence[SearchWord], fields: Sequence[str]) -> list[dict[str, Any]]:
    """The unscored twin of ``keyword_clauses``: clauses that match exactly the documents
    its clauses match (same words on the same fields: whole values, one-token words, phrases,
    sub-words), for a filter context, where boosts count for nothing. One ``terms`` query per
    field holds every whole-value and one-token word and sub-word, so a candidate filter is a
    few clauses, not one per word and field (the entity search's ~3 × 80: a third of the
    client's time building its bodies, and request bytes for the engine to parse)."""
    values: dict[str, set[str]] = {}
    phrases: list[dict[str, Any]] = []
    # each field's kind, looked up once per call rather than once per word (issue 42)
    kinds = [
        (f, f in KEYWORD_ONLY_FIELDS, f in EXPANSION_SKIP_FIELDS, f in EXACT_FIELDS) for f in fields
    ]
    for w in words:
        tokens = w.toks
        for field, keyword_only, expansion_skip, exact in kinds:
            if w.single_char and not keyword_only:
                continue
            if w.level is not None and expansion_skip:
                continue
            if exact:
                values.setdefault(field, set()).add(w.word)
                continue
            if len(tokens) == 1:
                values.setdefault(field, set()).add(tokens[0])
            elif tokens:
                phrases.append({"match_phrase": {field: {"query": " ".join(tokens)}}})
            # keyword_clauses adds sub-words for a word it does not group: base words only
            # (an expansion with sub-words is one token, hence grouped)
            groupable = len(tokens) == 1
            if w.subwords and not w.single_char and not (w.level is not None and groupable):
                values.setdefault(field, set()).update(w.subwords)
    terms = [{"terms": {f: sorted(v)}} for f, v in values.items() if v]
    return [*terms, *phrases]


def matched_words(
    source: dict[str, Any], words: Sequence[SearchWord], fields: Sequence[str]
) -> list[str]:
    """Which search words a hit matched, read off its stored tokens (what the engine matched
    on), in search-word order: base words first, then expansions by strength."""
    exact = {str(source.get(f) or "") for f in fields if f in EXACT_FIELDS}
    tokenised = {f: str(source.get(f) or "").split() for f in fields if f not in EXACT_FIELDS}
    # One-token words (most of them, expansions included) are one set lookup, not a scan: the
    # tokens of every field a word may match (one-character words: keyword fields only).
    short = [f for f in tokenised if f in KEYWORD_ONLY_FIELDS]
    every = {t for seq in tokenised.values() for t in seq}
    keyword_only = {t for f in short for t in tokenised[f]}
    out = []
    for w in words:
        toks = w.toks
        if len(toks) == 1:
            found = toks[0] in (keyword_only if w.single_char else every)
        else:
            fields_ok = short if w.single_char else tokenised
            found = bool(toks) and any(_contains(tokenised[f], list(toks)) for f in fields_ok)
        if w.word in exact or found:
            out.append(w.word)
    return out


def _contains(seq: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(seq[i : i + n] == part for i in range(len(seq) - n + 1))


def _match_filter(field: str, word: SearchWord) -> dict[str, Any] | None:
    """An unscored filter: does ``field`` hold ``word`` (whole value, token or phrase)."""
    clause = word_clause(field, word, word.toks, 1.0)
    if clause is None:
        return None
    kind, body = next(iter(clause.items()))
    inner = dict(next(iter(body.values())))
    inner.pop("boost", None)
    return {kind: {field: inner}}


def coverage_clauses(
    words: Sequence[SearchWord],
    fields: dict[str, float] = COVERAGE_FIELDS,
    expansion_share: float = EXPANSION_SHARE,
) -> list[dict[str, Any]]:
    """Fusion's keyword evidence, summed by the engine into a coverage in [0, ~1]:

    - each weighted word (utterance and context base words) is worth its share of the query's
      total word weight, once, on the best field it matches (``dis_max`` of constant scores:
      keywords 1.0, description 0.9, deepinsight 0.4; its sub-words 0.7);
    - expansions add at most ``expansion_share`` (the best level matched, scaled by level).

    Every number is relative to what this query could achieve, so the term does not depend on
    the index's statistics (other tenants' documents) or on how many words the query has.
    """
    base, context, expansions = _coverage(words, fields, expansion_share)
    return [*base, *context, *expansions]


def coverage_parts(
    words: Sequence[SearchWord],
    fields: dict[str, float] = COVERAGE_FIELDS,
    expansion_share: float = EXPANSION_SHARE,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``coverage_clauses`` in two parts: the utterance's (its words, bridges and expansions)
    and the earlier turns' words, each word's share still of the whole query's weight."""
    base, context, expansions = _coverage(words, fields, expansion_share)
    return [*base, *expansions], context


def _coverage(
    words: Sequence[SearchWord], fields: dict[str, float], expansion_share: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    weighted = [w for w in words if w.weighted and w.weight > 0]
    total = sum(w.weight for w in weighted)
    clauses: list[dict[str, Any]] = []
    context: list[dict[str, Any]] = []
    for w in weighted:
        share = w.weight / total
        queries = []
        for field, factor in fields.items():
            if w.single_char and field not in KEYWORD_ONLY_FIELDS:
                continue
            flt = _match_filter(field, w)
            if flt is not None:
                boost = round(share * factor, 6)
                queries.append({"constant_score": {"filter": flt, "boost": boost}})
            if w.subwords and not w.single_char and field not in EXACT_FIELDS:
                sub = {"terms": {field: list(w.subwords)}}
                boost = round(share * factor * SUBWORD_FACTOR, 6)
                queries.append({"constant_score": {"filter": sub, "boost": boost}})
        if queries:
            (context if w.earlier else clauses).append({"dis_max": {"queries": queries}})
    by_level: dict[int, dict[str, set[str]]] = {}
    for w in words:
        if expansion_share <= 0 or w.weighted or w.single_char or len(w.toks) != 1:
            continue
        lv = min(max(w.level or 1, 1), MAX_LEVEL)
        for field in fields:
            if field in EXPANSION_SKIP_FIELDS:
                continue
            by_level.setdefault(lv, {}).setdefault(field, set()).add(w.toks[0])
    levels = []
    for lv, per_field in sorted(by_level.items(), reverse=True):
        should = [{"terms": {f: sorted(v)}} for f, v in per_field.items()]
        flt = {"bool": {"should": should, "minimum_should_match": 1}}
        boost = round(expansion_share * lv / MAX_LEVEL, 6)
        levels.append({"constant_score": {"filter": flt, "boost": boost}})
    expansions = [{"dis_max": {"queries": levels}}] if levels else []
    return clauses, context, expansions


def proximity_clauses(
    words: Sequence[SearchWord],
    share: float,
    field: str = PROXIMITY_FIELD,
    top: int = PROXIMITY_WORDS,
    gaps: int = PROXIMITY_GAPS,
) -> list[dict[str, Any]]:
    """Coverage clauses for term proximity: each pair of the utterance's ``top`` strongest
    words (context words and one-character words left out) found within ``gaps`` tokens of each
    other in ``field``, in either order, adds ``share`` × its part of the pairs' total weight
    (w_a·w_b / Σ). A memory holding every pair close together gains ``share``; one that only
    mentions the words far apart gains nothing. Constant scores, so no index statistics."""
    if share <= 0:
        return []
    strongest = sorted(
        (
            w
            for w in words
            if w.weighted and not w.context and not w.single_char and w.weight > 0 and w.toks
        ),
        key=lambda w: -w.weight,
    )[:top]
    pairs = [(a, b) for i, a in enumerate(strongest) for b in strongest[i + 1 :]]
    total = sum(a.weight * b.weight for a, b in pairs)
    return [
        {
            "constant_score": {
                "filter": {
                    "intervals": {
                        field: {
                            "all_of": {
                                # in either order: all_of's default (OpenSearch 3.5
                                # deprecates its ``ordered`` flag)
                                "intervals": [_interval(a), _interval(b)],
                                "max_gaps": gaps,
                            }
                        }
                    }
                },
                "boost": round(share * a.weight * b.weight / total, 6),
            }
        }
        for a, b in pairs
    ]


def _interval(word: SearchWord) -> dict[str, Any]:
    """One word as an intervals rule: its tokens as indexed, a phrase when it has several."""
    if len(word.toks) == 1:
        return {"match": {"query": word.toks[0]}}
    return {"match": {"query": " ".join(word.toks), "max_gaps": 0, "ordered": True}}
