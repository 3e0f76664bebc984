"""Experiment (not adopted): entities a dialogue is about lend their description's top words to
the event search, beside the names of concrete entities that bridge today.

    SPLITS=ab python bench/results/2026-11-26-quality/round8/entity_words.py K F THR ENTS [modes]

K words (TF-IDF, names left out) from each of the ENTS best entities with evidence >= THR
(bridge_threshold lowered to THR so that they reach the bridge step), weighted F x the
utterance's strongest word. QueryText.bridge_words is patched; runs the Chinese dialogue sets
on the round-6 store bench-q6-zh (fusion R@5 per half, and how often the memory a dialogue was
written for / any other memory clears 0.5). Output: entity_words.txt.
"""

from __future__ import annotations

import os
import sys

from bench import dialogue_eval as de
from bench.common import make_kemem
from kemem_es.search import query_text as qtm
from kemem_es.search.clauses import SearchWord
from kemem_es.text import base_words_with_tokens

K, FACTOR, THR, ENTS = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
original = qtm.QueryText.bridge_words


def bridge_words(self, params, words, entities, scope_names=()):
    out = original(self, params, words, entities, scope_names)
    taken = {w.word for w in words} | {w.word for w in out} | set(scope_names)
    top = max((w.weight for w in words if w.level is None), default=1.0)
    idf = self.expander.idf if self.expander else None
    strong = [(h, s) for h, s in entities if s >= THR and h["_source"]["entity_type"] != "主体"]
    for hit, _ in sorted(strong, key=lambda hs: -hs[1])[:ENTS]:
        src = hit["_source"]
        names = [src.get(f) for f in ("user_name", "agent_name", "entity_name") if src.get(f)]
        base, _ = base_words_with_tokens(src["description"], K + 3, names, self.tokenizer, idf)
        lent = [b for b in base if b.word not in taken and not b.single_char][:K]
        for b in lent:
            taken.add(b.word)
            toks = self.tokens(b.word)
            out.append(SearchWord(b.word, qtm.CONTEXT_LEVEL, False, toks, top * FACTOR, (), True))
    return out


def main() -> None:
    if K > 0:
        qtm.QueryText.bridge_words = bridge_words
    km = make_kemem("bench-q6-zh")
    gold = de.qrels("zh")
    for mode in sys.argv[5:] or ["fusion"]:
        cells = []
        for split in os.environ.get("SPLITS", "ab"):
            qs = de.load_queries(split, ["recall", "situational", "long"], "zh")
            r = de.run_mode(km, qs, gold, mode, {"bridge_threshold": min(THR, 0.35)}, 2)
            sets = r["by_set"]
            cells.append(
                f"long{split} {sets['long']['recall@5']:.3f} short{split} "
                f"{sets['short']['recall@5']:.3f} gold>=0.5 {r['gold>=0.5']} "
                f"other>=0.5 {r['other>=0.5']}"
            )
        print(f"K={K} F={FACTOR} THR={THR} ENTS={ENTS} {mode:7s}", " | ".join(cells))


if __name__ == "__main__":
    main()
