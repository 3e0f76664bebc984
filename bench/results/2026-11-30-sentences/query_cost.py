"""What a memory's best sentence costs a query: the same dialogue queries on one store, with
``memory_sentence_weight`` 0 and 0.25 in turn (one at a time, interleaved, several rounds),
p50 of the total and of each stage from ``additional_info.timings_ms``.

    python bench/results/2026-11-30-sentences/query_cost.py --corpus implied \
        --prefix bench-bs-implied --rounds 3 --out query_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import make_kemem, stamp
from bench.dialogue_eval import CORPUS_STYLES, ask, load_queries


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default="implied")
    p.add_argument("--prefix", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    km = make_kemem(args.prefix)
    qs = load_queries(styles=CORPUS_STYLES[args.corpus], corpus=args.corpus)
    weights = (0.0, 0.25)
    total: dict[float, list[float]] = {w: [] for w in weights}
    stages: dict[float, dict[str, list[float]]] = {w: {} for w in weights}
    for q in qs[:20]:  # warm-up: model, caches, engine
        ask(km, q, mode="fusion")
    for r in range(args.rounds):
        for i, q in enumerate(qs):
            order = weights if (i + r) % 2 == 0 else weights[::-1]
            for w in order:
                t0 = time.perf_counter()
                resp = ask(km, q, mode="fusion", memory_sentence_weight=w)
                total[w].append((time.perf_counter() - t0) * 1000)
                for k, v in (resp.additional_info.timings_ms or {}).items():
                    stages[w].setdefault(k, []).append(float(v))
    out: dict[str, Any] = {"corpus": args.corpus, "prefix": args.prefix, "rounds": args.rounds}
    for w in weights:
        out[str(w)] = {
            "n": len(total[w]),
            "p50_ms": round(statistics.median(total[w]), 2),
            "stages_p50_ms": {k: round(statistics.median(v), 2) for k, v in stages[w].items()},
        }
    out["ratio_p50"] = round(out["0.25"]["p50_ms"] / out["0.0"]["p50_ms"], 3)
    out["stamp"] = stamp()
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k != "stamp"}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
