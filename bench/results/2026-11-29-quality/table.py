"""Set x mode table (R@5 / nDCG@10) from this folder's dialogue_eval JSONs.

python bench/results/2026-11-29-quality/table.py base us07
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
MODES = ("fusion", "vector", "rrf", "two_stage", "bm25")
CORPORA = ("check", "zh", "en", "hard", "fresh", "implied")


def rows(tag: str) -> list[tuple[str, int, dict[str, tuple[float, float]]]]:
    out = []
    for c in CORPORA:
        p = HERE / f"{tag}-{c}.json"
        if not p.exists():
            continue
        d = json.loads(p.read_text())
        sets = next(iter(d["modes"].values()))["by_set"]
        for s, sub in sets.items():
            cells = {
                m: (r["by_set"][s]["recall@5"], r["by_set"][s]["ndcg@10"])
                for m, r in d["modes"].items()
                if s in r["by_set"]
            }
            out.append((s, sub["n"], cells))
    return out


def table(tag: str) -> str:
    lines = [f"**{tag}**", "", "| set (n) | " + " | ".join(MODES) + " |", "|---" * 6 + "|"]
    for s, n, cells in rows(tag):
        best5 = max(v[0] for v in cells.values())
        bestn = max(v[1] for v in cells.values())
        out = []
        for m in MODES:
            if m not in cells:
                out.append("")
                continue
            r5, nd = cells[m]
            a = f"**{r5:.3f}**" if r5 >= best5 - 1e-9 else f"{r5:.3f}"
            b = f"**{nd:.3f}**" if nd >= bestn - 1e-9 else f"{nd:.3f}"
            out.append(f"{a} / {b}")
        lines.append(f"| {s} ({n}) | " + " | ".join(out) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    for tag in sys.argv[1:] or ["base"]:
        print(table(tag))
        print()
