"""Round 13: how far in time the relevant memories fusion misses lie from its best hit, against
the non-relevant ones it ranks 2–10 (read off a ``bench.dialogue_eval`` result's top 10s).

    python bench/results/2026-11-26-quality/round13/time_neighbours.py RESULT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from datetime import datetime

import bench.dialogue_eval as de
from kemem_es.kemem import DEMO_FILES, demo_path

SETS = {"short": ("recall", "situational"), "long": ("long",)}


def times() -> dict[str, datetime]:
    """Every dialogue-corpus event's time (bench/dialogue's extra files and the bundled demo)."""
    paths = [*de.CORPORA["zh"].glob("*.jsonl")]
    paths += [demo_path(name) for name, kind, _ in DEMO_FILES if kind == "events"]
    out = {}
    for p in paths:
        for line in p.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            if "description" in d:
                out[d["id"]] = datetime.fromisoformat(d["created_at"])
    return out


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        top10 = json.load(f)["modes"]["fusion"]["top10"]
    gold, when = de.qrels("zh"), times()
    for name, styles in SETS.items():
        missed, other = [], []
        for q in de.load_queries(styles=styles):
            ranked, g = top10[q["qid"]], gold[q["qid"]]
            if not ranked or ranked[0] not in when:
                continue
            t0 = when[ranked[0]]
            missed += [abs((when[d] - t0).days) for d in g if d not in ranked[:5] and d in when]
            other += [abs((when[d] - t0).days) for d in ranked[1:] if d not in g and d in when]
        for label, gaps in (("relevant, missed from the top 5", missed), ("other, 2-10", other)):
            print(
                f"{name} {label}: n {len(gaps)}, median {statistics.median(gaps)} days, "
                f"within 3 days {sum(x <= 3 for x in gaps)}, within 14 {sum(x <= 14 for x in gaps)}"
            )


if __name__ == "__main__":
    main()
