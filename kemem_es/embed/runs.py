"""The model's runs of one call side by side, each on one thread (issue 42).

onnxruntime can split one run over several intra-op threads. For the short inputs a memory
engine embeds (a chat turn, a memory of a few dozen tokens) that buys no time and costs CPU:
measured on 2 cores (Intel, AVX-512 VNNI, m3e-small int8), a query took 1.65 ms of CPU on one
thread against 2.4-2.6 ms on two, in the same or less wall time; a 7-turn window 7.3 ms of CPU
against 10.7, in the same 7.3 ms. What does use the cores is running several texts at once:
one call's texts (an import's memories, an utterance's sentences and its context turns) run
side by side on ``parallel`` threads, 84-token memories 6.0 → 3.0 ms a memory of wall time on
2 cores. Each run is the same computation whichever thread does it: vectors are identical.
This is for the int8 variant, whose texts run one at a time anyway (``Embedder``); fp32's
batched runs do gain from intra-op threads (a query 4.1 ms of wall time on two, 5.9 on one).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_parallel() -> int:
    """The machine's cores: what ``KEMEM_EMBED_THREADS=0`` means."""
    return max(1, os.cpu_count() or 1)


class SideBySide:
    """Runs ``fn`` over items on up to ``parallel`` threads, results in the items' order.

    One item, or ``parallel`` 1, runs in the caller's thread. The threads start on first use
    and again in a forked process (a fork keeps the pool object but not its threads)."""

    def __init__(self, parallel: int) -> None:
        self.parallel = max(1, parallel)
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if self.parallel == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._executor().map(fn, items))

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="kemem-embed")
                self._pid = os.getpid()
            return self._pool
