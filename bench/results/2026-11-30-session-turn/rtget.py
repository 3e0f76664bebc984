"""Does a real-time get of a document written since the last refresh make OpenSearch refresh?

    python bench/results/2026-11-30-session-turn/rtget.py   (a node on :9151; its own index)

One small index, one document (a session state's size: a 2 KB summary and a 512-float window
vector): 300 times, the document written, 10 ms, then read — not at all, real time, not real
time (``realtime=false``), or by a no-op ``_update`` returning the source — twice over; then
the index's refresh and get counters. Output: rtget.txt.
"""

import json
import time
from pathlib import Path

import httpx

U = "http://127.0.0.1:9151"
IDX = "bench-rtget-probe"
c = httpx.Client(timeout=30)
c.delete(f"{U}/{IDX}")
c.put(f"{U}/{IDX}", json={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})


def cpu():
    pid = next(iter(c.get(f"{U}/_nodes/process").json()["nodes"].values()))["process"]["id"]
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 10


doc = {"summary": "x" * 2000, "window_vector": {"v": [0.01234] * 512}, "next_seq": 1}


def run(mode, n=300):
    e0 = cpu()
    t0 = time.perf_counter()
    lat = []
    for i in range(n):
        doc["next_seq"] = i
        c.put(f"{U}/{IDX}/_doc/s1", json=doc)
        time.sleep(0.01)
        t1 = time.perf_counter()
        if mode == "realtime":
            c.get(f"{U}/{IDX}/_doc/s1")
        elif mode == "nonrealtime":
            c.get(f"{U}/{IDX}/_doc/s1", params={"realtime": "false"})
        elif mode == "noop-update":
            c.post(f"{U}/{IDX}/_update/s1", params={"_source": "true"}, json={"doc": {}})
        lat.append((time.perf_counter() - t1) * 1000)
    lat.sort()
    return {
        "mode": mode,
        "engine_cpu_ms_per_iter": round((cpu() - e0) / n, 2),
        "read_p50_ms": round(lat[n // 2], 2),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


print(c.post(f"{U}/{IDX}/_update/s0", params={"_source": "true"}, json={"doc": {}}).text[:200])
c.put(f"{U}/{IDX}/_doc/s1", json=doc)
r = c.post(f"{U}/{IDX}/_update/s1", params={"_source": "true"}, json={"doc": {}}).json()
print({k: v for k, v in r.items() if k != "get"}, "get" in r)
for _rnd in range(2):
    for m in ["none", "realtime", "nonrealtime", "noop-update"]:
        print(json.dumps(run(m)))
stats = c.get(f"{U}/{IDX}/_stats/refresh,get").json()["_all"]["primaries"]
print(stats)
c.delete(f"{U}/{IDX}")
