"""matched_words' set lookup gives what the plain token scan gave."""

from __future__ import annotations

import random

from kemem_es.search.clauses import KEYWORD_ONLY_FIELDS, SearchWord, matched_words


def reference(source, words, fields):
    exact = {
        str(source.get(f) or "") for f in fields if f in ("keywords", "keyword", "entity_name")
    }
    tok = {
        f: str(source.get(f) or "").split()
        for f in fields
        if f not in ("keywords", "keyword", "entity_name")
    }
    out = []
    for w in words:
        part = list(w.toks)
        seqs = [s for f, s in tok.items() if not (w.single_char and f not in KEYWORD_ONLY_FIELDS)]
        hit = any(s[i : i + len(part)] == part for s in seqs for i in range(len(s) - len(part) + 1))
        if w.word in exact or (part and hit):
            out.append(w.word)
    return out


def test_same_as_the_scan() -> None:
    rng = random.Random(3)
    vocab = ["火锅", "朋友", "海边", "开心", "吃", "重庆", "画画", "日落", "猫"]
    fields = ["entity_name", "keyword_tok", "description_tok"]
    for _ in range(300):
        source = {
            "entity_name": rng.choice(vocab),
            "keyword_tok": " ".join(rng.choices(vocab, k=2)),
            "description_tok": " ".join(rng.choices(vocab, k=rng.randint(0, 8))),
        }
        words = []
        for _ in range(rng.randint(1, 6)):
            toks = tuple(rng.choices(vocab, k=rng.randint(1, 2)))
            words.append(SearchWord("".join(toks), None, len(toks[0]) == 1, toks))
        assert matched_words(source, words, fields) == reference(source, words, fields)
