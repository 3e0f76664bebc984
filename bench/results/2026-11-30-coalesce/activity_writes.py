"""Documents the engine indexes for users' activity alone (``reinforce=False``), with and without
coalescing: the classic load's queries (one in ten for the heavy user, the rest for 199 light
users; limit 5), 500 a run, sequential, the variants in turn, each closed (what waits written)
before the node's indexing counter is read.

    python bench/results/2026-11-30-coalesce/activity_writes.py bench-lead-lat-100000 out.json
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
N = 500
texts = lat.scale.queries(N * 4, 51)
rng = random.Random(29)
users = ["u00000" if rng.random() < 0.1 else f"u{rng.randrange(1, 200):05d}" for _ in texts]


def indexed(url: str) -> int:
    d = json.load(urllib.request.urlopen(f"{url}/_nodes/stats/indices"))
    return int(next(iter(d["nodes"].values()))["indices"]["indexing"]["index_total"])


rows = []
for i, coalesce in enumerate((0.0, 60.0, 0.0, 60.0)):
    km = make_kemem(PREFIX, reinforce_coalesce_s=coalesce)
    url = km.engine.url
    before, w0 = indexed(url), time.perf_counter()
    for t, u in zip(texts[i * N : (i + 1) * N], users[i * N : (i + 1) * N], strict=True):
        km.query(t, agent_id="a1", user_id=u, limit=5)
    wall = time.perf_counter() - w0
    km.close()
    time.sleep(2)
    row = {"coalesce_s": coalesce, "queries": N, "seconds": round(wall, 1),
           "docs_indexed": indexed(url) - before}  # fmt: skip
    rows.append(row)
    print(json.dumps(row), flush=True)
with open(OUT, "w", encoding="utf-8") as f:
    json.dump({"rows": rows, "stamp": stamp(km)}, f, indent=1)
