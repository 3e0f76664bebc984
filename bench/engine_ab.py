"""What two code versions ask of the engine for the same turns, replayed side by side.

A busy 2-core machine makes end-to-end timings of two trees, run one after the other, hard to
compare. This splits the two: ``capture`` records the event searches this tree sends for each
turn of ``bench.latency``'s rolling conversation (the bare utterance, and the chat turn with its
6 earlier turns, window prepared as a session's ``context()`` does); ``replay`` sends several
captures' requests to the engine interleaved, turn by turn (order alternating), and reports per
variant the wall time, the engine's ``took`` and the engine process's own CPU time per request
(from /proc: the node must be serving this replay alone)::

    cd <before tree> && PYTHONPATH=$PWD python <this file> capture --prefix P --out before.json
    python -m bench.engine_ab capture --prefix P --out after.json
    python -m bench.engine_ab replay before.json after.json --rounds 3 --out replay.json

The file runs from either tree (as a script, it imports ``bench`` from the path). ``P``: a
kept ``bench.latency`` store, e.g. ``bench-lat-100000``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench import scale
from bench.common import make_kemem, stamp
from bench.latency import QUERY_OPTS, SCENARIOS, chat_contexts

WARMUP = 20  # turns asked (and captured) before the measured ones, as bench.latency


def capture(prefix: str, queries: int, seed: int) -> dict[str, Any]:
    """Every event search this tree sends for each turn, bare and as a chat turn."""
    km = make_kemem(prefix)
    engine = km.searcher.engine
    sent: list[list[list[Any]]] = []
    msearch = engine.msearch

    def recording(searches: Any) -> Any:
        sent.append([list(s) for s in searches])
        return msearch(searches)

    engine.msearch = recording  # type: ignore[method-assign]
    texts = scale.queries(WARMUP + queries, seed + 4)
    base = {**QUERY_OPTS, **SCENARIOS["per_user"]}
    turns = []
    for text, ctx in zip(texts, chat_contexts(texts), strict=True):
        window = ctx + "\n助手：好的，我在。"  # after the agent's reply, as bench.latency
        km.prepare_context(window, context_vector="split")
        row = {}
        for name, extra in (("bare", {}), ("chat", {"context": window, "context_vector": "split"})):
            sent.clear()
            km.query(text, agent_id="a1", **base, **extra)
            row[name] = [s for call in sent for s in call if s[0].endswith("-events")]
        turns.append(row)
    return {**stamp(km), "prefix": prefix, "turns": turns}


def engine_pid(url: str) -> int:
    """The engine's process id, by the node's own account (the replay reads its CPU time)."""
    nodes = httpx.get(f"{url}/_nodes/process", timeout=10).json()["nodes"]
    (node,) = nodes.values()
    return int(node["process"]["id"])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay(paths: list[Path], url: str, rounds: int) -> dict[str, Any]:
    captures = [json.loads(p.read_text()) for p in paths]
    names = [p.stem for p in paths]
    pid = engine_pid(url)
    client = httpx.Client(base_url=url, timeout=120)

    def send(searches: list[list[Any]]) -> tuple[float, float, int]:
        lines = []
        for s in searches:
            head = {"index": s[0], **({"routing": s[2]} if len(s) > 2 and s[2] else {})}
            lines += [json.dumps(head), json.dumps(s[1], ensure_ascii=False)]
        cpu, start = cpu_seconds(pid), time.perf_counter()
        resp = client.post(
            "/_msearch",
            content="\n".join(lines) + "\n",
            headers={"content-type": "application/x-ndjson"},
        )
        wall, cpu = (time.perf_counter() - start) * 1000, (cpu_seconds(pid) - cpu) * 1000
        resp.raise_for_status()
        return wall, cpu, sum(int(r["took"]) for r in resp.json()["responses"])

    variants = {"bare": captures[0]} | {
        f"chat:{n}": c for n, c in zip(names, captures, strict=True)
    }
    out: dict[str, dict[str, list[float]]] = {
        v: {"wall": [], "cpu": [], "took": []} for v in variants
    }
    turns = len(captures[0]["turns"])
    for rd in range(rounds):
        for i in range(turns):
            order = list(variants.items())
            if (i + rd) % 2:
                order.reverse()
            for name, cap in order:
                wall, cpu, took = send(cap["turns"][i]["bare" if name == "bare" else "chat"])
                if rd or i >= WARMUP:
                    for key, value in (("wall", wall), ("cpu", cpu), ("took", took)):
                        out[name][key].append(value)
    bare = statistics.median(out["bare"]["wall"])
    table = {
        name: {
            "n": len(v["wall"]),
            "wall_p50_ms": round(statistics.median(v["wall"]), 2),
            "wall_x_bare": round(statistics.median(v["wall"]) / bare, 3),
            "took_p50_ms": statistics.median(v["took"]),
            "engine_cpu_mean_ms": round(statistics.mean(v["cpu"]), 2),
        }
        for name, v in out.items()
    }
    return {
        **stamp(),
        "captures": {
            n: {"commit": c["versions"].get("git_commit")}
            for n, c in zip(names, captures, strict=True)
        },
        "rounds": rounds,
        "load_after": os.getloadavg(),
        "variants": table,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("--prefix", required=True, help="a kept bench.latency store")
    cap.add_argument("--queries", type=int, default=200)
    cap.add_argument("--seed", type=int, default=7)
    cap.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("replay")
    rep.add_argument("captures", type=Path, nargs="+", help="the first one's bare turns too")
    rep.add_argument("--url", default=None, help="default: the configured engine")
    rep.add_argument("--rounds", type=int, default=3)
    rep.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.action == "capture":
        result = capture(args.prefix, args.queries, args.seed)
        args.out.write_text(json.dumps(result, ensure_ascii=False) + "\n")
        print(f"{len(result['turns'])} turns captured", file=sys.stderr)
        return
    from kemem_es.config import get_settings

    url = args.url or get_settings().url
    result = replay(args.captures, url, args.rounds)
    print(json.dumps(result["variants"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
