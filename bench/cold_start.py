"""The first query of a fresh process, with and without warming up before serving.

    python -m bench.cold_start --prefix bench-lat-ab-100000 [--runs 5] [--out FILE.json]

Each run is a new Python process (jieba, lexicon, model and the engine connection all cold; the
engine itself stays up): ``cold`` times ``Kemem()`` + the first ``query`` as a user would see it
without a warm-up; ``warmed`` first builds the searcher (what ``kemem-es serve`` now does before
it accepts requests, ~1–2 s at start) and then times the first query. Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import stamp

CHILD = """
import json, sys, time
from bench.common import make_kemem
km = make_kemem(sys.argv[1])
warm = sys.argv[2] == "warmed"
if warm:
    km.searcher
opts = dict(agent_id="a1", user_id="u00000", limit=10, score_threshold=0)
t0 = time.perf_counter()
r = km.query("你还记得我们上次在家里拍了很多照片的事吗？", **opts)
t1 = time.perf_counter()
km.query("我想去重庆绘画，你觉得呢", **opts)
t2 = time.perf_counter()
ms = r.additional_info.timings_ms
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "second_ms": (t2 - t1) * 1e3,
                  "first_search_ms": ms.get("search_events", 0) + ms.get("search_entities", 0)}))
"""


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"prefix": args.prefix, "runs": {}}
    rows: dict[str, list[dict[str, float]]] = {"cold": [], "warmed": []}
    for _ in range(args.runs):
        for mode in rows:  # interleaved
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, args.prefix, mode],
                capture_output=True,
                text=True,
                check=True,
            )
            rows[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for mode, vals in rows.items():
        out["runs"][mode] = {k: round(statistics.median(v[k] for v in vals), 1) for k in vals[0]}
    out["stamp"] = stamp()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    result = run(args)
    if args.out:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2))
    print(json.dumps(result["runs"], ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
