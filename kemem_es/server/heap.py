"""The server process's garbage collector, set for a long-running server (issue 42).

CPython's cyclic collector walks every container object of the generation it collects. A
warmed server holds a large, permanent heap (jieba's dictionary and the association lexicon,
the tokenizer and the model's glue, the app and its modules), and the objects each request
makes while it waits on the engine (parsed responses, hits, pydantic models) are promoted by
the young collections that run while they are alive, so the collector soon runs a full
collection, which holds the GIL while it walks the whole heap: under load every few seconds,
~100 ms each, stalling every request in flight (bench/results/2026-11-30-gc).

``settle`` runs once, after warm-up: a last full collection, then ``gc.freeze()`` moves what
is alive into a permanent generation the collector no longer walks, so a full collection
later walks only what requests made since. With ``gen0`` set, young collections run after
that many allocations instead of Python's 700: a request's own objects are freed by their
reference counts before most of them would have been promoted.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("kemem_es.server")


def settle(gen0: int) -> None:
    """Freeze the warmed heap; ``gen0`` > 0: the young generation's threshold."""
    gc.collect()
    gc.freeze()
    if gen0 > 0:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(gen0, gen1, gen2)
    log.info(
        "heap settled: %d objects frozen, thresholds %s", gc.get_freeze_count(), gc.get_threshold()
    )
