"""How many primary shards a memory index gets, from how many memories it will hold.

Every scope is routed to one shard, so a chat query reads one shard per index and its
filtered ANN search walks that shard's HNSW graph: the fewer other tenants' memories share the
graph, the less the search has to skip. Two limits decide the count (numbers measured in
``bench/results/2026-11-26-perf``, 3.5 on 2 cores, force-merged):

- latency: a shard of at most ``SHARD_MEMORIES`` memories keeps a heavy user's (20k memories)
  filtered search short;
- size: ~2.6 KB of disk per event (float vectors), so ``SHARD_MEMORIES`` is far below the
  10–30 GB a shard is usually sized at; the size limit only matters above that.
"""

from __future__ import annotations

import math

SHARD_MEMORIES = 125_000  # most memories per primary shard of a user-db index
BYTES_PER_MEMORY = 2_600  # force-merged event with a 512-float vector (OpenSearch 3.5)
SHARD_MAX_BYTES = 30 * 2**30
MAX_SHARDS = 64


def plan_shards(expected_memories: int, per_shard: int = SHARD_MEMORIES) -> int:
    """Primary shards for an index expected to hold this many memories (at least 1)."""
    if expected_memories < 0:
        raise ValueError("expected_memories must be ≥ 0")
    by_latency = math.ceil(expected_memories / per_shard)
    by_size = math.ceil(expected_memories * BYTES_PER_MEMORY / SHARD_MAX_BYTES)
    return max(1, min(MAX_SHARDS, max(by_latency, by_size)))
