"""One command for the whole benchmark: latency + throughput + quality, written as a report.

    python -m bench.run --quick     # 10k memories, a query sample of MemDaily (minutes)
    python -m bench.run --full      # 10k + 100k memories, all MemDaily queries

Writes bench/results/<date>-<quick|full>/{report.md, results.json, latency.png}.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from bench import latency, memdaily
from bench.common import RESULTS, SHARED, STAGES, cpu_label, stamp

DEFAULT_DATA = SHARED / "data/dev/memdaily"
PROFILES = {
    "quick": {"scales": [10_000], "limit_queries": 600, "pooled_limit_queries": 300},
    "full": {"scales": [10_000, 100_000], "limit_queries": None, "pooled_limit_queries": None},
}
TARGETS = {
    "per_user_p50_ms": 15.0,
    "per_user_p99_ms": 50.0,
    "large_approx_p50_ms": 50.0,
    "index_int8_docs_s": 500.0,
    "index_vectors_docs_s": 3000.0,
    "expand_p50_ms": 1.0,
}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = sorted(int(n) for n in result["latency"]["scales"])
    scenarios = list(latency.SCENARIOS)
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4.2), sharey=True)
    for ax, sc in zip(axes, scenarios, strict=True):
        for stage in STAGES:
            ys = [
                result["latency"]["scales"][str(n)]["scenarios"][sc]["stages_ms"][stage]["p50"]
                for n in scales
            ]
            style = "-o" if stage != "total" else "-s"
            ax.plot(scales, ys, style, label=f"{stage} p50", lw=2.5 if stage == "total" else 1.2)
        p99 = [
            result["latency"]["scales"][str(n)]["scenarios"][sc]["stages_ms"]["total"]["p99"]
            for n in scales
        ]
        ax.plot(scales, p99, "k--^", label="total p99")
        ax.set_xscale("log")
        ax.set_title(sc)
        ax.set_xlabel("memories per db")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("ms")
    axes[-1].legend(fontsize=7, loc="upper left")
    st = result["stamp"]
    fig.suptitle(
        f"kemem-es query latency per stage — {st['date']} — {st['machine']['nproc']} CPU "
        f"{st['machine']['cpu'][:40]} — {st['versions'].get('engine', '')}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def target_rows(result: dict[str, Any]) -> list[str]:
    rows = ["| target | goal | measured | met |", "|---|---|---|---|"]
    lat = result["latency"]
    big = str(max(int(n) for n in lat["scales"]))
    sc = lat["scales"][big]["scenarios"]
    tp = lat.get("throughput", {})

    def row(label: str, goal: float, value: float | None, lower_is_better: bool = True) -> None:
        if value is None:
            rows.append(f"| {label} | {goal} | n/a | n/a |")
            return
        ok = value <= goal if lower_is_better else value >= goal
        miss = "" if ok else f" (missed by {abs(value - goal) / goal:.0%})"
        rows.append(f"| {label} | {goal} | {value} | {'yes' if ok else 'no' + miss} |")

    n = f"{int(big):,}"
    row(
        f"per-user e2e p50 ms @ {n}", TARGETS["per_user_p50_ms"], _p(sc, "per_user", "total", "p50")
    )
    row(
        f"per-user e2e p99 ms @ {n}", TARGETS["per_user_p99_ms"], _p(sc, "per_user", "total", "p99")
    )
    row(
        f"large-scope (approx) e2e p50 ms @ {n}",
        TARGETS["large_approx_p50_ms"],
        _p(sc, "large_approx", "total", "p50"),
    )
    row(
        "indexing docs/s, int8 embedding",
        TARGETS["index_int8_docs_s"],
        tp.get("int8_embed", {}).get("docs_per_s"),
        False,
    )
    row(
        "indexing docs/s, vectors supplied",
        TARGETS["index_vectors_docs_s"],
        tp.get("vectors", {}).get("docs_per_s"),
        False,
    )
    row(
        "expansion p50 ms (per-user)", TARGETS["expand_p50_ms"], _p(sc, "per_user", "expand", "p50")
    )
    return rows


def _p(sc: dict[str, Any], name: str, stage: str, q: str) -> float | None:
    return sc.get(name, {}).get("stages_ms", {}).get(stage, {}).get(q)


def slowest_stage(result: dict[str, Any]) -> list[str]:
    out = []
    for n, entry in result["latency"]["scales"].items():
        for name, sc in entry["scenarios"].items():
            stages = {s: v["p50"] for s, v in sc["stages_ms"].items() if s != "total"}
            total = sc["stages_ms"]["total"]["p50"]
            top = sorted(stages.items(), key=lambda kv: -kv[1])[:2]
            share = ", ".join(f"{s} {v} ms ({v / total:.0%})" for s, v in top if total)
            out.append(f"- {int(n):,} / {name}: total p50 {total} ms; largest: {share}")
    return out


def report(result: dict[str, Any], profile: str) -> str:
    st = result["stamp"]
    m = st["machine"]
    v = st["versions"]
    q = result["quality"]
    lines = [
        f"# kemem-es benchmark — {profile} — {st['date']}",
        "",
        f"- command: `{st['command']}`",
        f"- machine: {m['nproc']} CPUs ({cpu_label(m)}), {m['ram_gib']} GiB RAM, {m['platform']}, "
        f"Python {m['python']}",
        f"- versions: kemem-es {v.get('kemem-es')} (git {v.get('git_commit')}), "
        f"engine {v.get('engine')} at {v.get('engine_url')}, model {v.get('model')}, "
        f"onnxruntime {v.get('onnxruntime')}, opensearch-py {v.get('opensearch-py')}, "
        f"jieba {v.get('jieba')}",
        "- engine settings (at the largest scale): "
        + json.dumps(next(reversed(result["latency"]["scales"].values()))["engine"]),
        f"- query settings: {json.dumps(latency.QUERY_OPTS)}, "
        f"{result['latency']['queries']['measured']} measured queries after "
        f"{result['latency']['queries']['warmup']} warm-up, one client thread for the stage "
        "percentiles; QPS with concurrent client threads in the same process",
        *[f"- latency command: `{c}`" for c in result["latency"].get("commands", [])],
        "- raw numbers: [results.json](results.json); plot: [latency.png](latency.png)",
        "",
        "## Targets",
        "",
        *target_rows(result),
        "",
        "Where the time goes (p50, two largest stages):",
        "",
        *slowest_stage(result),
        "",
        "## Latency and throughput",
        "",
        latency.markdown(result["latency"]),
        "![latency per stage vs scale](latency.png)",
        "",
        "## Retrieval quality",
        "",
        f"Eval set `{result['quality']['eval_set']}` ({result['quality']['docs']} docs), "
        f"keywords: {q['keywords']}, embedding {q['model_variant']}; "
        f"{result['quality']['settings']}. Baselines run without expansion; "
        f"modes: {json.dumps(result['quality']['modes'])}. "
        "Latency columns are measured under concurrent query threads (see `--workers`), "
        "so use the latency section for speed.",
        "",
        f"Quality command: `{result['quality']['stamp']['command']}`",
        "",
        memdaily.markdown(result["quality"]),
    ]
    return "\n".join(lines) + "\n"


def merge_latency(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several bench.latency results as one: scales merged, the first throughput kept."""
    # Stamp and query settings from the last run that measured queries (a throughput-only run
    # has no engine stamp).
    merged = dict(next((r for r in reversed(runs) if r["scales"]), runs[-1]))
    merged["scales"] = {}
    for run in runs:
        merged["scales"].update(run["scales"])
    merged["throughput"] = next((r["throughput"] for r in runs if r.get("throughput")), None)
    merged["commands"] = [run["stamp"]["command"] for run in runs]
    return merged


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--quick", action="store_true")
    g.add_argument("--full", action="store_true")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="eval set for quality")
    p.add_argument("--scale", type=int, nargs="+", default=None, help="override the scales")
    p.add_argument("--limit-queries", type=int, default=None, help="override the query sample")
    p.add_argument(
        "--quality-json", type=Path, default=None, help="reuse a bench.memdaily --out result"
    )
    p.add_argument(
        "--latency-json",
        type=Path,
        nargs="+",
        default=None,
        help="reuse bench.latency --out results (their scales are merged)",
    )
    p.add_argument("--out", type=Path, default=None, help="results dir (default: dated)")
    args = p.parse_args(argv)
    profile = "quick" if args.quick else "full"
    prof = PROFILES[profile]
    out = args.out or RESULTS / f"{date.today().isoformat()}-{profile}"
    out.mkdir(parents=True, exist_ok=True)

    if args.latency_json:
        lat = merge_latency([json.loads(f.read_text()) for f in args.latency_json])
    else:
        scales = [str(n) for n in args.scale or prof["scales"]]
        lat = latency.run(latency.parser().parse_args(["--scale", *scales]))
    result: dict[str, Any] = {"profile": profile, "latency": lat}
    if args.quality_json:
        result["quality"] = json.loads(args.quality_json.read_text())
    else:
        md = ["--data", str(args.data)]
        lq = args.limit_queries or prof["limit_queries"]
        if lq:
            md += ["--limit-queries", str(lq)]
        if prof["pooled_limit_queries"] and not args.limit_queries:
            md += ["--pooled-limit-queries", str(prof["pooled_limit_queries"])]
        result["quality"] = memdaily.run(memdaily.parser().parse_args(md))
        result["quality"]["stamp"]["command"] = "python -m bench.memdaily " + " ".join(md)
    result["stamp"] = stamp()
    result["stamp"]["versions"].update(
        {k: v for k, v in result["latency"]["stamp"]["versions"].items() if k not in ("date",)}
    )
    (out / "results.json").write_text(json.dumps(result, ensure_ascii=False, indent=2))
    plot(result, out / "latency.png")
    (out / "report.md").write_text(report(result, profile))
    print(f"wrote {out}/report.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
