"""Round 13: the contiguity window end to end, one process, one store: bench.latency's
scenarios with the window at 30, at 20 and off (meaning-only feedback, as before this round),
query by query in rotating order so that every setting sees the same cache state.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round13/window_e2e.py [PASSES]
"""

from __future__ import annotations

import statistics
import sys

from bench import latency as lat
from bench.common import make_kemem

km = make_kemem("bench-lat-ab-100000")
SETTINGS = {
    "off": {"contiguity_weight": 0.0},
    "window 20": {"contiguity_window": 20},
    "window 30": {},
}
texts = lat.scale.queries(220, 7)
for p in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, opts in lat.SCENARIOS.items():
        if name == "large_exact":
            continue
        ms: dict[str, list[float]] = {s: [] for s in SETTINGS}
        for k, text in enumerate(texts):
            order = list(SETTINGS)[k % 3 :] + list(SETTINGS)[: k % 3]
            for s in order:
                info = km.query(text, agent_id="a1", **lat.QUERY_OPTS, **opts, **SETTINGS[s])
                if k >= 20:  # warm-up
                    ms[s].append(info.additional_info.timings_ms["total"])
        line = "  ".join(f"{s} {statistics.median(v):.2f}" for s, v in ms.items())
        print(f"pass {p} {name}: p50 {line}", flush=True)
