"""The design's central claim, guarded on the real engine: the fused score ranks better than
each of its signals alone (issue 12). Three dev sets are indexed through the package's own
indexer and asked in every mode as ``bench.dialogue_eval`` asks them (last turn, earlier turns
as context, limit 10, threshold 0), without reinforcement:

- the Chinese **long** dialogues (166 multi-turn dialogues whose memory is implied, among
  same-topic near misses; ``bench/dialogue``). Measured at round 14: fusion R@5 0.738,
  vector 0.669, rrf 0.642, bm25 0.557; two_stage 0.668 (round 18, keyword candidates only);
- the **English** set (450 dialogues, questions and session-summary questions;
  ``bench/dialogue_en``): fusion 0.923, bm25 0.861, rrf 0.836, vector 0.622; two_stage 0.919
  against fusion 0.921 on the round-18 store;
- the Chinese **hard** set (160 dialogues among threads of near-miss memories whose words they
  avoid; ``bench/dialogue_hard``): fusion 0.891, vector 0.853, rrf 0.756, two_stage 0.697,
  bm25 0.419.

A change to scoring, tokenisation, the query text or the engine requests that gives up
fusion's lead fails here, not at review. The asserted margins are about half the measured
ones: what is guarded is the ordering, not the third decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench import dialogue_eval as de
from bench.evalset import metrics

SIGNALS = ("bm25", "vector", "rrf")


def recall_at_5(kemem, corpus: str, styles: Sequence[str], mode: str) -> float:
    queries = de.load_queries(styles=styles, corpus=corpus)
    gold = de.qrels(corpus)

    def one(q: dict) -> float:
        resp = de.ask(kemem, q, mode=mode, reinforce=False)
        return metrics([h.index for h in resp.memory_events], gold[q["qid"]])["recall@5"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        scores = list(pool.map(one, queries))
    return sum(scores) / len(scores)


@pytest.mark.parametrize(
    ("corpus", "styles", "margin"),
    [
        ("zh", ("long",), 0.03),  # measured +0.068 over two_stage, +0.069 over vector
        ("en", ("english", "english_question", "english_session"), 0.03),  # +0.062 over bm25
        ("hard", ("hard",), 0.015),  # measured +0.037 over vector
    ],
)
def test_fusion_ranks_above_each_signal_alone(kemem, corpus, styles, margin) -> None:
    de.index_corpus(kemem, corpus)
    r5 = {mode: recall_at_5(kemem, corpus, styles, mode) for mode in de.MODES}
    best_signal = max(r5[m] for m in SIGNALS)
    assert r5["fusion"] >= best_signal + margin, r5
    # two_stage (keyword candidates, the vector added to their best 20) is not ahead
    assert r5["fusion"] >= r5["two_stage"], r5
    if corpus != "en":  # on implied memories the vector term leads the keywords by far
        assert r5["fusion"] >= r5["two_stage"] + margin, r5
