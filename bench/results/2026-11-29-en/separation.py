"""How well each model tells the calibration corpus's paraphrases from its unrelated pairs, per
language: calibrate.measure's stats, and how often the meant memory is the nearest of the 40.

    python bench/results/2026-11-29-en/separation.py MODEL_DIR [MODEL_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kemem_es.embed import Embedder
from kemem_es.embed import calibrate as cal


def main(dirs: list[str]) -> None:
    for d in dirs:
        e = Embedder(Path(d))
        stats = cal.measure(e)
        print(e.name, stats, "rule:", cal.candidates(stats))
        for lang, pairs in cal.corpus().items():
            q = cal._unit(cal._queries(e, [p[0] for p in pairs]))
            m = cal._unit(e.embed([p[1] for p in pairs]))
            s = q @ m.T
            n = len(pairs)
            off = ~np.eye(n, dtype=bool)
            para, unrel = np.diag(s), s[off]
            nearest = float(np.mean(np.argmax(s, axis=1) == np.arange(n)))
            above = float(np.mean([(s[i] > s[i, i]).sum() for i in range(n)]))
            print(
                f"  {lang}: n={n} nearest {nearest:.3f}, unrelated above the meant memory "
                f"{above:.2f} per line, p-u {np.median(para) - np.median(unrel):.4f}, "
                f"sd(unrelated) {np.std(unrel):.4f}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
