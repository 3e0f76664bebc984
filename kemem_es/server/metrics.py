"""Prometheus metrics (when prometheus_client is installed): requests by route and status,
latency, /query's per-stage times, degraded answers, failed background extractions. One
registry per app, so several apps in one process don't clash."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# The counters are the whole server's (every agent's traffic): a key that serves only some
# agents must not watch the others' (the README: a key sees only its agents). Numbers per agent
# would need a label per agent on every series; the aggregate is an operator's, so a key
# without "*" is refused it (/metrics: 403; the dashboard's live panel: hidden).
METRICS_OPERATORS_ONLY = (
    'metrics are server-wide (every agent\'s traffic): only an operator key (agents ["*"]) '
    "reads them"
)


class Metrics:
    registry: CollectorRegistry | None

    def __init__(self) -> None:
        try:
            import prometheus_client as prom
        except ImportError:  # the [server] extra brings it; without it /metrics is a 404
            self.registry = None
            return
        self._prom = prom
        self._own: list[Any] = []  # collectors of this process only (read at each scrape)
        self.registry = prom.CollectorRegistry()
        self._requests = prom.Counter(
            "kemem_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self._latency = prom.Histogram(
            "kemem_http_request_seconds",
            "HTTP request latency by route template",
            ["route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self._stages = prom.Histogram(
            "kemem_query_stage_seconds",
            "/query time per stage (additional_info's 检索耗时)",
            ["stage"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
            registry=self.registry,
        )
        self._degraded = prom.Counter(
            "kemem_degraded_answers",
            "/query answers empty or partial because the engine or an index was unavailable",
            registry=self.registry,
        )
        self._overloaded = prom.Counter(
            "kemem_overloaded_requests",
            "requests refused with 429: too many in flight",
            registry=self.registry,
        )

        self._proxy_tokens = prom.Counter(
            "kemem_proxy_tokens",
            "the proxy's tokens by agent, user and kind: prompt and completion (the upstream's "
            "usage), memory (the injected memory text)",
            ["agent", "user", "kind"],
            registry=self.registry,
        )
        self._proxy_requests = prom.Counter(
            "kemem_proxy_requests",
            "requests the proxy answered from its upstream, by agent and user",
            ["agent", "user"],
            registry=self.registry,
        )

    @property
    def enabled(self) -> bool:
        return self.registry is not None

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        if self.enabled:
            self._requests.labels(route, method, str(status)).inc()
            self._latency.labels(route).observe(seconds)

    def stages(self, timings_ms: dict[str, float]) -> None:
        if self.enabled:
            for stage, ms in timings_ms.items():
                self._stages.labels(stage).observe(ms / 1000)

    def degraded(self) -> None:
        if self.enabled:
            self._degraded.inc()

    def proxy_usage(self, agent: str, user: str, prompt: int, completion: int, memory: int) -> None:
        if self.enabled:
            self._proxy_requests.labels(agent, user).inc()
            for kind, n in (("prompt", prompt), ("completion", completion), ("memory", memory)):
                self._proxy_tokens.labels(agent, user, kind).inc(max(n, 0))

    def overloaded(self) -> None:
        if self.enabled:
            self._overloaded.inc()

    def count_extraction_failures(self, failures: Callable[[], int]) -> None:
        """``kemem_background_extraction_failures_total``, read from ``failures()`` at each
        scrape: an ``infer="background"`` answer is 200 before its extraction runs, so this is
        how an operator sees the turns that never got extracted."""
        if not self.enabled:
            return
        from prometheus_client.core import CounterMetricFamily as family

        class Collector:
            def collect(self) -> Iterator[Any]:
                yield family(
                    "kemem_background_extraction_failures",
                    'infer="background" extractions that failed (the log line names each)',
                    value=failures(),
                )

        assert self.registry is not None
        self._own.append(Collector())
        self.registry.register(self._own[-1])

    def read_registry(self) -> CollectorRegistry | None:
        """What /metrics and the dashboard read: this process's registry, or, under several
        workers (``PROMETHEUS_MULTIPROC_DIR`` set, server.workers), every worker's counters
        summed from their files (the extraction-failures count stays this worker's)."""
        if self.registry is None or not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return self.registry
        from prometheus_client import multiprocess

        merged = self._prom.CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)
        for collector in self._own:
            merged.register(collector)
        return merged

    def render(self) -> tuple[bytes, str]:
        """The exposition text (only when ``enabled``)."""
        registry = self.read_registry()
        assert registry is not None
        return self._prom.generate_latest(registry), self._prom.CONTENT_TYPE_LATEST
