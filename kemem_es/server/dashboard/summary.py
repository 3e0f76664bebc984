"""The server's own Prometheus metrics, read back in process and summarised for the dashboard:
request counters of the recall routes and per-stage latency percentiles (estimated from the
histogram buckets the way Prometheus' ``histogram_quantile`` does). The page polls this and
turns counter deltas into rates; no second metrics pipeline is kept."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

QUERY_ROUTES = ("/query", "/query_simple")
QUANTILES = (0.5, 0.95, 0.99)
# Pipeline order (docs/SPEC.md §2); a stage not listed goes before "total".
STAGE_ORDER = ("tokenise", "expand", "embed", "search_entities", "search_events", "assemble")


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of a cumulative histogram ``[(upper bound, count ≤ bound), ...]`` sorted by
    bound (the last one +Inf), linearly interpolated inside its bucket; None when empty. A
    quantile in the +Inf bucket is reported as the highest finite bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def summarize(registry: CollectorRegistry | None, started: float) -> dict[str, Any]:
    """Counters (cumulative since the server started) and per-stage percentiles in ms."""
    out: dict[str, Any] = {
        "enabled": registry is not None,
        "at": time.time(),
        "uptime_s": round(time.time() - started, 1),
        "requests": 0,
        "queries": 0,
        "query_errors": 0,
        "query_rejected": 0,
        "degraded": 0,
        "stages": [],
    }
    if registry is None:
        return out
    stage_buckets: dict[str, list[tuple[float, float]]] = {}
    stage_sums: dict[str, float] = {}
    for family in registry.collect():
        for s in family.samples:
            if s.name == "kemem_http_requests_total":
                n = int(s.value)
                out["requests"] += n
                if s.labels.get("route") in QUERY_ROUTES:
                    status = int(s.labels.get("status", "0"))
                    out["queries"] += n
                    if status >= 500:
                        out["query_errors"] += n
                    elif status >= 400:
                        out["query_rejected"] += n
            elif s.name == "kemem_degraded_answers_total":
                out["degraded"] += int(s.value)
            elif s.name == "kemem_query_stage_seconds_bucket":
                bound = float(s.labels["le"])
                stage_buckets.setdefault(s.labels["stage"], []).append((bound, s.value))
            elif s.name == "kemem_query_stage_seconds_sum":
                stage_sums[s.labels["stage"]] = s.value
    for stage, buckets in stage_buckets.items():
        buckets.sort()
        count = int(buckets[-1][1]) if buckets else 0
        row: dict[str, Any] = {"stage": stage, "count": count}
        for q in QUANTILES:
            v = quantile(q, buckets)
            row[f"p{round(q * 100)}_ms"] = None if v is None else round(v * 1000, 3)
        row["mean_ms"] = round(stage_sums.get(stage, 0.0) * 1000 / count, 3) if count else None
        out["stages"].append(row)

    def place(row: dict[str, Any]) -> tuple[int, str]:
        name = row["stage"]
        if name == "total":
            return (len(STAGE_ORDER) + 1, name)
        return (STAGE_ORDER.index(name) if name in STAGE_ORDER else len(STAGE_ORDER), name)

    out["stages"].sort(key=place)
    return out
