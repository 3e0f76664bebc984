"""``kemem-es serve --workers N``: every worker's counters are the server's (issue 42)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

WORKER = """
import sys
from kemem_es.server.metrics import Metrics
m = Metrics()
for _ in range(int(sys.argv[1])):
    m.request("/query", "POST", 200, 0.01)
"""

READER = """
from kemem_es.server.metrics import Metrics
m = Metrics()
data, _ = m.render()
for line in data.decode().splitlines():
    if line.startswith("kemem_http_requests_total{"):
        print(line)
"""


def run(code: str, env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def test_metrics_are_summed_over_the_workers(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    run(WORKER, env, "3")  # two workers (processes), one after the other
    run(WORKER, env, "2")
    line = run(READER, env).strip()
    assert 'route="/query"' in line and line.endswith(" 5.0")


def test_threads_per_worker_share_the_cores() -> None:
    from kemem_es.server.workers import threads_per_worker

    cores = os.cpu_count() or 1
    assert threads_per_worker(1) == cores
    assert threads_per_worker(cores * 4) == 1
