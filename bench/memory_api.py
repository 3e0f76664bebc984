"""Memory API latency on a large store: add (infer=False), get and delete.

    python -m bench.memory_api --scale 100000 [--ops 200] [--out bench/results/…/memory_api.json]

The store is N synthetic user events (vectors from the cached pool, so loading stays fast) under
the prefix ``bench-mem-{N}``; it is reused when it already holds N memories. Each operation is
one call of the public API on one thread, timed end to end: ``add`` embeds the text (int8 model),
checks for an existing memory with the same id, writes the memory and its history entry
(refresh=False: searchable within the engine's refresh interval); ``get`` reads one memory of the
heavy user by id; ``delete`` deletes one (with its history entry).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import scale
from bench.common import cli_main, make_kemem, percentiles, stamp
from bench.latency import _with_vectors, force_merge, vector_pool

HEAVY = "u00000"


def load(km: Any, n: int, seed: int) -> dict[str, Any]:
    from kemem_es import EventRecord

    if km.engine.index_exists(f"{km.settings.index_prefix}-user-events"):
        have = km.engine.count(f"{km.settings.index_prefix}-user-events")
        if have >= n:
            return {"docs": have, "reused": True}
    km.init()
    pool = vector_pool(km, "int8", seed)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    written = 0
    for batch in scale.events(n, seed, "user", min(20_000, n // 2)):
        vecs = _with_vectors(batch, pool, rng).round(6)
        recs = [EventRecord(**r, vector=v.tolist()) for r, v in zip(batch, vecs, strict=True)]
        written += km.index_records(recs, kind="events", db="user").written
    secs = time.perf_counter() - t0
    print(f"  loaded {written} in {secs:.0f}s", file=sys.stderr)
    return {"docs": written, "reused": False, "seconds": round(secs, 1)}


def heavy_scope(km: Any) -> dict[str, str]:
    page = km.get_all(user_id=HEAVY, agent_id=_agent(km), limit=1)
    return {"user_id": HEAVY, "agent_id": page.results[0].agent_id}


def _agent(km: Any) -> str:
    body = {"size": 1, "query": {"term": {"user_id": HEAVY}}, "_source": ["agent_id"]}
    hit = km.engine.search(f"{km.settings.index_prefix}-user-events", body)["hits"]["hits"][0]
    return hit["_source"]["agent_id"]


def timed(fn: Any, items: list[Any]) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    km = make_kemem(f"bench-mem-{args.scale}")
    result: dict[str, Any] = {"meta": stamp(), "scale": args.scale, "ops": args.ops}
    result["store"] = load(km, args.scale, args.seed)
    result["merge"] = force_merge(km, 1)
    scope = heavy_scope(km)
    km.embedder.embed(["预热"])
    km.get_all(**scope, limit=1)
    rnd = random.Random(args.seed)
    texts = [
        f"{rnd.choice(scale.PLACES)}的{rnd.choice(scale.VENUES)}，{HEAVY}{a}，{f}（第{i}次）"
        for i, ((a, _), (f, _)) in enumerate(
            zip(
                rnd.choices(scale.ACTIVITIES, k=args.ops),
                rnd.choices(scale.FEELINGS, k=args.ops),
                strict=True,
            )
        )
    ]
    added: list[str] = []

    def add(text: str) -> None:
        added.append(km.add(text, **scope)[0].id)

    result["add_ms"] = percentiles(timed(add, texts))
    km.engine.refresh(f"{km.settings.index_prefix}-user-events")
    existing = [m.id for m in km.get_all(**scope, limit=1000).results if m.id not in added]
    sample = rnd.sample(existing, min(args.ops, len(existing)))
    result["get_ms"] = percentiles(timed(lambda mid: km.get(mid, **scope), sample))
    result["delete_ms"] = percentiles(timed(lambda mid: km.delete(mid, **scope), added))
    return result


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| operation (one call, one thread) | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("add_ms", "add(text), infer=False"),
        ("get_ms", "get(id)"),
        ("delete_ms", "delete(id)"),
    ):
        p = result[key]
        rows.append(f"| {label} | {p['p50']:.2f} | {p['p95']:.2f} | {p['p99']:.2f} |")
    docs = result["store"]["docs"]
    head = f"Memory API on a {docs:,}-memory user store, {result['ops']} ops each"
    return head + "\n\n" + "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=int, default=100_000)
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    return p


if __name__ == "__main__":
    sys.exit(cli_main(parser, run, markdown))
