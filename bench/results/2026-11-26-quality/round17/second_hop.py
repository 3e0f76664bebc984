"""Round 17: a second hop. A question that names one memory by another ("the person whose
birthday is 23 Oct — their e-mail?", "the event with 2,000 people — how long is it?") needs
the memory that bridges them first. Ask fusion once; ask again with the best hit's text as
the dialogue context (the package's own context path); merge the two lists.

    python bench/results/2026-11-26-quality/round17/second_hop.py PREFIX [pooled|user] [N]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from bench.common import make_kemem
from bench.evalset import EvalSet, mean_metrics, metrics, source_file
from bench.memdaily import AGENT, POOL, sample


def main() -> None:
    prefix, setting = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    km = make_kemem(prefix)
    es = EvalSet.load("/work/shared/data/dev/memdaily")
    qs = sample(list(es.queries), n, seed=1)
    pooled = setting == "pooled"

    def ask(q: dict[str, Any], **extra: Any) -> Any:
        user = POOL + source_file(q["namespace"]) if pooled else q["namespace"]
        return km.query(
            q["text"],
            user_id=user,
            agent_id=AGENT,
            limit=20,
            score_threshold=0.0,
            entity_limit=0,
            now=datetime.fromisoformat(q["timestamp"]),
            reinforce=False,
            **extra,
        )

    def one(q: dict[str, Any]) -> dict[str, Any]:
        r1 = ask(q)
        hits1 = r1.memory_events
        out: dict[str, Any] = {"type": q["meta"]["question_type"]}
        gold = {(POOL + k if pooled else k): v for k, v in es.qrels[q["qid"]].items()}
        out["gold"] = gold
        out["r1"] = [h.index for h in hits1]
        out["s1"] = [h.score for h in hits1]
        if hits1:
            r2 = ask(q, context=[hits1[0].description])
            out["r2"] = [h.index for h in r2.memory_events]
            out["s2"] = [h.score for h in r2.memory_events]
            r3 = ask(q, context=[h.description for h in hits1[:2]])
            out["r3"] = [h.index for h in r3.memory_events]
        else:
            out["r2"] = out["r3"] = out["s2"] = []
        return out

    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(one, qs))

    def rrf(*lists: list[str], k: int = 60) -> list[str]:
        s: dict[str, float] = defaultdict(float)
        for li in lists:
            for i, d in enumerate(li):
                s[d] += 1 / (k + i + 1)
        return sorted(s, key=lambda d: -s[d])

    def keep_first(a: list[str], b: list[str]) -> list[str]:
        return a[:1] + [d for d in b if d not in a[:1]]

    variants = {
        "fusion": lambda r: r["r1"],
        "hop(ctx top1)": lambda r: r["r2"],
        "hop(ctx top2)": lambda r: r["r3"],
        "first + hop1": lambda r: keep_first(r["r1"], r["r2"]),
        "rrf(r1,hop1)": lambda r: rrf(r["r1"], r["r2"]),
        "rrf(r1,hop2)": lambda r: rrf(r["r1"], r["r3"]),
    }
    for name, f in variants.items():
        by: dict[str, list] = defaultdict(list)
        for r in rows:
            m = metrics(f(r)[:10], r["gold"])
            by["all"].append(m)
            by[r["type"]].append(m)
        print(
            f"{name:16s}",
            {k: round(mean_metrics(v)["recall@5"], 4) for k, v in sorted(by.items())},
            flush=True,
        )


if __name__ == "__main__":
    main()
