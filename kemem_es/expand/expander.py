"""Expand a sentence's base words through the lexicon (docs/SPEC.md §3, strategies 0 and 1)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from pydantic import BaseModel, Field

from kemem_es.expand.lexicon import Assoc, Lexicon, default_lexicon
from kemem_es.text.keywords import BaseWord, IdfTable, base_words_with_tokens, default_idf
from kemem_es.text.tokenizer import Tokenizer, default_tokenizer, normalize

RECURRENCE_BONUS = 2  # strategy 1: each extra target word that proposes a word adds this
HEAD_LEVEL = 7  # level of the lexicon word found inside an unknown compound (吃火锅 → 火锅)
# Longest part of an unknown compound looked up (the shipped lexicon's words have at most 6
# characters): every part of a word was tried, 2·n slices of up to n characters, so one latin
# "word" of 50k characters cost 0.6 s and a 500 KB utterance 70 s.
MAX_PART_CHARS = 8


class ExpandedWord(BaseModel):
    """An association found for the sentence. ``source`` is the base word that proposed it first;
    ``sources`` lists every base word that proposed it (several only under strategy 1)."""

    word: str
    level: int
    source: str
    sources: list[str] = Field(default_factory=list)


class Expansion(BaseModel):
    """Base words picked, the sentence's tokens, and the expansions (never a base word)."""

    keywords: list[BaseWord]
    tokens: list[str]
    expanded: list[ExpandedWord]

    def level_pairs(self) -> list[dict[str, int]]:
        """``[{word: level}, ...]``: the old service's 扩展后联想词 shape."""
        return [{e.word: e.level} for e in self.expanded]


def round_robin(
    targets: Sequence[str], lists: Sequence[Sequence[Assoc]], max_words: int
) -> list[ExpandedWord]:
    """Strategy 0: cycle over target words in order; each turn a target gives its strongest
    association not yet taken; exhausted targets drop out."""
    out: list[ExpandedWord] = []
    taken: set[str] = set()
    cursors = [0] * len(targets)
    live = [i for i, pairs in enumerate(lists) if pairs]
    while live and len(out) < max_words:
        still: list[int] = []
        for i in live:
            pairs, c = lists[i], cursors[i]
            while c < len(pairs) and pairs[c][0] in taken:
                c += 1
            if c < len(pairs):
                word, level = pairs[c]
                taken.add(word)
                out.append(
                    ExpandedWord(word=word, level=level, source=targets[i], sources=[targets[i]])
                )
                c += 1
                if len(out) >= max_words:
                    break
            cursors[i] = c
            if c < len(pairs):
                still.append(i)
        live = still
    return out


def pooled(
    targets: Sequence[str], lists: Sequence[Sequence[Assoc]], max_words: int
) -> list[ExpandedWord]:
    """Strategy 1: pool every target's associations; a word proposed by k targets gets its best
    level + 2·(k−1); sort by that. Ties keep first-seen order, visiting rank 0 of every target,
    then rank 1, … so no single target crowds out the others."""
    best: dict[str, int] = {}
    sources: dict[str, list[str]] = {}
    depth = max((len(p) for p in lists), default=0)
    for rank in range(depth):
        for target, pairs in zip(targets, lists, strict=True):
            if rank < len(pairs):
                word, level = pairs[rank]
                if word in best:
                    best[word] = max(best[word], level)
                    if target not in sources[word]:
                        sources[word].append(target)
                else:
                    best[word] = level
                    sources[word] = [target]
    scored = sorted(best, key=lambda w: -(best[w] + RECURRENCE_BONUS * (len(sources[w]) - 1)))
    return [
        ExpandedWord(
            word=w,
            level=best[w] + RECURRENCE_BONUS * (len(sources[w]) - 1),
            source=sources[w][0],
            sources=sources[w],
        )
        for w in scored[:max_words]
    ]


STRATEGIES = {0: round_robin, 1: pooled}


class Expander:
    """Tokenise → base words → expansions. Thread-safe once built (lookups are read-only)."""

    def __init__(
        self,
        lexicon: Lexicon,
        tokenizer: Tokenizer | None = None,
        idf: IdfTable | None = None,
    ) -> None:
        self.lexicon = lexicon
        self.tokenizer = tokenizer or default_tokenizer()
        self.idf = idf if idf is not None else default_idf()

    def expand_words(
        self,
        targets: Sequence[str],
        max_words: int = 100,
        strategy: int = 0,
        filter_levels: Iterable[int] = (0,),
        skip: Iterable[str] = (),
    ) -> list[ExpandedWord]:
        """Expand given target words (in priority order). Associations whose level is in
        ``filter_levels`` are dropped (``(0,)`` drops none, as no level is 0); words in
        ``skip``, the targets themselves and stop words are never emitted."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be 0 or 1, got {strategy!r}")
        if max_words <= 0:
            return []
        drop = set(filter_levels)
        banned = set(skip) | set(targets)
        stop = self.tokenizer.stopwords
        lists = [
            [
                (w, lv)
                for w, lv in self.associations(t)
                if lv not in drop and w not in banned and w not in stop
            ]
            for t in targets
        ]
        return STRATEGIES[strategy](targets, lists, max_words)

    def associations(self, word: str) -> list[Assoc]:
        """The lexicon's list for ``word``; for a compound the lexicon lacks (jieba keeps
        吃火锅, 喝咖啡, 好开心 whole) the longest known part stands in, itself first at
        ``HEAD_LEVEL``: memories say 火锅 more often than 吃火锅. Parts are at most
        ``MAX_PART_CHARS`` long, so a word costs the same whatever its length."""
        pairs = self.lexicon.get(word)
        if pairs or len(word) < 3:
            return pairs
        for size in range(min(len(word) - 1, MAX_PART_CHARS), 1, -1):
            for part in (word[-size:], word[:size]):  # the head noun is usually at the end
                found = self.lexicon.get(part)
                if found:
                    return [(part, HEAD_LEVEL), *(p for p in found if p[0] != word)]
        return []

    def expand(
        self,
        sentence: str,
        max_words: int = 100,
        strategy: int = 0,
        filter_levels: Iterable[int] = (0,),
        exclude: Iterable[str] = (),
        top_k: int = 10,
    ) -> Expansion:
        """``expand`` of docs/SPEC.md §3: every base word (TF-IDF top-k, stop words and
        ``exclude`` names removed) is a target, in weight order; base words and names are never
        emitted."""
        names = [normalize(n).strip() for n in exclude]
        keywords, tokens = base_words_with_tokens(
            sentence, top_k=top_k, exclude=names, tokenizer=self.tokenizer, idf=self.idf
        )
        targets = [k.word for k in keywords]
        expanded = self.expand_words(targets, max_words, strategy, filter_levels, skip=names)
        return Expansion(keywords=keywords, tokens=tokens, expanded=expanded)


@lru_cache(maxsize=1)
def default_expander() -> Expander:
    """Shipped lexicon + default tokenizer + jieba's IDF table, built once per process."""
    return Expander(default_lexicon(), default_tokenizer(), default_idf())
