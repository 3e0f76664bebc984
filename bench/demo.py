"""Demo-corpus numbers: indexing docs/s (int8 vs fp32 embedding) and query latency per stage.

python -m bench.demo [--queries 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.common import drop_indices, make_kemem, stage_table, stamp
from kemem_es.kemem import DEMO_FILES, demo_path

PAIRS = [
    ("u_mumu", "qiyu"),
    ("u_mumu", "lishen"),
    ("u_xiaoman", "lishen"),
    ("u_chengcheng", "qiyu"),
]
UTTERANCES = [
    "室友失恋了，我们陪她吃了一晚上火锅",
    "最近胃不舒服，是不是又吃太辣了",
    "下周就是我的生日了，你会送我什么",
    "今天去看了演唱会，嗓子都喊哑了",
    "我想学画画，但总觉得自己没天赋",
    "猫咪今天不肯吃饭，有点担心",
    "加班到十一点，好累啊",
    "你还记得我们第一次见面吗",
    "春节回家被亲戚催婚了",
    "下雨天最适合喝一杯热咖啡",
    "考试没考好，心情很差",
    "周末想去海边走走",
]


def index_throughput(variant: str) -> dict:
    km = make_kemem(f"bench-demo-{variant}", variant=variant)
    drop_indices(km)
    km.init()
    km.embedder.embed(["预热"])  # load the model outside the timing
    docs = secs = 0.0
    per_file = {}
    for name, kind, db in DEMO_FILES:
        rep = km.index_file(demo_path(name), kind, db)
        per_file[name] = round(rep.docs_per_s, 1)
        docs += rep.written
        secs += rep.seconds
    return {
        "km": km,
        "docs": int(docs),
        "seconds": round(secs, 3),
        "docs_per_s": round(docs / secs, 1),
        "per_file": per_file,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    results: dict = {"stamp": stamp()}
    runs = {v: index_throughput(v) for v in ("int8", "fp32")}
    results["indexing"] = {v: {k: r[k] for k in r if k != "km"} for v, r in runs.items()}
    drop_indices(runs["fp32"]["km"])

    km = runs["int8"]["km"]
    jobs = [(u, p) for u in UTTERANCES for p in PAIRS]
    timings = []
    wall = []
    for i in range(args.warmup + args.queries):
        text, (user, agent) = jobs[i % len(jobs)]
        t0 = time.perf_counter()
        resp = km.query(text, user_id=user, agent_id=agent)
        wall.append((time.perf_counter() - t0) * 1000)
        if i >= args.warmup:
            timings.append(resp.additional_info.timings_ms)
    results["query_latency_ms"] = stage_table(timings)
    results["query_wall_ms"] = stage_table([{"total": w} for w in wall[args.warmup :]])["total"]
    drop_indices(km)

    for v, r in results["indexing"].items():
        print(f"indexing ({v}): {r['docs']} docs in {r['seconds']} s = {r['docs_per_s']} docs/s")
    print(f"{'stage':16} {'p50':>8} {'p95':>8} {'p99':>8}  (ms, {args.queries} queries)")
    for stage, p in results["query_latency_ms"].items():
        print(f"{stage:16} {p['p50']:8.2f} {p['p95']:8.2f} {p['p99']:8.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
