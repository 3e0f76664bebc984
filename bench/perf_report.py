"""Issue 13's side-by-side performance report, assembled from result files of one session.

    python -m bench.perf_report --out bench/results/2026-11-26-perf \\
        --latency "3.5 float merged=bench/work/lat-1m.json" ... \\
        --recall bench/work/recall-100k.json ... --throughput "after=bench/work/tp.json" ... \\
        --profile bench/work/prof-1m.json ... --cold bench/work/cold.json --notes notes.md

Every number comes from a ``bench.latency`` / ``bench.ann_recall`` / ``bench.profile_query`` /
``bench.cold_start`` JSON written by a measured run (commands and machine stamps are copied
in); ``--notes`` adds hand-written analysis. Labels say engine, vectors and store state.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import cpu_label, machine_info

TARGETS = {"per_user_p50": 15.0, "per_user_p99": 50.0, "vectors_docs_per_s": 3000.0}


def _labelled(items: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for item in items:
        label, _, path = item.rpartition("=")
        out.append((label or Path(path).stem, json.loads(Path(path).read_text())))
    return out


def _p(st: dict[str, Any], stage: str) -> str:
    s = st.get(stage, {})
    return f"{s.get('p50', '–')} / {s.get('p95', '–')} / {s.get('p99', '–')}"


def latency_section(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "## Query latency, side by side",
        "",
        "p50 / p95 / p99 ms, one client thread, 200 queries after 20 warm-up (`bench.latency`).",
        "",
        "| run | scale | scenario | total | search_events | search_entities | embed | expand |",
        "|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for label, res in runs:
        for n, entry in res["scales"].items():
            for name, sc in entry["scenarios"].items():
                if "stages_ms" not in sc:
                    continue
                st = sc["stages_ms"]
                lines.append(
                    f"| {label} | {int(n):,} | {name} | **{_p(st, 'total')}** | "
                    f"{_p(st, 'search_events')} | {_p(st, 'search_entities')} | "
                    f"{_p(st, 'embed')} | {_p(st, 'expand')} |"
                )
            live = entry["scenarios"].get("live_writes")
            seg = entry.get("segments")
            note = f"- {label} @ {int(n):,}: segments {seg}"
            if live:
                note += f"; written during the queries: {live}"
            stamp = res.get("stamp", {})
            note += (
                f"; engine {stamp.get('versions', {}).get('engine')}; "
                f"command `{stamp.get('command')}`; {stamp.get('date')}"
            )
            details.append(note)
    return [*lines, "", *details, ""]


def qps_section(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    rows = []
    for label, res in runs:
        for n, entry in res["scales"].items():
            for name, sc in entry["scenarios"].items():
                q = sc.get("qps") if isinstance(sc, dict) else None
                if q:
                    rows.append(
                        f"| {label} | {int(n):,} | {name} | {q['qps']} ({q['threads']}) | "
                        f"{q['total_ms']['p50']} | {q['total_ms']['p99']} |"
                    )
    if not rows:
        return []
    return [
        "### Under concurrent load",
        "",
        "| run | scale | scenario | QPS (threads) | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def recall_section(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## ANN recall@10 against exact scoring, and index size",
        "",
        "`bench.ann_recall recall`: the engine's `knn` (filter = the scope) against the exact "
        "cosine top 10 (`script_score` over the scope); 'in ANN 50' is the share of the exact "
        "top 10 among the 50 neighbours the approximate path rescores. Median server `took` "
        "(the 100k recall runs shared the machine with a 1M build: load ~11; the latency "
        "tables are the speed numbers).",
        "",
        "| store | scope | recall@10 | score recall@10 | exact top 10 in ANN 50 | ANN k=10 ms "
        "| ANN k=50 ms | exact ms | events indices MB (both dbs) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for prefix, r in res["prefixes"].items():
            size = r.get("events_store_mb", {})
            for label, row in r.items():
                if not isinstance(row, dict) or "recall@10" not in row:
                    continue
                mb = sum(size.values()) if size else "–"
                lines.append(
                    f"| `{prefix}` | {label} | {row['recall@10']} | {row.get('score_recall@10')} | "
                    f"{row['cand@10_in_ann50']} | "
                    f"{row['ann10_took_ms_p50']} | {row['ann50_took_ms_p50']} | "
                    f"{row['exact_took_ms_p50']} | {mb} |"
                )
    return [*lines, ""]


def throughput_section(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "## Indexing throughput",
        "",
        "`bench.latency --scale --throughput-docs N`: one `index_records` call per path on a "
        "fresh index (tokenise + embed where needed + bulk + history), docs/s.",
        "",
        "| run | docs | int8 embedding | fp32 embedding | vectors supplied |",
        "|---|---|---|---|---|",
    ]
    for label, res in runs:
        tp = res.get("throughput", {})
        if not tp:
            continue
        cells = [str(tp.get(k, {}).get("docs_per_s", "–")) for k in ("int8_embed", "fp32_embed")]
        lines.append(
            f"| {label} | {tp.get('slice_docs')} | {cells[0]} | {cells[1]} | "
            f"**{tp.get('vectors', {}).get('docs_per_s', '–')}** |"
        )
    return [*lines, ""]


def profile_section(results: list[dict[str, Any]]) -> list[str]:
    lines = ["## Where the event search's time goes (engine `profile`)", ""]
    for res in results:
        c = res["client_median"]
        lines += [
            f"**`{res['prefix']}`, {res['scenario']}** ({res['queries']} queries, medians; "
            f"{res['stamp']['versions'].get('engine')}). Client: search_events "
            f"{c.get('search_events_ms')} ms, msearch round trip {c.get('msearch_ms')} ms, "
            f"server took {c.get('took_ms')} ms, request {c.get('request_kb')} KB encoded in "
            f"{c.get('encode_ms')} ms.",
            "",
            "| db | part | ms |",
            "|---|---|---|",
        ]
        for db, rows in res["profile_median_ms"].items():
            for part, ms in list(rows.items())[:12]:
                if ms >= 0.05:
                    lines.append(f"| {db} | `{part}` | {ms} |")
        lines.append("")
    return lines


def cold_section(results: list[dict[str, Any]]) -> list[str]:
    if not results:
        return []
    lines = [
        "## Cold start",
        "",
        "| run | first query ms (wall, p50) | its engine search ms | second query ms |",
        "|---|---|---|---|",
    ]
    for res in results:
        for label, row in res["runs"].items():
            lines.append(
                f"| {label} | {row['first_ms']} | {row['first_search_ms']} | {row['second_ms']} |"
            )
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--latency", nargs="*", default=[], help="LABEL=bench.latency JSON")
    ap.add_argument("--throughput", nargs="*", default=[], help="LABEL=bench.latency JSON")
    ap.add_argument("--recall", nargs="*", default=[], type=Path)
    ap.add_argument("--profile", nargs="*", default=[], type=Path)
    ap.add_argument("--cold", nargs="*", default=[], type=Path)
    ap.add_argument("--notes", type=Path, help="markdown placed after the summary")
    ap.add_argument("--title", default="kemem-es performance (issue 13)")
    args = ap.parse_args(argv)
    load = lambda p: json.loads(p.read_text())  # noqa: E731
    m = machine_info()
    lines = [
        f"# {args.title}",
        "",
        f"- machine: {m['nproc']} CPUs ({cpu_label(m)}), {m['ram_gib']} GiB RAM, {m['platform']}, "
        f"Python {m['python']}",
        "",
    ]
    if args.notes:
        lines += [args.notes.read_text().rstrip(), ""]
    lines += latency_section(_labelled(args.latency))
    lines += qps_section(_labelled(args.latency))
    lines += recall_section([load(p) for p in args.recall])
    lines += throughput_section(_labelled(args.throughput))
    lines += profile_section([load(p) for p in args.profile])
    lines += cold_section([load(p) for p in args.cold])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text("\n".join(lines))
    raw = {
        "latency": dict(_labelled(args.latency)),
        "throughput": dict(_labelled(args.throughput)),
        "recall": [load(p) for p in args.recall],
        "profile": [load(p) for p in args.profile],
        "cold": [load(p) for p in args.cold],
    }
    (args.out / "results.json").write_text(json.dumps(raw, ensure_ascii=False, indent=1))
    print(args.out / "report.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
