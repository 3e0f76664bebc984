"""Every mode's R@5 / nDCG@10 per set from the runs' JSONs, the best of a row in bold.

python bench/results/2026-12-01-auto/table.py RUN.json [RUN.json ...]
"""

from __future__ import annotations

import json
import sys

MODES = ["fusion", "vector", "rrf", "two_stage", "bm25"]


def rows(path: str) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    sets: dict[str, dict[str, tuple[float, float]]] = {}
    for mode, res in run["modes"].items():
        for name, m in res["by_set"].items():
            sets.setdefault(f"{name} (n={m['n']})", {})[mode] = (m["recall@5"], m["ndcg@10"])
    tag = " + distractors" if run.get("distractors") else ""
    return [(name + tag, cells) for name, cells in sets.items()]


def main(paths: list[str]) -> None:
    print("| set | " + " | ".join(MODES) + " |")
    print("|---|" + "---|" * len(MODES))
    for path in paths:
        for name, cells in rows(path):
            best = [max(c[i] for c in cells.values()) for i in (0, 1)]
            out = []
            for mode in MODES:
                if mode not in cells:
                    out.append("")
                    continue
                parts = [
                    f"**{v:.3f}**" if v == best[i] else f"{v:.3f}"
                    for i, v in enumerate(cells[mode])
                ]
                out.append(" / ".join(parts))
            print(f"| {name} | " + " | ".join(out) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
