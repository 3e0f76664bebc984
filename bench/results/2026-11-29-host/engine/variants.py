"""Engine CPU per bare light-user query, by what the query asks for: blocks of N queries per
variant, 3 rounds, the order rotated each round, the engine's CPU from its node stats.

    PYTHONPATH=<main> KEMEM_HOME=… KEMEM_ENGINE_PORT=… KEMEM_MODEL_DIR=… \
        python variants.py OUT.json [--paths]
"""

import json
import statistics
import sys
import time
from typing import Any

from bench import latency as lat
from bench import scale
from bench.common import make_kemem, stamp

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no expansion": {"expand": False},
    "bm25 mode": {"mode": "bm25"},
    "vector mode": {"mode": "vector"},
    "entities 1": {"entity_limit": 1},
}
if "--paths" in sys.argv:  # the second set: the scoring path forced
    sys.argv.remove("--paths")
    VARIANTS = {"default": {}, "path approx": {"path": "approx"}, "path exact": {"path": "exact"}}
N = 60
FIELDS = ("engine_cpu_ms", "client_cpu_ms", "wall_ms")

km = make_kemem("bench-lead-lat-100000", query_timeout_s=60)
texts = scale.queries(400, 11)


def block(opts: dict[str, Any], queries: list[str], user: str) -> tuple[float, float, float]:
    e0, c0, w0 = lat.engine_cpu_ms(km), time.process_time(), time.perf_counter()
    for q in queries:
        km.query(q, agent_id="a1", user_id=user, limit=5, **opts)
    n = len(queries)
    engine = (lat.engine_cpu_ms(km) - e0) / n
    return engine, (time.process_time() - c0) * 1000 / n, (time.perf_counter() - w0) * 1000 / n


for q in texts[:40]:
    km.query(q, agent_id="a1", user_id="u00050", limit=5)
rows: dict[str, list[tuple[float, float, float]]] = {k: [] for k in VARIANTS}
names = list(VARIANTS)
for r in range(3):
    order = names[r % len(names) :] + names[: r % len(names)]
    for i, name in enumerate(order):
        start = 40 + (r * 5 + i) * N % 300
        user = f"u{1 + (r * 7 + i) % 199:05d}"
        rows[name].append(block(VARIANTS[name], texts[start : start + N], user))
result = {
    name: {k: round(statistics.median(x[i] for x in got), 2) for i, k in enumerate(FIELDS)}
    for name, got in rows.items()
}
for name, v in result.items():
    print(f"{name:14s} engine {v['engine_cpu_ms']:6.2f}  client {v['client_cpu_ms']:6.2f}  "
          f"wall {v['wall_ms']:6.2f}")  # fmt: skip
with open(sys.argv[1], "w") as f:
    json.dump({"variants": result, "rows": rows, "stamp": stamp(km)}, f, indent=1, default=str)
