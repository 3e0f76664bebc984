"""Assemble the issue-12 quality report from result files (nothing here measures anything).

    python -m bench.quality_report --out bench/results/DATE-quality \\
        --dialogue-before B.json --dialogue-after A.json \\
        --memdaily-before B.json --memdaily-after A.json \\
        --demo-before B.json [B2.json ...] --demo-after A.json [A2.json ...]

Inputs: ``bench.dialogue_eval --out``, ``bench.memdaily --out`` and ``bench.demo --json``
results, "before" from the code before issue 12 (commit a443060) and "after" from this branch.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

KEYS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr")


def load(path: Path | None) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path else None


def table(rows: dict[str, dict[str, Any]], title: str) -> list[str]:
    out = [title, "", "| mode | R@1 | R@5 | R@10 | nDCG@10 | MRR |", "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | " + " | ".join(f"{r[k]:.3f}" for k in KEYS) + " |")
    return [*out, ""]


def margin(rows: dict[str, dict[str, Any]], fusion: str, others: tuple[str, ...]) -> str:
    best = max(others, key=lambda m: rows[m]["recall@5"])
    d = rows[fusion]["recall@5"] - rows[best]["recall@5"]
    return (
        f"fusion R@5 {rows[fusion]['recall@5']:.3f} − best of {', '.join(others)} "
        f"({best} {rows[best]['recall@5']:.3f}) = **{d:+.3f}**"
    )


def dialogue_section(before: dict | None, after: dict) -> list[str]:
    lines = ["## Dialogue dev set (bench/dialogue/, 334 queries)", ""]
    lines += [f"Command: `{after['stamp']['command']}` — {after['settings']}.", ""]
    if before:
        lines += table(before["modes"], "**Before** (commit a443060):")
    lines += table(after["modes"], "**After** (this branch):")
    lines.append(margin(after["modes"], "fusion", ("bm25", "vector", "rrf")))
    lines.append("")
    styles = sorted({s for r in after["modes"].values() for s in r["by_style"]})
    for style in styles:
        lines += [f"*{style}* queries, R@5 / nDCG@10 (before → after):", ""]
        lines += ["| mode | n | R@5 | nDCG@10 |", "|---|---|---|---|"]
        for name, r in after["modes"].items():
            sub = r["by_style"][style]
            prev = before["modes"][name]["by_style"][style] if before else None
            r5 = f"{prev['recall@5']:.3f} → " if prev else ""
            nd = f"{prev['ndcg@10']:.3f} → " if prev else ""
            lines.append(
                f"| {name} | {sub['n']} | {r5}{sub['recall@5']:.3f} | {nd}{sub['ndcg@10']:.3f} |"
            )
        lines.append("")
    f = after["modes"]["fusion"]
    if "gold>=0.5" in f:
        lines += [
            f"Threshold check (fusion, after): the memory each dialogue was written for scores "
            f"≥ 0.5 in {f['gold>=0.5']:.1%} of queries; some other memory scores ≥ 0.5 in "
            f"{f['other>=0.5']:.1%}.",
            "",
        ]
    return lines


def memdaily_section(before: dict | None, after: dict) -> list[str]:
    lines = ["## MemDaily (all 2,954 queries)", ""]
    lines += [f"Command: `{after['stamp']['command']}` — {after['settings']}.", ""]
    for setting, title in (("per_namespace", "per user"), ("pooled", "pooled by source file")):
        if before and setting in before:
            lines += table(before[setting], f"**Before**, {title}:")
        if setting in after:
            lines += table(after[setting], f"**After**, {title}:")
            lines.append(margin(after[setting], "fusion+expand", ("bm25", "vector", "rrf")))
            lines.append("")
    return lines


def demo_section(before: list[dict], after: list[dict]) -> list[str]:
    lines = ["## Demo query latency (`python -m bench.demo`)", ""]
    lines += [
        "Runs alternated before/after on the same engine in one session; end-to-end `total` "
        "from `additional_info` over 200 queries after 20 warm-up (ms):",
        "",
        "| run | code | p50 | p95 | p99 |",
        "|---|---|---|---|---|",
    ]
    for i, (b, a) in enumerate(zip(before, after, strict=False), start=1):
        for label, r in (("before (a443060)", b), ("after", a)):
            t = r["query_latency_ms"]["total"]
            lines.append(f"| {i} | {label} | {t['p50']:.2f} | {t['p95']:.2f} | {t['p99']:.2f} |")
    lines.append("")
    stages = list(after[0]["query_latency_ms"])
    lines += ["Per stage p50 (ms), first pair:", "", "| stage | before | after |", "|---|---|---|"]
    for s in stages:
        b = before[0]["query_latency_ms"].get(s, {}).get("p50", 0.0)
        a = after[0]["query_latency_ms"].get(s, {}).get("p50", 0.0)
        lines.append(f"| {s} | {b:.2f} | {a:.2f} |")
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    for name in ("dialogue", "memdaily"):
        ap.add_argument(f"--{name}-before", type=Path)
        ap.add_argument(f"--{name}-after", type=Path, required=True)
    ap.add_argument("--demo-before", type=Path, nargs="*", default=[])
    ap.add_argument("--demo-after", type=Path, nargs="*", default=[])
    ap.add_argument("--notes", type=Path, help="markdown appended at the end")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dlg_a, md_a = load(args.dialogue_after), load(args.memdaily_after)
    stamp = md_a["stamp"]
    lines = [
        "# Retrieval quality (issue 12)",
        "",
        f"Measured {stamp['date'][:10]} on {stamp['machine']['cpu']} "
        f"({stamp['machine']['nproc']} cores, shared), {stamp['versions'].get('engine', '')}, "
        f"model {stamp['versions'].get('model', '')}; dialogue run at commit "
        f"{dlg_a['stamp']['versions'].get('git_commit', '')}, MemDaily run at "
        f"{stamp['versions'].get('git_commit', '')}.",
        "",
    ]
    lines += dialogue_section(load(args.dialogue_before), dlg_a)
    lines += memdaily_section(load(args.memdaily_before), md_a)
    demo_b = [load(p) for p in args.demo_before]
    demo_a = [load(p) for p in args.demo_after]
    if demo_a:
        lines += demo_section(demo_b, demo_a)
    if args.notes:
        lines += ["", args.notes.read_text()]
    (args.out / "report.md").write_text("\n".join(lines))
    inputs = {
        "dialogue_before": args.dialogue_before,
        "dialogue_after": args.dialogue_after,
        "memdaily_before": args.memdaily_before,
        "memdaily_after": args.memdaily_after,
    }
    for name, path in inputs.items():
        if path:
            shutil.copy(path, args.out / f"{name}.json")
    for i, p in enumerate(args.demo_before, start=1):
        shutil.copy(p, args.out / f"demo_before_{i}.json")
    for i, p in enumerate(args.demo_after, start=1):
        shutil.copy(p, args.out / f"demo_after_{i}.json")
    print(args.out / "report.md")


if __name__ == "__main__":
    main()
