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
    docs = km.engine.count(f"{km.settings.index_prefix}-user-events")
    return {"docs": docs, "written": written, "reused": False, "seconds": round(secs, 1)}


def heavy_scope(km: Any) -> dict[str, str]:
    page = km.get_all(user_id=HEAVY, agent_id=_agent(km), limit=1)
    return {"user_id": HEAVY, "agent_id": page.results[0].agent_id}


def _agent(km: Any) -> str:
    body = {"size": 1, "query": {"term": {"user_id": HEAVY}}, "_source": ["agent_id"]}
    hit = km.engine.search(f"{km.settings.index_prefix}-user-events", body)["hits"]["hits"][0]
    return hit["_source"]["agent_id"]


def make_texts(rnd: random.Random, n: int, tag: str) -> list[str]:
    """New chat facts for the heavy user (each distinct, so every add is a real ADD)."""
    return [
        f"{rnd.choice(scale.PLACES)}的{rnd.choice(scale.VENUES)}，{HEAVY}{tag}"
        f"{rnd.choice(scale.ACTIVITIES)[0]}，{rnd.choice(scale.FEELINGS)[0]}（第{i}次）"
        for i in range(n)
    ]


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
    texts = make_texts(rnd, args.ops, "")
    added: list[str] = []
    modes = {"add_ms": False, "add_dedup_ms": True}
    times: dict[str, list[float]] = {k: [] for k in modes}
    other = make_texts(random.Random(args.seed + 1), args.ops, "又")
    for text, text2 in zip(texts, other, strict=True):  # interleaved: the same machine state
        for key, dedup in modes.items():
            t0 = time.perf_counter()
            added.append(km.add(text2 if dedup else text, **scope, dedup=dedup)[0].id)
            times[key].append((time.perf_counter() - t0) * 1000)
    for key in modes:
        result[key] = percentiles(times[key])
    result["query_ms"] = query_on_off(km, scope, texts)
    km.engine.refresh(f"{km.settings.index_prefix}-user-events")
    existing = [m.id for m in km.get_all(**scope, limit=1000).results if m.id not in added]
    sample = rnd.sample(existing, min(args.ops, len(existing)))
    result["get_ms"] = percentiles(timed(lambda mid: km.get(mid, **scope), sample))
    result["delete_ms"] = percentiles(timed(lambda mid: km.delete(mid, **scope), set(added)))
    km.close()
    t0 = time.perf_counter()
    (rep,) = km.cleanup(
        user_id=HEAVY, agent_id=scope["agent_id"], cap=min(20_000, args.scale // 5), interval_days=0
    )
    result["cleanup"] = {
        "user_memories": rep.memories,
        "deleted": rep.deleted,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return result


def query_on_off(km: Any, scope: dict[str, str], texts: list[str]) -> dict[str, Any]:
    """End-to-end query p50 with recall reinforcement on and off, alternating query by query
    (limit 10, threshold 0: every query returns and reinforces ten memories)."""
    out: dict[str, list[float]] = {"reinforce_on": [], "reinforce_off": []}
    for _ in range(10):  # warm-up
        km.query(texts[0], **scope, limit=10, score_threshold=0.0)
    for text in texts:
        for label, on in (("reinforce_on", True), ("reinforce_off", False)):
            km.settings = km.settings.model_copy(update={"reinforce": on})
            t0 = time.perf_counter()
            km.query(text, **scope, limit=10, score_threshold=0.0)
            out[label].append((time.perf_counter() - t0) * 1000)
    km.settings = km.settings.model_copy(update={"reinforce": True})
    return {k: percentiles(v) for k, v in out.items()}


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| operation (one call, one thread) | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|",
    ]
    series = [
        ("add(text), infer=False, dedup off", result["add_ms"]),
        ("add(text), infer=False, dedup on", result["add_dedup_ms"]),
        ("get(id)", result["get_ms"]),
        ("delete(id)", result["delete_ms"]),
        ("query, reinforcement off", result["query_ms"]["reinforce_off"]),
        ("query, reinforcement on", result["query_ms"]["reinforce_on"]),
    ]
    for label, p in series:
        rows.append(f"| {label} | {p['p50']:.2f} | {p['p95']:.2f} | {p['p99']:.2f} |")
    c = result["cleanup"]
    rows.append(
        f"\nclean-up of one user with {c['user_memories']:,} memories: deleted {c['deleted']:,} "
        f"(the weakest 20%) in {c['seconds']:.1f} s"
    )
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
