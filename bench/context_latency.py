"""What the longer dialogue context costs: the same dialogue queries with the round-2 context
settings (4 turns, decay 0.5, utterance weight 0.4) and today's defaults, alternating query by
query on one kept index (so load drifts hit both alike).

    python -m bench.context_latency [--prefix bench-q3-dialogue] [--styles long] [--rounds 2]

Queries: bench/dialogue/ (``--styles``), fusion, limit 10, threshold 0, against the indices a
``bench.dialogue_eval --keep`` run left. Reports p50/p95 of ``total``, ``tokenise``, ``embed``
and ``search_events`` (ms) per setting.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import make_kemem, percentiles, stamp
from bench.dialogue_eval import STYLES, ask, load_queries

OLD = {"context_turns": 4, "context_decay": 0.5, "utterance_weight": 0.4}
STAGES = ("total", "tokenise", "embed", "search_events")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", default="bench-q3-dialogue")
    p.add_argument("--styles", nargs="+", choices=list(STYLES), default=["long"])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    km = make_kemem(args.prefix)
    queries = load_queries("all", args.styles)
    times: dict[str, dict[str, list[float]]] = {"round2": {}, "defaults": {}}
    for r in range(args.rounds + 1):  # round 0 warms caches and is not counted
        for q in queries:
            order = [("round2", OLD), ("defaults", {})]
            for name, extra in order if r % 2 else order[::-1]:
                resp = ask(km, q, **extra)
                if r:
                    t = resp.additional_info.timings_ms
                    for stage in STAGES:
                        times[name].setdefault(stage, []).append(float(t.get(stage, 0.0)))
    result: dict[str, Any] = {
        "queries": len(queries),
        "rounds": args.rounds,
        "styles": args.styles,
        "round2_settings": OLD,
        "ms": {n: {s: percentiles(v) for s, v in st.items()} for n, st in times.items()},
        "stamp": stamp(km),
    }
    for name, st in result["ms"].items():
        cells = " ".join(f"{s} {v['p50']:.1f}/{v['p95']:.1f}" for s, v in st.items())
        print(f"{name:9s} {cells}", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
