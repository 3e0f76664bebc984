"""Query latency of two code versions on one kept index (issue 12's "no slower than +10 %").

    python -m bench.latency_ab build --scale 100000          # index once (kept), this tree's code
    PYTHONPATH=<other tree> python -m bench.latency_ab measure --scale 100000 --out A.json
    python -m bench.latency_ab measure --scale 100000 --out B.json
    python -m bench.latency_ab drop --scale 100000

``measure`` runs bench.latency's scenarios (per_user, large_approx, large_exact; 200 queries
after 20 warm-up, sequential, no QPS phase) with whichever ``kemem_es`` is on the path, so the
before/after numbers come from the same documents, merge state and engine. The module itself
must be importable from both trees (copy it next to the other tree's bench/ when needed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import latency as lat
from bench.common import drop_indices, make_kemem, stage_table, stamp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["build", "measure", "drop"])
    ap.add_argument("--scale", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--prefix", default="bench-lat-ab-{n}", help="index prefix ({n}: scale)")
    ap.add_argument(
        "--quantization", default="none", choices=["none", "int8"], help="vectors of a build"
    )
    args = ap.parse_args()
    km = make_kemem(args.prefix.format(n=args.scale), vector_quantization=args.quantization)
    if args.action == "drop":
        drop_indices(km)
        return
    if args.action == "build":
        drop_indices(km)
        km.init()
        pool = lat.vector_pool(km, "int8", args.seed)
        info = {"indexing": lat.load_corpus(km, args.scale, args.seed, pool)}
        info["merge"] = lat.force_merge(km, 1)
        print(json.dumps(info, default=str)[:400], file=sys.stderr)
        return
    texts = lat.scale.queries(args.warmup + args.queries, args.seed + 4)
    warm, measured = texts[: args.warmup], texts[args.warmup :]
    out = {"scale": args.scale, "stamp": stamp(km), "scenarios": {}}
    for name, opts in lat.SCENARIOS.items():
        lat.run_queries(km, warm, opts)
        st = stage_table(lat.run_queries(km, measured, opts))
        out["scenarios"][name] = st
        t = st["total"]
        print(f"  {name}: total p50={t['p50']} p95={t['p95']} p99={t['p99']} ms", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(out, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
