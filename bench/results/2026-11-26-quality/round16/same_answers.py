"""Round 14's English dev run (2 workers, one Snowball stemmer shared by the threads) against
the same store asked again with the per-thread stemmer and 8 workers: every mode's top 10 for
every query, compared.

    python -m bench.dialogue_eval --corpus en --prefix bench-q14-ew --reuse --keep --workers 8 \
        --out bench/results/2026-11-26-quality/round16/en_written_8_workers.json
    python bench/results/2026-11-26-quality/round16/same_answers.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
before = json.loads((HERE.parent / "round14" / "en_written.json").read_text())
after = json.loads((HERE / "en_written_8_workers.json").read_text())
for mode, run in before["modes"].items():
    old, new = run["top10"], after["modes"][mode]["top10"]
    same = sum(old[k] == new.get(k) for k in old)
    print(
        f"{mode:10s} R@5 {run['recall@5']:.4f} → {after['modes'][mode]['recall@5']:.4f}; "
        f"top 10 identical for {same} of {len(old)} queries"
    )
