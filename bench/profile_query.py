"""Where the event search's time goes: the engine's ``profile`` per clause, and the client side.

    python -m bench.profile_query --prefix bench-lat-ab-100000 [--scenario per_user] [--queries 30]

Runs the benchmark's queries through ``Kemem.query`` on a kept index (``bench.latency_ab build``
or ``bench.latency --keep``), captures the exact event-search bodies the searcher sends, then
re-sends each one alone with ``"profile": true`` and sums the engine's per-clause times:

- the window query (first phase): the scope filter, the keyword clauses (base-word ``dis_max``
  groups, the expansion ``terms``), the ANN ``knn`` clause, and the collector;
- the rescore (second phase: the fused function_score over the window);
- per request: ``took`` (server), round trip, request bytes and JSON encode/decode time.

Medians over the queries, per database. Nothing is written to the index.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import latency as lat
from bench.common import cli_main, make_kemem, stamp
from kemem_es.engine.client import Request


def _ms(ns: float) -> float:
    return ns / 1e6


def classify(node: dict[str, Any]) -> str:
    """A short label for a profiled query node: what it is in the event body."""
    kind = node.get("type", "?")
    desc = node.get("description", "")
    if "Knn" in kind or "DocAndScore" in kind:
        return "ann(knn)"
    if kind in ("TermInSetQuery", "MultiTermQueryConstantScoreBlendedWrapper"):
        return "expansion terms"
    if kind == "FunctionScoreQuery":
        return "rescore(function_score)"
    if kind == "DisjunctionMaxQuery":
        return "keyword dis_max"
    if kind == "BoostQuery" and "knn" in desc.lower():
        return "ann clause"
    if kind == "BooleanQuery" and desc.startswith("#") and "(" not in desc:
        return "scope filter"
    return kind


def walk(node: dict[str, Any], depth: int, out: dict[str, float], prefix: str = "") -> None:
    """Inclusive time of the nodes down to ``depth`` levels, keyed by path of labels."""
    label = f"{prefix}/{classify(node)}" if prefix else classify(node)
    out[label] += node.get("time_in_nanos", 0)
    if depth > 0:
        for child in node.get("children", []):
            walk(child, depth - 1, out, label)


def summarise_profile(resp: dict[str, Any], depth: int) -> dict[str, float]:
    """ns by label: query tree nodes, rewrite, collectors, rescore (where reported)."""
    out: dict[str, float] = defaultdict(float)
    for shard in resp.get("profile", {}).get("shards", []):
        for search in shard.get("searches", []):
            for q in search.get("query", []):
                walk(q, depth, out, "query")
            out["rewrite"] += search.get("rewrite_time", 0)
            for c in search.get("collector", []):
                out[f"collector:{c.get('name', '?')}"] += c.get("time_in_nanos", 0)
    return out


class Capture:
    """Keeps the msearch bodies a query sends and times them on the client side, through the
    engine's request hook (``Engine.hook``): every request passes there, nothing is patched."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.msearches: list[list[tuple[str, dict[str, Any], str | None]]] = []
        self.timing: list[dict[str, float]] = []
        engine.hook = self.seen

    def seen(self, request: Request, answer: Any, seconds: float) -> None:
        if request.path != "/_msearch" or answer is None:
            return
        lines = request.body
        self.msearches.append(
            json.loads(json.dumps([(h["index"], b, h.get("routing")) for h, b in pairs(lines)]))
        )
        ser = self.engine.client.transport.serializer
        t0 = time.perf_counter()
        encoded = [ser.dumps(x) for x in lines]  # what the request's encoding costs, again
        t1 = time.perf_counter()
        self.timing.append(
            {
                "encode_ms": (t1 - t0) * 1e3,
                "request_kb": sum(len(x.encode()) for x in encoded) / 1024,
                "msearch_ms": seconds * 1e3,  # encoding included
                "took_ms": max((r.get("took", 0) for r in answer["responses"]), default=0),
            }
        )


def pairs(lines: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """An msearch's (header, body) pairs."""
    return list(zip(lines[::2], lines[1::2], strict=True))


def median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    km = make_kemem(args.prefix)
    cap = Capture(km.engine)
    opts = lat.SCENARIOS[args.scenario]
    texts = lat.scale.queries(args.warmup + args.queries, args.seed + 4)
    lat.run_queries(km, texts[: args.warmup], opts)
    cap.msearches.clear()
    cap.timing.clear()
    timings = lat.run_queries(km, texts[args.warmup :], opts)
    client = {k: median([t[k] for t in cap.timing]) for k in cap.timing[0]}
    client["search_events_ms"] = median([t["search_events"] for t in timings])
    per_db: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    shapes: dict[str, Any] = {}
    for searches in cap.msearches:
        for index, body, routing in searches:
            db = "user" if "-user-" in index else "official"
            shapes.setdefault(db, _shape(body))
            for _ in range(args.repeat):
                prof = km.engine.search(index, {**body, "profile": True}, routing=routing)
            took = prof.get("took", 0)
            per_db[db]["took_ms"].append(took)
            for label, ns in summarise_profile(prof, args.depth).items():
                per_db[db][label].append(_ms(ns))
    profile = {
        db: {label: median(v) for label, v in sorted(rows.items(), key=lambda kv: -median(kv[1]))}
        for db, rows in per_db.items()
    }
    return {
        "prefix": args.prefix,
        "scenario": args.scenario,
        "queries": args.queries,
        "client_median": client,
        "profile_median_ms": profile,
        "body_shape": shapes,
        "stamp": stamp(km),
    }


def _shape(body: dict[str, Any]) -> dict[str, Any]:
    """How big the parts of one event body are (clauses, terms, vector floats)."""
    text = json.dumps(body)
    return {
        "bytes": len(text.encode()),
        "floats": text.count(",") - text.count('":'),
        "has_rescore": "rescore" in body,
        "terms_values": sum(
            len(v) for t in _find(body, "terms") for k, v in t.items() if isinstance(v, list)
        ),
    }


def _find(node: Any, key: str) -> list[Any]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                out.append(v)
            out += _find(v, key)
    elif isinstance(node, list):
        for v in node:
            out += _find(v, key)
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"### Profile: {result['scenario']} on `{result['prefix']}` "
        f"({result['queries']} queries, medians)",
        "",
        "Client side: " + ", ".join(f"{k} {v}" for k, v in result["client_median"].items()),
        "",
    ]
    for db, rows in result["profile_median_ms"].items():
        shape = result["body_shape"].get(db)
        lines += [f"**{db} events** ({shape})", "", "| part | ms |", "|---|---|"]
        lines += [f"| `{label}` | {ms} |" for label, ms in rows.items() if ms >= 0.05]
        lines.append("")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prefix", required=True)
    p.add_argument("--scenario", default="per_user", choices=list(lat.SCENARIOS))
    p.add_argument("--queries", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=1, help="profile each body this many times")
    p.add_argument("--depth", type=int, default=3, help="query-tree levels to report")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    # the markdown's "Client side" line carries the client medians
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
