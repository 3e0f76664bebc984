"""Round 15: what reading ``_source`` costs an event search (the bound on what fetching stored
fields instead could save). The benchmark's queries run once through ``Kemem.query`` on a kept
100k store to capture the exact event-search bodies; each body is then sent alone, in turns,
as sent (``_source``: the named fields) and with ``_source: false`` (the same hits, doc values
only), and the engine's ``took`` compared.

    python bench/results/2026-11-26-quality/round15/fetch_cost.py bench-lat-ab-100000 per_user
"""

from __future__ import annotations

import statistics
import sys

from bench import latency as lat
from bench.common import make_kemem
from bench.profile_query import Capture


def main() -> None:
    prefix, scenario = sys.argv[1], sys.argv[2]
    km = make_kemem(prefix)
    cap = Capture(km.engine)
    texts = lat.scale.queries(60, 11)
    lat.run_queries(km, texts[:10], lat.SCENARIOS[scenario])
    cap.msearches.clear()
    lat.run_queries(km, texts[10:], lat.SCENARIOS[scenario])
    took: dict[str, list[float]] = {"source": [], "no_source": []}
    hits = []
    for searches in cap.msearches:
        for index, body, *routing in searches:
            for _ in range(3):
                for name, b in (("source", body), ("no_source", {**body, "_source": False})):
                    resp = km.engine.search(index, b, routing=routing[0] if routing else None)
                    took[name].append(resp["took"])
            hits.append(len(resp["hits"]["hits"]))
    a, b = statistics.median(took["source"]), statistics.median(took["no_source"])
    print(
        f"{prefix} {scenario}: {len(hits)} event searches, median {statistics.median(hits)} "
        f"hits each; took median {a} ms with _source, {b} ms without "
        f"(mean {statistics.mean(took['source']):.2f} / {statistics.mean(took['no_source']):.2f})"
    )


if __name__ == "__main__":
    main()
