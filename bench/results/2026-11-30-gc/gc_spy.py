"""A sitecustomize for a measured server: every garbage collection of a ``kemem-es serve``
process (generation, pause, objects collected) appended to $GC_SPY_DIR/gc-<pid>.txt.

Put a directory holding this file as ``sitecustomize.py`` on the server's PYTHONPATH
(gc_pauses.sh does); other processes that import it write nothing."""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Any, TextIO

_out: list[TextIO] = []
_start = [0.0]


def _seen(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _start[0] = time.perf_counter()
        return
    if not _out:
        path = os.path.join(os.environ["GC_SPY_DIR"], f"gc-{os.getpid()}.txt")
        _out.append(open(path, "a", buffering=1))  # noqa: SIM115 - open for the process's life
    pause = (time.perf_counter() - _start[0]) * 1000
    _out[0].write(f"{time.time():.3f} {info['generation']} {pause:.3f} {info['collected']}\n")


if "serve" in sys.argv and os.environ.get("GC_SPY_DIR"):
    gc.callbacks.append(_seen)
