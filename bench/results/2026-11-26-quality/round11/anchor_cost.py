"""Round 11, anchor feedback: what the vector codes cost the event request on the 100k store.

    KEMEM_ES_URL=http://127.0.0.1:9261 KEMEM_MODEL_DIR=../shared/models/m3e-small-onnx \\
        python bench/results/2026-11-26-quality/round11/anchor_cost.py

The event requests of the latency benchmark's queries (bench.latency's scenarios, limit 10, on
the store ``bench-lat-r11-100000`` that ``bench.latency_ab build`` made) are captured, then each
is sent again with and without ``docvalue_fields: [vector_code]``, alternately, so both see the
same cache state; median ms of the engine round trip per scenario, three passes. With limit 10
the feedback's window (10) adds no hits: the codes are the whole difference.
"""

from __future__ import annotations

import statistics
import time

from bench import latency as lat
from bench.common import make_kemem
from kemem_es.store.layout import VECTOR_CODE_FIELD

km = make_kemem("bench-lat-r11-100000")
captured = lat.event_requests(km, lat.scale.queries(120, 11))


def strip(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "docvalue_fields"}


for n in range(3):
    cells: dict[str, dict[bool, list[float]]] = {}
    for name, (index, body, routing, *_) in captured:
        for codes in (False, True) if n % 2 == 0 else (True, False):
            b = {**strip(body), "docvalue_fields": [VECTOR_CODE_FIELD]} if codes else strip(body)
            t0 = time.perf_counter()
            km.engine.client.search(index=index, body=b, routing=routing)
            cells.setdefault(name, {}).setdefault(codes, []).append(
                (time.perf_counter() - t0) * 1000
            )
    print(
        f"pass {n}: "
        + "  ".join(
            f"{name} {statistics.median(c[False]):.2f} → {statistics.median(c[True]):.2f} ms"
            for name, c in cells.items()
        )
    )
