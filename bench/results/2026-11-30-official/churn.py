"""What the official memories' reinforcement does to every user's query (issue 42).

    python bench/results/2026-11-30-official/churn.py bench-lead-lat-100000 out.json

On a store whose indices were just force-merged: 300 classic-load queries (one in ten for the
heavy user; limit 5, the default threshold, ``reinforce=False``), their wall time and the
engine's CPU (idle subtracted), each index's segments and deleted documents. Then the
reinforcement writes 2,000 other such queries' recalls cause, as the background flusher writes
them (one bulk per 30 queries' recalls, summed per memory), three passes (three minutes of a
busy agent's traffic, coalescing or not: each memory written at most once a bulk), the node left
to settle; then the same 300 queries again. Only the official memories' recalls are written
(what ``reinforce_official`` stops); the user memories' are counted.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from datetime import datetime, timezone

import httpx

from bench import latency as lat
from bench.common import make_kemem, stamp
from kemem_es.store.reinforce import Reinforcements, recall_keys
from kemem_es.store.scope import Scope

PREFIX, OUT = sys.argv[1], sys.argv[2]
PROBE, LOAD, PER_BULK, PASSES, SETTLE_S = 300, 2000, 30, 3, 30
km = make_kemem(PREFIX)
km.warm_up()
url = km.settings.url
rng = random.Random(29)
texts = lat.scale.queries(PROBE + LOAD, 43)


def user() -> str:
    return "u00000" if rng.random() < 0.1 else f"u{rng.randrange(1, 200):05d}"


probe = [(t, user()) for t in texts[:PROBE]]
load = [(t, user()) for t in texts[PROBE:]]


def segments() -> dict[str, dict[str, int]]:
    got = httpx.get(
        f"{url}/_cat/indices/{PREFIX}-*?format=json&h=index,docs.deleted,segments.count&bytes=b"
    ).json()
    rows = [r for r in got if "events" in r["index"] or "entities" in r["index"]]
    return {
        r["index"].removeprefix(PREFIX + "-"): {
            "deleted": int(r["docs.deleted"]),
            "segments": int(r["segments.count"]),
        }
        for r in rows
    }


def idle_ms_per_s(seconds: float = 15.0) -> float:
    e0 = lat.engine_cpu_ms(km)
    time.sleep(seconds)
    return (lat.engine_cpu_ms(km) - e0) / seconds


def measure(label: str) -> dict:
    for t, u in probe[:30]:  # warm the caches this state needs
        km.query(t, agent_id="a1", user_id=u, limit=5)
    idle = idle_ms_per_s()
    e0, w0 = lat.engine_cpu_ms(km), time.perf_counter()
    ms = []
    for t, u in probe:
        t0 = time.perf_counter()
        km.query(t, agent_id="a1", user_id=u, limit=5)
        ms.append((time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - w0
    cpu = (lat.engine_cpu_ms(km) - e0 - idle * wall) / PROBE
    row = {"state": label, "p50_ms": round(statistics.median(ms), 2),
           "p90_ms": round(statistics.quantiles(ms, n=10)[-1], 2),
           "engine_cpu_ms_per_query": round(cpu, 2), "idle_ms_per_s": round(idle, 1),
           "indices": segments()}  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


rows = [measure("merged")]
prefix = km.settings.index_prefix
official = Scope.of(agent_id="a1", db="official")
keys_by_query, user_recalls = [], 0
for t, u in load:
    r = km.query(t, agent_id="a1", user_id=u, limit=5)
    user_scope = Scope.of(agent_id="a1", user_id=u, db="user")
    keys = recall_keys(prefix, user_scope, official, r, with_official=True)
    user_recalls += sum(1 for k in keys if "-user-" in k[0])
    keys_by_query.append([k for k in keys if "-official-" in k[0]])
writes = Reinforcements(km.engine)
now = datetime.now(timezone.utc).isoformat()
written, t0 = 0, time.perf_counter()
for _ in range(PASSES):
    for i in range(0, LOAD, PER_BULK):
        queued: dict = {}
        for keys in keys_by_query[i : i + PER_BULK]:
            for k in keys:
                queued.setdefault(k, [0, now])[0] += 1
        written += writes.write(queued, {}, 15.0)
write_s = time.perf_counter() - t0
time.sleep(SETTLE_S)
summary = {"load_queries": LOAD, "passes": PASSES,
           "official_recalls_per_query": round(sum(map(len, keys_by_query)) / LOAD, 2),
           "user_recalls_per_query": round(user_recalls / LOAD, 2),
           "official_writes": written, "write_seconds": round(write_s, 1)}  # fmt: skip
print(json.dumps(summary), flush=True)
rows.append(measure("after official reinforcement"))
t0 = time.perf_counter()
httpx.post(f"{url}/{PREFIX}-official-*/_forcemerge?max_num_segments=1", timeout=3600)
merge_s = time.perf_counter() - t0
rows.append(measure("merged again"))
out = {"prefix": PREFIX, "summary": summary, "rows": rows, "forcemerge_s": round(merge_s, 1),
       "stamp": stamp(km)}  # fmt: skip
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
