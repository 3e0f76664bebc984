"""What sentence vectors cost: the same multi-sentence queries with ``sentence_weight`` 0.5 and 0,
alternating query by query on one kept index (so load drifts hit both alike).

    python -m bench.sentence_latency --prefix bench-q-md [--n 200] [--pooled]

Queries: MemDaily queries of two or more sentences (``text.dialogue.sentences``), against the
indices a ``bench.memdaily --keep`` run left (per namespace, or pooled by file: > 2,000 memories,
the approximate path). Reports p50/p95 of ``total``, ``embed`` and ``search_events`` (ms).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import SHARED, make_kemem, percentiles
from bench.evalset import EvalSet
from bench.memdaily import ask, sample
from kemem_es.text.dialogue import sentences

STAGES = ("total", "embed", "search_events")


def run(args: argparse.Namespace) -> dict[str, Any]:
    es = EvalSet.load(args.data)
    km = make_kemem(args.prefix)
    qs = [q for q in es.queries if sentences(q["text"], 4)]
    qs = sample(qs, args.n + args.warmup, seed=2)
    times: dict[float, dict[str, list[float]]] = {0.5: {}, 0.0: {}}
    for k, q in enumerate(qs):
        for s in (0.5, 0.0) if k % 2 else (0.0, 0.5):
            resp = ask(km, q, args.pooled, expand=False, sentence_weight=s)
            if k >= args.warmup:
                for stage in STAGES:
                    t = resp.additional_info.timings_ms.get(stage, 0.0)
                    times[s].setdefault(stage, []).append(t)
    return {
        "queries": len(qs) - args.warmup,
        "pooled": args.pooled,
        "ms": {str(s): {st: percentiles(v) for st, v in per.items()} for s, per in times.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=SHARED / "data/dev/memdaily")
    p.add_argument("--prefix", default="bench-q-md")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--pooled", action="store_true")
    result = run(p.parse_args(argv))
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
