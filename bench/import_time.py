"""Import and start-up time of the package: ``import kemem_es`` and ``kemem-es --help``.

For each tree given (a checkout's root: its ``kemem_es`` is imported, through PYTHONPATH), runs
each command ``--runs`` times, interleaving the trees so that a busy machine weighs on both
alike, and reports the median wall time and the median ``python -X importtime`` total of the
top-level module (microseconds, as Python reports it).

    python bench/import_time.py --tree before=/tmp/base --tree after=. --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HELP = "import sys; sys.argv = ['kemem-es', '--help']; from kemem_es.cli.app import main; main()"
COMMANDS = {
    "python -c pass": ["-X", "importtime", "-c", "pass"],  # the interpreter alone
    "import kemem_es": ["-X", "importtime", "-c", "import kemem_es"],
    "kemem-es --help": ["-X", "importtime", "-c", HELP],  # what the console script runs
}
TOP = {
    "python -c pass": "site",
    "import kemem_es": "kemem_es",
    "kemem-es --help": "kemem_es.cli.app",
}


def run_once(root: str, args: list[str], top: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": root}
    start = time.perf_counter()
    done = subprocess.run(  # cwd: the tree itself (``-c`` puts the cwd first on sys.path)
        [sys.executable, *args], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    total = 0
    for line in done.stderr.splitlines():  # "import time: self | cumulative | name"
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == top:
            total = int(parts[1])
    return wall, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="name=path")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    results: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for _ in range(args.runs):
        for command, argv in COMMANDS.items():
            for name, root in trees.items():
                results.setdefault((name, command), []).append(
                    run_once(os.path.abspath(root), argv, TOP[command])
                )
    print("| tree | command | median wall s | median importtime s (top module) | runs |")
    print("| --- | --- | --- | --- | --- |")
    for (name, command), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        imp = statistics.median(r[1] for r in runs) / 1e6
        print(f"| {name} | `{command}` | {wall:.3f} | {imp:.3f} | {len(runs)} |")


if __name__ == "__main__":
    main()
