"""onnxruntime session options for a serving process (issue 42).

onnxruntime's intra-op thread pool spins while it waits for work, by default. On a machine
whose cores also run the search engine and other requests, the spinning threads burn the CPU
those need: measured on 2 cores under load, an int8 query embedding took 10.4 ms of CPU with
spinning and 4.9 without (a 6-turn dialogue window 56 → 32 ms), and finished sooner under
concurrency. Spinning only changes how idle threads wait, never what they compute: vectors
are identical. ``KEMEM_EMBED_SPIN=1`` turns it back on (a machine that runs only the model).
"""

from __future__ import annotations

import os
from typing import Any

_SPIN_ENV = "KEMEM_EMBED_SPIN"


def spinning() -> bool:
    return os.environ.get(_SPIN_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def session_options(threads: int) -> Any:
    """SessionOptions: ``threads`` intra-op threads (0: onnxruntime's default), full graph
    optimisation, and no spin-waiting unless ``KEMEM_EMBED_SPIN`` asks for it."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    spin = "1" if spinning() else "0"
    opts.add_session_config_entry("session.intra_op.allow_spinning", spin)
    opts.add_session_config_entry("session.inter_op.allow_spinning", spin)
    return opts
