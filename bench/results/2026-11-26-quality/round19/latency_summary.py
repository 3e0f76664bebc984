"""Warm p50 medians of interleaved bench.latency_ab runs: DIR ROUNDS VERSIONS (latency 6 AB)."""

import json
import statistics as st
import sys
from pathlib import Path


def p50(path: Path, scenario: str, stage: str = "total") -> float:
    with path.open() as f:
        return round(json.load(f)["scenarios"][scenario][stage]["p50"], 2)


def main() -> None:
    folder, rounds, versions = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    for sc in ("per_user", "large_approx", "large_exact"):
        vals = {
            v: [p50(folder / f"{v}{i}.json", sc) for i in range(1, rounds + 1)] for v in versions
        }
        med = {v: st.median(vals[v][1:]) for v in versions}
        print(f"{sc:13s} " + " | ".join(f"{v} {vals[v]}" for v in versions))
        ratios = " ".join(f"{v}/A {med[v] / med['A']:.3f}" for v in versions[1:])
        print(
            "              warm median " + " ".join(f"{v} {med[v]:.2f}" for v in versions), ratios
        )


if __name__ == "__main__":
    main()
