"""Round 3's raw probe of HNSW insertion cost: bulk 20k unit vectors (the benchmark's vector
pool + noise) into fresh one-shard lucene indices of each (space, ef_construction), with the
engine process's CPU from /proc and recall@10 of 200 queries against exact dot products.

    python hnsw_space.py <engine pid> [port]

(Tidied for the repository's lint after the run: the same configurations and sizes; the
recall queries are drawn from their own seed.)
"""

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import orjson

N = 20_000
CONFIGS = [("cosinesimil", 128), ("innerproduct", 128), ("cosinesimil", 100), ("innerproduct", 100)]


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mapping(space: str, efc: int) -> dict:
    method = {"name": "hnsw", "engine": "lucene", "space_type": space}
    method["parameters"] = {"m": 16, "ef_construction": efc}
    settings = {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0}
    settings["refresh_interval"] = "-1"
    vector = {"type": "knn_vector", "dimension": 512, "method": method}
    return {"settings": settings, "mappings": {"properties": {"v": vector}}}


def run(c: httpx.Client, java: int, vecs: np.ndarray, space: str, efc: int) -> None:
    name = f"bench-hnsw-{space}-{efc}"
    c.delete(f"/{name}")
    c.put(f"/{name}", json=mapping(space, efc)).raise_for_status()
    bodies = []
    for lo in range(0, N, 512):
        lines = [
            orjson.dumps({"index": {"_id": str(i)}}) + b"\n" + orjson.dumps({"v": vecs[i].tolist()})
            for i in range(lo, min(lo + 512, N))
        ]
        bodies.append(b"\n".join(lines) + b"\n")
    headers = {"content-type": "application/x-ndjson"}
    j0, t0 = cpu(java), time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        for r in ex.map(lambda b: c.post(f"/{name}/_bulk", content=b, headers=headers), bodies):
            r.raise_for_status()
    c.post(f"/{name}/_refresh")
    dt, jc = time.perf_counter() - t0, cpu(java) - j0
    rng = np.random.default_rng(3)
    queries = vecs[rng.integers(0, N, 200)] + rng.normal(0, 0.02, (200, 512)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    hits = 0
    for q in queries:
        exact = set(np.argsort(-(vecs @ q))[:10].astype(str))
        body = {
            "size": 10,
            "_source": False,
            "query": {"knn": {"v": {"vector": q.tolist(), "k": 10}}},
        }
        got = c.post(f"/{name}/_search", json=body).json()["hits"]["hits"]
        hits += len(exact & {h["_id"] for h in got})
    print(
        f"{space:12s} efc={efc}: wall {dt:.2f}s {N / dt:.0f} docs/s engine cpu {jc:.2f}s "
        f"({1000 * jc / N:.3f} ms/vector) recall@10 {hits / 2000:.3f}",
        flush=True,
    )
    c.delete(f"/{name}")


def main() -> None:
    java = int(sys.argv[1])
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 9251
    pool = np.load(sorted(Path("bench/work").glob("pool-int8-*.npy"))[0]).astype(np.float32)
    rng = np.random.default_rng(1)
    vecs = pool[rng.integers(0, len(pool), N)] + rng.normal(0, 0.01, (N, 512)).astype(np.float32)
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).round(6)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
        for space, efc in CONFIGS * 3:
            run(c, java, vecs, space, efc)


if __name__ == "__main__":
    main()
