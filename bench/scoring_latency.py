"""Native against script scoring: query latency on one kept store, interleaved query by query.

    python -m bench.latency --scale 100000 --keep --no-throughput --prefix 'bench-es-lat-{n}'
    python -m bench.scoring_latency --scale 100000 [--prefix 'bench-es-lat-{n}'] \
        [--sides script,native] [--url URL] [--queries 200 --warmup 20] [--out FILE.json]

bench.latency builds (and keeps) the store; this measures bench.latency's scenarios (per_user:
the heavy user's scope, exact, + the official db on the auto path; large_approx, large_exact: a
light user, the official db of size N) with one Kemem per side (``KEMEM_SCORING`` script,
native or auto, on the same engine and the same documents), each query asked by every side in
turn, the order alternating from one query to the next, so the machine's load falls on both
alike. Per side and scenario: p50/p95/p99 of the query's total and of its event search, and the
ratio native / script of each, and how many answers were the same memories in the same order.
The load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import scale
from bench.common import cli_main, make_kemem, percentiles, stamp
from bench.latency import QUERY_OPTS, SCENARIOS


def run(args: argparse.Namespace) -> dict[str, Any]:
    prefix = args.prefix.format(n=args.scale)
    sides = args.sides.split(",")
    extra = {"es_url": args.url} if args.url else {}
    kms = {s: make_kemem(prefix, scoring=s, **extra) for s in sides}
    texts = scale.queries(args.warmup + args.queries, args.seed + 4)
    warm, measured = texts[: args.warmup], texts[args.warmup :]
    out: dict[str, Any] = {
        "scale": args.scale,
        "prefix": prefix,
        "sides": {s: km.engine.dialect.scoring for s, km in kms.items()},
        "load_before": os.getloadavg(),
        "scenarios": {},
    }
    for name, opts in SCENARIOS.items():
        if args.scenarios and name not in args.scenarios:
            continue
        timings: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
        answers: dict[str, list[list[tuple[str, float]]]] = {s: [] for s in sides}
        for i, text in enumerate([*warm, *measured]):
            order = sides if i % 2 else sides[::-1]
            for s in order:
                resp = kms[s].query(text, agent_id="a1", **QUERY_OPTS, **opts)
                if i >= len(warm):
                    timings[s].append(dict(resp.additional_info.timings_ms))
                    answers[s].append([(e.index, e.score) for e in resp.memory_events])
        res: dict[str, Any] = {"options": {**QUERY_OPTS, **opts}}
        if len(sides) == 2:
            res["agreement"] = agreement(*(answers[s] for s in sides))
        if args.truth and opts.get("path") == "approx":
            res["overlap_with_exact"] = overlap_with_exact(
                kms[sides[0]], measured[: args.truth], opts, answers
            )
        for s in sides:
            res[s] = {
                stage: percentiles(t.get(stage, 0.0) for t in timings[s])
                for stage in ("total", "search_events")
            }
        if len(sides) == 2:
            a, b = sides
            res["ratio"] = {
                stage: {
                    p: round(res[b][stage][p] / res[a][stage][p], 3) if res[a][stage][p] else None
                    for p in ("p50", "p95", "p99")
                }
                for stage in ("total", "search_events")
            }
        out["scenarios"][name] = res
        line = "; ".join(
            f"{s} total p50/p95/p99 {res[s]['total']['p50']}/{res[s]['total']['p95']}/"
            f"{res[s]['total']['p99']} ms (search_events p50 {res[s]['search_events']['p50']})"
            for s in sides
        )
        print(f"  {name}: {line}; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    out["load_after"] = os.getloadavg()
    out["stamp"] = stamp(next(iter(kms.values())))
    return out


def agreement(
    a: Sequence[Sequence[tuple[str, float]]], b: Sequence[Sequence[tuple[str, float]]]
) -> dict[str, Any]:
    """How many answers (events) the two sides gave alike: the same memories in the same order,
    and the largest |score difference| among those (scores as the answer rounds them)."""
    same = [x for x, y in zip(a, b, strict=True) if [m for m, _ in x] == [m for m, _ in y]]
    diffs = [
        abs(sx - sy)
        for x, y in zip(a, b, strict=True)
        if [m for m, _ in x] == [m for m, _ in y]
        for (_, sx), (_, sy) in zip(x, y, strict=True)
    ]
    return {"answers": len(a), "same": len(same), "max_abs_score_diff": max(diffs, default=0.0)}


def overlap_with_exact(
    km: Any,
    texts: Sequence[str],
    opts: dict[str, Any],
    answers: dict[str, list[list[tuple[str, float]]]],
) -> dict[str, Any]:
    """Each side's approximate answer against the exact one (the first side's scoring, path
    exact, untimed): the mean share of the exact top-k each side's top-k holds (``ids``), and
    the mean ratio of the sums of their scores (``score``: 1.0 when the approximate answer is as
    good as the exact one, even if it holds other memories of equal score — the synthetic store
    holds many near-copies of each pooled vector)."""
    exact_opts = {**opts, "path": "exact"}
    shares: dict[str, list[float]] = {s: [] for s in answers}
    ratios: dict[str, list[float]] = {s: [] for s in answers}
    for i, text in enumerate(texts):
        resp = km.query(text, agent_id="a1", **QUERY_OPTS, **exact_opts)
        truth = {e.index for e in resp.memory_events}
        best = sum(e.score for e in resp.memory_events)
        for s, got in answers.items():
            if truth and best > 0:
                shares[s].append(len(truth & {m for m, _ in got[i]}) / len(truth))
                ratios[s].append(sum(score for _, score in got[i]) / best)
    return {
        "queries": len(texts),
        "ids": {s: round(sum(v) / len(v), 4) if v else None for s, v in shares.items()},
        "score": {s: round(sum(v) / len(v), 4) if v else None for s, v in ratios.items()},
    }


def markdown(result: dict[str, Any]) -> str:
    sides = list(result["sides"])
    lines = [
        f"**Scale {result['scale']:,}** (store `{result['prefix']}`), load average "
        f"{result['load_before'][0]:.1f} before, {result['load_after'][0]:.1f} after",
        "",
        "| scenario | side | total p50 | p95 | p99 | search_events p50 | p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, res in result["scenarios"].items():
        for s in sides:
            t, e = res[s]["total"], res[s]["search_events"]
            lines.append(
                f"| {name} | {s} | {t['p50']} | {t['p95']} | {t['p99']} | {e['p50']} | {e['p99']} |"
            )
        if "ratio" in res:
            r, e = res["ratio"]["total"], res["ratio"]["search_events"]
            lines.append(
                f"| {name} | {sides[1]} / {sides[0]} | {r['p50']} | {r['p95']} | {r['p99']} "
                f"| {e['p50']} | {e['p99']} |"
            )
    for name, res in result["scenarios"].items():
        if "agreement" in res:
            g = res["agreement"]
            lines.append(
                f"\n{name}: {g['same']} of {g['answers']} answers the same memories in the same "
                f"order (largest |score difference| among them {g['max_abs_score_diff']:.1e})"
            )
        if "overlap_with_exact" in res:
            o = res["overlap_with_exact"]
            shares = ", ".join(f"{s} {o['ids'][s]} (score {o['score'][s]})" for s in sides)
            lines.append(
                f"\n{name}: share of the exact path's top memories in each side's answer "
                f"(and of their summed score), {o['queries']} queries: {shares}"
            )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=100_000)
    p.add_argument("--prefix", default="bench-es-lat-{n}", help="the kept store ({n}: scale)")
    p.add_argument("--sides", default="script,native", help="KEMEM_SCORING of each side")
    p.add_argument("--url", default=None, help="the engine (default: KEMEM_ES_URL / local)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--scenarios", nargs="*", default=None, help="a subset of the scenarios")
    p.add_argument(
        "--truth",
        type=int,
        default=0,
        help="approximate scenarios: ask the first N queries again on the exact path and report "
        "how much of that answer each side's holds",
    )
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
