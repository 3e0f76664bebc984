"""Round 15: is the absolute score the best "is there something to recall" signal? For each
dialogue, its own user's top 10 (positive when the top hit is the memory it was written for)
and another user's top 10 (negative: nothing to recall), as ``threshold_curve.py`` asks them.
Each rule is set to let through a given share of the negatives; how often does it let through
a positive? Rules: the top score (the package's threshold), its gap to the mean of the other
nine, its gap to the second, and that gap in standard deviations of the other nine.

    python bench/results/2026-11-26-quality/round15/threshold_gap.py zh:bench-q14-zh \
        fresh:bench-q14-fr hard:bench-q14-hd
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threshold_curve import other_pair

from bench.common import make_kemem
from bench.dialogue_eval import ask, load_queries, qrels

RULES = ("top score", "gap to the mean", "gap to the second", "gap in sd")


def top10s(corpus: str, prefix: str) -> list[tuple[bool, list[float], list[float]]]:
    km = make_kemem(prefix)
    qs, gold = load_queries(corpus=corpus), qrels(corpus)
    pairs = sorted({(q["user_id"], q["agent_id"]) for q in qs})

    def one(q: dict[str, Any]) -> tuple[bool, list[float], list[float]]:
        own = ask(km, q).memory_events
        who = other_pair(pairs, (q["user_id"], q["agent_id"]))
        other = ask(km, {**q, "user_id": who[0], "agent_id": who[1]}).memory_events
        right = bool(own) and gold[q["qid"]].get(own[0].index) == 2
        return right, [h.score for h in own], [h.score for h in other]

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, qs))


def rule_values(scores: list[float]) -> list[float]:
    s = np.array([*scores, *[0.0] * (10 - len(scores))])
    rest = s[1:]
    return [s[0], s[0] - rest.mean(), s[0] - s[1], (s[0] - rest.mean()) / (rest.std() + 1e-6)]


def main() -> None:
    for arg in sys.argv[1:]:
        corpus, prefix = arg.split(":")
        rows = top10s(corpus, prefix)
        pos = np.array([rule_values(own) for _, own, _ in rows])
        neg = np.array([rule_values(other) for _, _, other in rows])
        right = np.array([r for r, _, _ in rows])
        print(f"{corpus}: the top hit is the dialogue's memory in {right.mean():.3f}")
        print("  rule | its memory first and let through, at 5 / 10 / 15 / 25 % false recall")
        for k, rule in enumerate(RULES):
            cells = []
            for share in (0.05, 0.10, 0.15, 0.25):
                t = np.quantile(neg[:, k], 1 - share)
                cells.append(f"{np.mean((pos[:, k] >= t) & right):.3f}")
            print(f"  {rule} | " + " / ".join(cells))


if __name__ == "__main__":
    main()
