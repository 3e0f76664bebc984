"""Engine CPU of a query and of the reinforcement writes its recalls cause, apart (issue 42).

    python bench/results/2026-11-30-coalesce/write_cost.py bench-lead-lat-100000 out.json [1 5]

The classic load's queries (one in ten for the heavy user, the rest for 199 light users; limit
5, the default threshold), sequential, ``reinforce=False``: the engine CPU of the queries. Then
their recalls are written as the background flusher writes them (``Reinforcements.write``, one
bulk a second, each of the recalls of the queries run in that second, summed per memory), and
the engine CPU is read again once the node has settled (its refreshes and merges included).
The node's idle CPU, measured before, is subtracted from both. Three rounds, fresh utterances
each; with flush periods given (seconds), each round writes its recalls once per period, the
periods taking turns.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timezone

from bench import latency as lat
from bench.common import make_kemem, stamp
from kemem_es.store.reinforce import Reinforcements, recall_keys
from kemem_es.store.scope import Scope

PREFIX, OUT = sys.argv[1], sys.argv[2]
PERIODS = [float(p) for p in sys.argv[3:]] or [1.0]
N, ROUNDS, SETTLE_S = 500, 3 * len(PERIODS), 30
km = make_kemem(PREFIX)
texts = lat.scale.queries(N * ROUNDS, 41)
rng = random.Random(23)
users = ["u00000" if rng.random() < 0.1 else f"u{rng.randrange(1, 200):05d}" for _ in texts]
time.sleep(SETTLE_S)
e0 = lat.engine_cpu_ms(km)
time.sleep(10)
idle = (lat.engine_cpu_ms(km) - e0) / 10_000
writes = Reinforcements(km.engine)
prefix = km.settings.index_prefix
now = datetime.now(timezone.utc).isoformat()
rows = []
for rnd in range(ROUNDS):
    period = PERIODS[rnd % len(PERIODS)]
    block = list(zip(texts[rnd * N : (rnd + 1) * N], users[rnd * N : (rnd + 1) * N], strict=True))
    e0, w0 = lat.engine_cpu_ms(km), time.perf_counter()
    per_second: list[list[tuple[str, str, str]]] = [[]]
    tick = w0 + period
    for t, u in block:
        r = km.query(t, agent_id="a1", user_id=u, limit=5)
        user = Scope.of(agent_id="a1", user_id=u, db="user")
        official = Scope.of(agent_id="a1", db="official")
        per_second[-1] += recall_keys(prefix, user, official, r, with_official=True)
        if time.perf_counter() >= tick:
            per_second.append([])
            tick += period
    q_wall = time.perf_counter() - w0
    q_cpu = lat.engine_cpu_ms(km) - e0 - idle * q_wall * 1000
    e1, w1 = lat.engine_cpu_ms(km), time.perf_counter()
    written = 0
    for keys in per_second:  # one bulk a period, as the flusher writes
        t0 = time.perf_counter()
        queued: dict = {}
        for k in keys:
            queued.setdefault(k, [0, now])[0] += 1
        if queued:
            written += writes.write(queued, {}, 15.0)
        time.sleep(max(0.0, period - (time.perf_counter() - t0)))
    time.sleep(SETTLE_S)
    w_wall = time.perf_counter() - w1
    w_cpu = lat.engine_cpu_ms(km) - e1 - idle * w_wall * 1000
    row = {"round": rnd, "flush_period_s": period, "queries": N,
           "query_engine_cpu_ms": round(q_cpu / N, 2),
           "writes": written, "writes_per_query": round(written / N, 2),
           "write_engine_cpu_ms": round(w_cpu / max(written, 1), 3),
           "writes_engine_cpu_ms_per_query": round(w_cpu / N, 2)}  # fmt: skip
    rows.append(row)
    print(json.dumps(row), flush=True)
out = {"prefix": PREFIX, "idle_cpu_ms_per_s": round(idle * 1000, 1), "rows": rows,
       "stamp": stamp(km)}  # fmt: skip
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
