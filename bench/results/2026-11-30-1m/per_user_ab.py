"""The per-user scenario of bench.latency on a kept store, with whichever tree's kemem_es and
bench are on PYTHONPATH (both trees have these functions), so that two trees answer the same
queries on the same store in turn:

    PYTHONPATH=<tree> python per_user_ab.py PREFIX OUT.json [SCENARIO ...]
"""

from __future__ import annotations

import json
import sys

from bench import latency as lat
from bench.common import make_kemem, stage_table

prefix, out = sys.argv[1], sys.argv[2]
names = sys.argv[3:] or ["per_user"]
km = make_kemem(prefix)
texts = lat.scale.queries(20 + 200, 7 + 4)  # bench.latency's warm-up and measured queries
warm, measured = texts[:20], texts[20:]
result = {}
for name in names:
    opts = lat.SCENARIOS[name]
    lat.run_queries(km, warm, opts)
    result[name] = stage_table(lat.run_queries(km, measured, opts))
    t = result[name]["total"]
    print(f"{name}: p50 {t['p50']} p95 {t['p95']} p99 {t['p99']}", file=sys.stderr)
with open(out, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
