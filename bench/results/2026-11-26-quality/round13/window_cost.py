"""Round 13: what the contiguity window costs the event request on the 100k store.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round13/window_cost.py

The event requests of the latency benchmark's queries (bench.latency's scenarios, limit 10, on
the store ``bench.latency_ab build`` made) are captured, then each is sent again in every
variant below, the variants' order rotating per pass so that each sees every cache state; the
median ms of the client's round trip (request, engine, JSON parsing) per scenario.
"""

from __future__ import annotations

import statistics
import time

from bench import latency as lat
from bench.common import make_kemem
from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD

km = make_kemem("bench-lat-ab-100000")
captured = lat.event_requests(km, lat.scale.queries(120, 11), ("per_user", "large_approx"))

TIME = {"field": TIME_FIELD, "format": "epoch_millis"}
VARIANTS = {
    "10 hits, codes (before)": (10, [VECTOR_CODE_FIELD]),
    "30 hits, codes + times": (30, [VECTOR_CODE_FIELD, TIME]),
    "30 hits, times only": (30, [TIME]),
    "20 hits, codes + times": (20, [VECTOR_CODE_FIELD, TIME]),
}


def variant(body: dict, size: int, fields: list) -> dict:
    out = {k: v for k, v in body.items() if k != "docvalue_fields"}
    out["size"] = size
    if "rescore" in out:
        out["rescore"] = {**out["rescore"], "window_size": max(out["rescore"]["window_size"], size)}
    return {**out, "docvalue_fields": fields}


names = list(VARIANTS)
for n in range(3):
    cells: dict[str, dict[str, list[float]]] = {}
    order = names[n % len(names) :] + names[: n % len(names)]
    for scenario, (index, body, routing, *_) in captured:
        for v in order:
            b = variant(body, *VARIANTS[v])
            t0 = time.perf_counter()
            km.engine.client.search(index=index, body=b, routing=routing)
            cells.setdefault(scenario, {}).setdefault(v, []).append(
                (time.perf_counter() - t0) * 1000
            )
    for scenario, c in cells.items():
        print(f"pass {n} {scenario}: " + "  ".join(
            f"{v} {statistics.median(ms):.2f}" for v, ms in c.items()
        ))  # fmt: skip
