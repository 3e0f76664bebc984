"""CPU per chat turn, client and engine, and where the client's share goes (issue 42).

    python -m bench.profile_turn --prefix bench-perf-100000 [--queries 100] [--out prof.json]

On a kept store (``bench.latency --keep``), runs the latency benchmark's per_user utterances
sequentially through ``Kemem.query``, bare and as a chat turn with 6 earlier turns, and
reports per turn:

- client CPU ms (this process's ``process_time``) and engine CPU ms (the node's process, read
  from /proc), so the sum is what one turn costs the machine and 2 cores / that sum is the
  floor's ceiling on turns per second;
- the client's cProfile, grouped into parts (embedding model run, model tokenizer, jieba,
  expansion, request bodies, JSON, HTTP transport, pydantic, answer assembly, ...), as shares
  of the profiled time.

One process, one thread: the numbers are per turn without contention.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import latency as lat
from bench.common import cli_main, make_kemem, stamp

# (label, substring of "file:function"); the first match wins, checked on the innermost frame
# whose file belongs to a part (tottime is attributed to the function that spends it).
PARTS: tuple[tuple[str, str], ...] = (
    ("model run (onnxruntime)", "onnxruntime"),
    ("model run (onnxruntime)", "InferenceSession"),
    ("model tokenizer", "encode_batch"),
    ("jieba tokenising", "jieba"),
    ("expansion", "kemem_es/expand/"),
    ("text (keywords, dialogue)", "kemem_es/text/"),
    ("query text (words, vectors)", "kemem_es/search/query_text"),
    ("request bodies", "kemem_es/search/"),
    ("JSON encode/decode", "json"),
    ("JSON encode/decode", "orjson"),
    ("HTTP transport", "urllib3"),
    ("HTTP transport", "http/client"),
    ("HTTP transport", "socket"),
    ("HTTP transport", "ssl"),
    ("HTTP transport", "opensearchpy"),
    ("HTTP transport", "elastic_transport"),
    ("HTTP transport", "selectors"),
    ("engine client (kemem)", "kemem_es/engine/"),
    ("pydantic (params, answer)", "pydantic"),
    ("answer contract", "kemem_es/contract/"),
    ("store (scope, names, fresh)", "kemem_es/store/"),
    ("numpy", "numpy"),
    ("logging/metrics", "logging"),
    ("embedder glue", "kemem_es/embed/"),
    ("Kemem API", "kemem_es/"),
)


def part_of(key: tuple[str, int, str]) -> str:
    name = f"{key[0]}:{key[2]}"
    for label, needle in PARTS:
        if needle in name:
            return label
    if key[0] == "~":  # builtins: the C function's name
        return "builtins: " + key[2].split(" of ")[0].strip("<>").split(".")[-1][:40]
    return "other python"


def engine_pid_cpu(km: Any) -> float:
    return lat.engine_cpu_ms(km)


def turns(
    km: Any, texts: Sequence[str], ctxs: Sequence[str] | None, opts: dict[str, Any]
) -> dict[str, Any]:
    """Client and engine CPU ms per turn, and the client's profile grouped by part."""
    extra: list[dict[str, Any]] = (
        [{"context": c} for c in ctxs] if ctxs is not None else [{} for _ in texts]
    )
    for t, e in list(zip(texts, extra, strict=True))[:10]:  # warm the caches of this shape
        km.query(t, agent_id="a1", **lat.QUERY_OPTS, **opts, **e)
    # first without the profiler (its overhead would count): CPU per turn and stage times
    c0, e0, w0 = time.process_time(), engine_pid_cpu(km), time.perf_counter()
    totals = []
    for t, e in zip(texts, extra, strict=True):
        resp = km.query(t, agent_id="a1", **lat.QUERY_OPTS, **opts, **e)
        totals.append(resp.additional_info.timings_ms)
    wall = time.perf_counter() - w0
    client_ms = (time.process_time() - c0) * 1000 / len(texts)
    engine_ms = (engine_pid_cpu(km) - e0) / len(texts)
    # then again under cProfile (CPU clock, not waiting): the shares of the client's time
    prof = cProfile.Profile(time.process_time)
    for t, e in zip(texts, extra, strict=True):
        prof.enable()
        km.query(t, agent_id="a1", **lat.QUERY_OPTS, **opts, **e)
        prof.disable()
    stats = pstats.Stats(prof)
    by_part: dict[str, float] = defaultdict(float)
    total = 0.0
    for key, (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        by_part[part_of(key)] += tt
        total += tt
    shares = {
        k: {"ms_per_turn": round(v * 1000 / len(texts), 3), "share": round(v / total, 3)}
        for k, v in sorted(by_part.items(), key=lambda kv: -kv[1])
    }
    stages: dict[str, list[float]] = defaultdict(list)
    for tm in totals:
        for k, v in tm.items():
            stages[k].append(v)
    return {
        "turns": len(texts),
        "wall_ms_per_turn": round(wall * 1000 / len(texts), 2),
        "client_cpu_ms": round(client_ms, 2),
        "engine_cpu_ms": round(engine_ms, 2),
        "cpu_ms": round(client_ms + engine_ms, 2),
        "turns_per_s_on_2_cores": round(2000 / (client_ms + engine_ms), 1),
        "stage_p50_ms": {k: round(sorted(v)[len(v) // 2], 2) for k, v in stages.items()},
        "client_profile": shares,
        "top_functions": [
            {
                "fn": f"{k[0].split('site-packages/')[-1]}:{k[1]}:{k[2]}",
                "ms": round(v[2] * 1000 / len(texts), 3),
                "cum_ms": round(v[3] * 1000 / len(texts), 3),
            }
            for k, v in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:40]  # type: ignore[attr-defined]
        ],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    km = make_kemem(args.prefix, query_timeout_s=60)  # a busy shared machine: no deadline
    texts = lat.scale.queries(args.queries + 10, args.seed + 4)[10:]
    opts = lat.SCENARIOS[args.scenario]
    out: dict[str, Any] = {"prefix": args.prefix, "scenario": args.scenario}
    out["bare"] = turns(km, texts, None, opts)
    out["chat6"] = turns(km, texts, lat.chat_contexts(texts), opts)
    out["stamp"] = stamp(km)
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"### CPU per turn on `{result['prefix']}` ({result['scenario']})", ""]
    lines += [
        "| turn | wall ms | client CPU ms | engine CPU ms | sum | turns/s on 2 cores |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("bare", "chat6"):
        r = result[name]
        lines.append(
            f"| {name} | {r['wall_ms_per_turn']} | {r['client_cpu_ms']} | {r['engine_cpu_ms']} "
            f"| {r['cpu_ms']} | {r['turns_per_s_on_2_cores']} |"
        )
    for name in ("bare", "chat6"):
        head = f"Client profile, {name} (cProfile tottime, CPU clock, its overhead included):"
        lines += ["", head, ""]
        lines += ["| part | ms | share |", "|---|---|---|"]
        for part, v in list(result[name]["client_profile"].items())[:18]:
            lines.append(f"| {part} | {v['ms_per_turn']} | {v['share']:.1%} |")
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", required=True)
    p.add_argument("--scenario", default="per_user", choices=list(lat.SCENARIOS))
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
