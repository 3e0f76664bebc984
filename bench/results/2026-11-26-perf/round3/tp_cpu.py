import os, sys, time, numpy as np
from bench import scale
from bench.latency import vector_pool, _with_vectors
from bench.common import make_kemem, drop_indices
from kemem_es import EventRecord
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK")
java = int(sys.argv[2])
n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
records = [r for b in scale.events(n, 12, "user", 0, 50) for r in b]
km = make_kemem("bench-tp-cpu")
drop_indices(km); km.init()
km.embedder.embed(["预热"]); km.tokenizer.index_text("预热")
pool = vector_pool(km, "int8", 7)
vecs = _with_vectors(records, pool, np.random.default_rng(7)).round(6)
recs = [EventRecord(**r, vector=v.tolist()) for r, v in zip(records, vecs, strict=True)]
c0, j0, t0 = cpu(os.getpid()), cpu(java), time.perf_counter()
rep = km.index_records(recs, kind="events", db="user")
dt = time.perf_counter() - t0
print(f"docs/s {n/dt:.0f}  wall {dt:.2f}s  client cpu {cpu(os.getpid())-c0:.2f}s  engine cpu {cpu(java)-j0:.2f}s  load {os.getloadavg()[0]:.2f}")
drop_indices(km)
