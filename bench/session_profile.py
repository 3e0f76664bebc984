"""Where a session turn's time goes: the node's own stats and the engine process's CPU around
N turns (``context()`` then the turn added, a pause between turns), the client's CPU and the
contexts' ``timings_ms``. On a kept bench.latency store, quiet machine (issue 42)::

    python -m bench.session_profile --prefix bench-lat-100000 --turns 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench import scale
from bench.common import make_kemem, stamp

STATS = {  # what is read off _nodes/stats/indices, per turn
    "query_ms": ("search", "query_time_in_millis"),
    "searches": ("search", "query_total"),
    "fetch_ms": ("search", "fetch_time_in_millis"),
    "get_ms": ("get", "time_in_millis"),
    "gets": ("get", "total"),
    "index_ms": ("indexing", "index_time_in_millis"),
    "indexed": ("indexing", "index_total"),
    "refresh_ms": ("refresh", "total_time_in_millis"),
    "refreshes": ("refresh", "total"),
    "merge_ms": ("merges", "total_time_in_millis"),
}


def node_stats(url: str) -> dict[str, float]:
    nodes = httpx.get(f"{url}/_nodes/stats/indices", timeout=30).json()["nodes"]
    (node,) = nodes.values()
    return {k: float(node["indices"][a][b]) for k, (a, b) in STATS.items()}


def sessions_stats(url: str, prefix: str) -> dict[str, float]:
    """The sessions index's own counters (``<prefix>-sessions*/_stats``): what a turn costs
    there, apart from anything else on the node."""
    got = httpx.get(f"{url}/{prefix}-sessions*/_stats/get,refresh,search,indexing", timeout=30)
    prim = got.json()["_all"]["primaries"]
    return {k: float(prim[a][b]) for k, (a, b) in STATS.items() if a in prim}


def engine_cpu_ms(url: str) -> float:
    nodes = httpx.get(f"{url}/_nodes/process", timeout=10).json()["nodes"]
    (node,) = nodes.values()
    pid = int(node["process"]["id"])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 10.0  # clock ticks of 10 ms


def run(prefix: str, turns: int, pause: float, user: str) -> dict[str, Any]:
    km = make_kemem(prefix)
    km.warm_up()
    url = km.settings.url
    texts = scale.queries(turns + 6, 17)
    who = {"user_id": user, "agent_id": "a1"}
    sid = f"profile-{time.time_ns()}"
    ms: dict[str, list[float]] = {"context": [], "add": []}
    timings: list[dict[str, float]] = []
    sent = {"mget_docs": 0, "mgets": 0, "refresh_calls": 0}

    def hook(req: Any, answer: Any, seconds: float) -> None:  # what the client asked for
        if req.path.endswith("/_mget") and isinstance(req.body, dict):
            sent["mgets"] += 1
            sent["mget_docs"] += len(req.body.get("docs") or req.body.get("ids") or [])
        elif req.path.endswith("/_refresh"):
            sent["refresh_calls"] += 1

    km.engine.hook = hook

    def turn(text: str, keep: bool) -> None:
        t0 = time.perf_counter()
        ctx = km.context(text, session_id=sid, max_tokens=2000, **who)
        t1 = time.perf_counter()
        reply = "嗯嗯，我记得。" + text[-6:]
        messages = [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        km.add(messages, session_id=sid, **who)
        if keep:
            ms["context"].append((t1 - t0) * 1000)
            ms["add"].append((time.perf_counter() - t1) * 1000)
            timings.append(dict(ctx.timings_ms))

    for text in texts[:6]:  # a window to start with
        turn(text, False)
    time.sleep(2)
    s0, e0, c0 = node_stats(url), engine_cpu_ms(url), time.process_time()
    x0, q0 = sessions_stats(url, km.settings.index_prefix), dict(sent)
    for text in texts[6:]:
        turn(text, True)
        time.sleep(pause)
    time.sleep(3)  # the last window job and extraction
    s1, e1, c1 = node_stats(url), engine_cpu_ms(url), time.process_time()
    x1, q1 = sessions_stats(url, km.settings.index_prefix), dict(sent)
    keys = sorted({k for t in timings for k in t})
    return {
        **stamp(km),
        "prefix": prefix,
        "turns": turns,
        "pause_s": pause,
        "engine_cpu_ms_per_turn": round((e1 - e0) / turns, 1),
        "client_cpu_ms_per_turn": round((c1 - c0) * 1000 / turns, 1),
        "context_p50_ms": round(statistics.median(ms["context"]), 1),
        "context_max_ms": round(max(ms["context"]), 1),
        "add_p50_ms": round(statistics.median(ms["add"]), 1),
        "sessions_index_per_turn": {k: round((x1[k] - x0[k]) / turns, 2) for k in x0},
        "client_sent_per_turn": {k: round((q1[k] - q0[k]) / turns, 2) for k in q0},
        "engine_per_turn": {k: round((s1[k] - s0[k]) / turns, 2) for k in s0},
        "context_timings_p50_ms": {
            k: round(statistics.median([t.get(k, 0.0) for t in timings]), 1) for k in keys
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", required=True, help="a kept bench.latency store")
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--pause", type=float, default=0.5, help="seconds between turns")
    ap.add_argument("--user", default="u00009", help="a light user of the store")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = run(args.prefix, args.turns, args.pause, args.user)
    print(json.dumps(result, ensure_ascii=False, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
