"""What writing a memory's sentence vectors costs an import: the Chinese dev sets' own event
memories (check, fresh, hard, implied: real multi-sentence companion memories), imported with
the int8 model into a fresh prefix with ``sentence_vectors`` on and off in turn, ``--runs``
rounds; wall docs/s and this process's CPU per document (the model runs here; the engine's
share is the same for both but for the codes' bytes).

    python bench/results/2026-11-30-sentences/index_cost.py --runs 3 --out index_cost.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import drop_indices, make_kemem, stamp
from bench.dialogue_eval import CORPORA, DISTRACTOR_CORPORA, event_records
from kemem_es.store.documents import MEMORY_SENTENCES
from kemem_es.text.dialogue import memory_sentences


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    probe = make_kemem("bench-sc-probe")
    rows = [
        r.model_dump(exclude_unset=True)
        for c in DISTRACTOR_CORPORA
        for r in event_records(probe, CORPORA[c] / "events.jsonl", "written")
    ]
    parts = [len(memory_sentences(r["description"], MEMORY_SENTENCES)) for r in rows]
    result: dict[str, Any] = {
        "memories": len(rows),
        "multi_sentence_share": round(sum(n >= 2 for n in parts) / len(rows), 3),
        "sentences_per_multi": round(statistics.mean([n for n in parts if n >= 2]), 2),
        "runs": {"on": [], "off": []},
    }
    for r in range(args.runs):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            km = make_kemem(f"bench-sc-{mode}", sentence_vectors=mode == "on")
            km.embedder.embed(["预热"])
            drop_indices(km)
            km.init()
            t0, c0 = time.perf_counter(), _cpu()
            km.index_records(rows, "events")
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            result["runs"][mode].append(
                {
                    "docs_s": round(len(rows) / wall, 1),
                    "client_cpu_ms_doc": round(cpu / len(rows) * 1000, 3),
                }
            )
            drop_indices(km)
    for mode in ("on", "off"):
        runs = result["runs"][mode]
        result[mode] = {
            "docs_s_median": statistics.median(x["docs_s"] for x in runs),
            "client_cpu_ms_doc_median": statistics.median(x["client_cpu_ms_doc"] for x in runs),
        }
    result["stamp"] = stamp()
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    print(
        json.dumps({k: v for k, v in result.items() if k != "stamp"}, ensure_ascii=False, indent=1)
    )


if __name__ == "__main__":
    main()
