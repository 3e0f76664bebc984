"""Round 15: what a threshold lets through, on dialogues that have a memory to find and on
dialogues that have none.

Each dialogue is asked twice through ``Kemem.query`` (defaults, limit 10, threshold 0, the
earlier turns as context): of its own user, where it was written about one memory (relevance
2), and of another user of the same set (the next pair with another user id), whose memories
it was not written about. For each threshold: how often the dialogue's own memory clears it,
how often a memory of its own user that is not among its relevant ones does, and how often
anything of the other user's does (a recall with nothing to recall).

    python bench/results/2026-11-26-quality/round15/threshold_curve.py zh:bench-q14-zh \
        fresh:bench-q14-fr hard:bench-q14-hd
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import make_kemem
from bench.dialogue_eval import ask, load_queries, qrels

THRESHOLDS = (0.35, 0.40, 0.45, 0.50, 0.55, 0.60)


def other_pair(pairs: list[tuple[str, str]], mine: tuple[str, str]) -> tuple[str, str]:
    i = pairs.index(mine)
    for step in range(1, len(pairs)):
        cand = pairs[(i + step) % len(pairs)]
        if cand[0] != mine[0]:
            return cand
    raise ValueError("one user only")


def scores(km: Any, q: dict[str, Any], who: tuple[str, str]) -> dict[str, float]:
    resp = ask(km, {**q, "user_id": who[0], "agent_id": who[1]})
    return {h.index: h.score for h in resp.memory_events}


def curve(corpus: str, prefix: str) -> list[tuple[float, float, float]]:
    """(its memory's score, the best unrelated memory of its user, the best of another user's)
    per dialogue; 0 where none came back."""
    km = make_kemem(prefix)
    qs, gold = load_queries(corpus=corpus), qrels(corpus)
    pairs = sorted({(q["user_id"], q["agent_id"]) for q in qs})

    def one(q: dict[str, Any]) -> tuple[float, float, float]:
        own = scores(km, q, (q["user_id"], q["agent_id"]))
        other = scores(km, q, other_pair(pairs, (q["user_id"], q["agent_id"])))
        rel = gold[q["qid"]]
        primary = max((own.get(d, 0.0) for d, r in rel.items() if r == 2), default=0.0)
        unrelated = max((s for d, s in own.items() if d not in rel), default=0.0)
        return primary, unrelated, max(other.values(), default=0.0)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, qs))


def main() -> None:
    for arg in sys.argv[1:]:
        corpus, prefix = arg.split(":")
        rows = curve(corpus, prefix)
        n = len(rows)
        print(f"{corpus} ({n} dialogues): share of dialogues where, at the threshold,")
        print(
            "  threshold | its memory passes | an unrelated memory of its user passes | "
            "a memory of another user passes"
        )
        for t in THRESHOLDS:
            a, b, c = (sum(r[i] >= t for r in rows) / n for i in range(3))
            print(f"  {t:.2f} | {a:.3f} | {b:.3f} | {c:.3f}")


if __name__ == "__main__":
    main()
