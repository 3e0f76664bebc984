"""Engine CPU per query with recall reinforcement off, on without coalescing, and on with
``reinforce_coalesce_s`` 30 (issue 42), on a kept latency store (bench.latency --keep).

    python bench/results/2026-11-30-coalesce/reinforce_cost.py bench-lead-lat-100000 out.json

The classic load's queries (bench.load: one in ten for the heavy user, the rest for 199 light
users; limit 5, the default threshold), sequential, one process; each variant queries its own
block of utterances (the same generator), the variants take turns. A variant's engine CPU runs
from its first query until its last recall is written (``close`` flushes what waits) and the
node has settled (refreshes and merges included); the node's idle CPU, measured before, is
subtracted.
"""

from __future__ import annotations

import json
import random
import sys
import time
import urllib.request

from bench import latency as lat
from bench.common import make_kemem, stamp

PREFIX, OUT = sys.argv[1], sys.argv[2]
N, ROUNDS, SETTLE_S = 500, 3, 20
VARIANTS = {"off": {"reinforce": False}, "on, coalesce 0": {"reinforce": True,
            "reinforce_coalesce_s": 0.0}, "on, coalesce 30 s": {"reinforce": True,
            "reinforce_coalesce_s": 30.0}}  # fmt: skip
texts = lat.scale.queries(N * ROUNDS * len(VARIANTS), 31)
rng = random.Random(17)
users = ["u00000" if rng.random() < 0.1 else f"u{rng.randrange(1, 200):05d}" for _ in texts]


def node_stats(url: str) -> dict[str, int]:
    d = json.load(urllib.request.urlopen(f"{url}/_nodes/stats/indices"))
    n = next(iter(d["nodes"].values()))["indices"]
    return {"docs_written": n["indexing"]["index_total"], "refreshes": n["refresh"]["total"],
            "refresh_ms": n["refresh"]["total_time_in_millis"], "merge_ms":
            n["merges"]["total_time_in_millis"]}  # fmt: skip


probe = make_kemem(PREFIX)
url = probe.engine.url
time.sleep(SETTLE_S)
e0 = lat.engine_cpu_ms(probe)
time.sleep(10)
idle = (lat.engine_cpu_ms(probe) - e0) / 10_000  # ms of CPU per ms
rows = []
at = 0
for rnd in range(ROUNDS):
    for name, over in VARIANTS.items():
        km = make_kemem(PREFIX, **over)
        block = list(zip(texts[at : at + N], users[at : at + N], strict=True))
        at += N
        s0, e0, w0 = node_stats(url), lat.engine_cpu_ms(km), time.perf_counter()
        recalled = 0
        for t, u in block:
            r = km.query(t, agent_id="a1", user_id=u, limit=5)
            recalled += len(r.memory_events) + len(r.memory_entities)
        wall_q = time.perf_counter() - w0
        km.close()  # what waits is written now: every recall of the block counts
        time.sleep(SETTLE_S)
        wall = time.perf_counter() - w0
        s1 = node_stats(url)
        cpu = lat.engine_cpu_ms(km) - e0 - idle * wall * 1000
        row = {"round": rnd, "variant": name, "queries": N, "recalls_per_query":
               round(recalled / N, 2), "query_wall_s": round(wall_q, 1),
               "engine_cpu_ms_per_query": round(cpu / N, 2),
               **{k: s1[k] - s0[k] for k in s0}}  # fmt: skip
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
out = {"prefix": PREFIX, "idle_cpu_ms_per_s": round(idle * 1000, 1), "rows": rows,
       "stamp": stamp(probe)}  # fmt: skip
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
