"""Round 10, anchor feedback (not adopted): what returning the hits' vectors costs.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round10/anchor_cost.py

The event request of 300 dialogue dev queries (store ``bench-q6-zh``) is captured, then sent
again as it is with size 10 or 20, with and without ``vector`` in ``_source``; median ms of the
engine round trip, three passes.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime

from bench import dialogue_eval as de
from bench.common import make_kemem
from kemem_es.search import events as ev

km = make_kemem("bench-q6-zh")
bodies = []
send = km.engine.msearch


def capture(searches):
    bodies.append(searches[0])
    return send(searches)


km.engine.msearch = capture
for q in de.load_queries(corpus="zh")[:300]:
    text, context = de.query_text(q)
    now = datetime.fromisoformat(q["now"])
    scope = {"user_id": q["user_id"], "agent_id": q["agent_id"], "now": now}
    km.query(text, context=context, limit=20, score_threshold=0.0, **scope)
km.engine.msearch = send


def median_ms(size: int, with_vectors: bool) -> float:
    times = []
    for index, body, routing in bodies:
        b = {**body, "size": size, "_source": ev.SOURCE_FIELDS + ["vector"] * with_vectors}
        t0 = time.perf_counter()
        km.engine.client.search(index=index, body=b, routing=routing)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


for n in range(3):
    cells = [(s, v, median_ms(s, v)) for s in (10, 20) for v in (False, True)]
    print(n, "  ".join(f"size {s}{' + vectors' * v}: {ms} ms" for s, v, ms in cells))
