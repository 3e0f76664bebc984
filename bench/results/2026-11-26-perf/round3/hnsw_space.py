import os, sys, time, json, numpy as np, orjson, httpx
PORT = 9251; JAVA = int(sys.argv[1])
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK")
pool = np.load(sorted(__import__("glob").glob("bench/work/pool-int8-*.npy"))[0]).astype(np.float32)
rng = np.random.default_rng(1)
N = 20000
idx = rng.integers(0, len(pool), N)
vecs = pool[idx] + rng.normal(0, 0.01, (N, pool.shape[1])).astype(np.float32)
vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
vecs = vecs.round(6)
c = httpx.Client(base_url=f"http://127.0.0.1:{PORT}", timeout=120)
from concurrent.futures import ThreadPoolExecutor
def run(space, efc, m=16):
    name = f"bench-hnsw-{space}-{efc}"
    c.delete(f"/{name}")
    c.put(f"/{name}", json=({"settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1"},
      "mappings": {"properties": {"v": {"type": "knn_vector", "dimension": 512, "method": {"name": "hnsw", "engine": "lucene", "space_type": space, "parameters": {"m": m, "ef_construction": efc}}}}}})).raise_for_status()
    bodies = []
    for lo in range(0, N, 512):
        lines = b""
        for i in range(lo, min(lo+512, N)):
            lines += orjson.dumps({"index": {"_id": str(i)}}) + b"\n" + orjson.dumps({"v": vecs[i].tolist()}) + b"\n"
        bodies.append(lines)
    j0, t0 = cpu(JAVA), time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda b: c.post(f"/{name}/_bulk", content=b, headers={"content-type": "application/x-ndjson"}).raise_for_status(), bodies))
    c.post(f"/{name}/_refresh")
    dt = time.perf_counter() - t0; jc = cpu(JAVA) - j0
    # recall@10 vs exact on 200 queries
    q = vecs[rng.integers(0, N, 200)] + rng.normal(0, 0.02, (200, 512)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    hit = 0
    for qq in q:
        exact = set(np.argsort(-(vecs @ qq))[:10].astype(str))
        r = c.post(f"/{name}/_search", json={"size": 10, "_source": False, "query": {"knn": {"v": {"vector": qq.tolist(), "k": 10}}}}).json()
        hit += len(exact & {h["_id"] for h in r["hits"]["hits"]})
    print(f"{space:12s} efc={efc} m={m}: wall {dt:.2f}s  {N/dt:.0f} docs/s  engine cpu {jc:.2f}s ({1000*jc/N:.3f} ms/doc)  recall@10 {hit/2000:.3f}", flush=True)
    c.delete(f"/{name}")
for space, efc in [("cosinesimil",128),("innerproduct",128),("cosinesimil",100),("innerproduct",100)]*3:
    run(space, efc)
