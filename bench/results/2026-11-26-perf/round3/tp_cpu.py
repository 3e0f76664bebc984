"""What round 3 ran for the interleaved base/new indexing A/B (the base commit's bench tools
predate the CPU columns of ``bench.latency``): one ``index_records`` call of N events with
vectors supplied into a fresh index; docs/s and the CPU of this process and of the engine.

    python tp_cpu.py 10000 <engine pid>   # KEMEM_ENGINE_PORT / KEMEM_MODEL_DIR as for bench
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

from bench import scale
from bench.common import drop_indices, make_kemem
from bench.latency import _with_vectors, vector_pool
from kemem_es import EventRecord


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    n, java = int(sys.argv[1]), int(sys.argv[2])
    records = [r for b in scale.events(n, 12, "user", 0, 50) for r in b]
    km = make_kemem("bench-tp-cpu")
    drop_indices(km)
    km.init()
    km.embedder.embed(["预热"])
    km.tokenizer.index_text("预热")
    pool = vector_pool(km, "int8", 7)
    vecs = _with_vectors(records, pool, np.random.default_rng(7)).round(6)
    recs = [EventRecord(**r, vector=v.tolist()) for r, v in zip(records, vecs, strict=True)]
    c0, j0, t0 = cpu(os.getpid()), cpu(java), time.perf_counter()
    km.index_records(recs, kind="events", db="user")
    dt = time.perf_counter() - t0
    print(
        f"docs/s {n / dt:.0f}  wall {dt:.2f}s  client cpu {cpu(os.getpid()) - c0:.2f}s  "
        f"engine cpu {cpu(java) - j0:.2f}s  load {os.getloadavg()[0]:.2f}"
    )
    drop_indices(km)


if __name__ == "__main__":
    main()
