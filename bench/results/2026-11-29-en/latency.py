"""Words first against the vector nominating as well, interleaved query by query: the English
dialogue queries on a kept m3e index, at the default threshold (limit 5, 0.5: one body either
way) and at the benchmark's (limit 10, threshold 0: two bodies in one _msearch).

    python bench/results/2026-11-29-en/latency.py bench-en-en
"""

from __future__ import annotations

import statistics
import sys

from bench.common import make_kemem
from bench.dialogue_eval import ask, load_queries


def main(prefix: str) -> None:
    km = make_kemem(prefix)
    queries = [q for q in load_queries(corpus="en") if q["style"] == "english"]
    ask(km, queries[0])  # warm the model and the caches
    for name, opts in (
        ("default (limit 5, threshold 0.5)", {"limit": 5, "score_threshold": 0.5}),
        ("benchmark (limit 10, threshold 0)", {}),
    ):
        times: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        for q in queries:
            for side, extra in (("before", {"vector_candidates": True}), ("after", {})):
                t = ask(km, q, **opts, **extra).additional_info.timings_ms
                for stage in ("search_events", "total"):
                    times[side].setdefault(stage, []).append(float(t.get(stage, 0.0)))
        for stage in ("search_events", "total"):
            b = statistics.median(times["before"][stage])
            a = statistics.median(times["after"][stage])
            print(f"{name}: {stage} p50 before {b:.1f} ms, after {a:.1f} ms ({a / b:.2f}x)")
    km.close()


if __name__ == "__main__":
    main(sys.argv[1])
