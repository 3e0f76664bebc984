"""Round 14: every mode on a kept dialogue store, asked without ``now`` (a caller that does
not pass it: the time terms then count from the present day, a year after the sets' ``now``).

    python bench/results/2026-11-26-quality/round14/without_now.py zh|check PREFIX
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import bench.dialogue_eval as de
from bench.common import make_kemem
from bench.evalset import mean_metrics, metrics


def main() -> None:
    corpus, prefix = sys.argv[1], sys.argv[2]
    km = make_kemem(prefix)
    gold = de.qrels(corpus)
    queries = de.load_queries(corpus=corpus, styles=de.CORPUS_STYLES[corpus])

    def one(args: tuple[dict, str]) -> dict[str, float]:
        q, mode = args
        text, context = de.query_text(q)
        resp = km.query(text, user_id=q["user_id"], agent_id=q["agent_id"], context=context,
                        limit=10, score_threshold=0.0, mode=mode)  # fmt: skip
        return metrics([h.index for h in resp.memory_events], gold[q["qid"]])

    for mode in de.MODES:
        with ThreadPoolExecutor(2) as pool:
            m = mean_metrics(list(pool.map(one, [(q, mode) for q in queries])))
        print(
            f"{corpus} {mode:10s} without now: R@5 {m['recall@5']:.4f} nDCG@10 {m['ndcg@10']:.4f}"
        )


if __name__ == "__main__":
    main()
