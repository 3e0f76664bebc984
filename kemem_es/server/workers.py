"""Several server processes (``kemem-es serve --workers N``, issue 42).

One process serves every request's Python (HTTP parsing, validation, request bodies, the
answer) on one core at a time: its GIL. With N workers uvicorn forks... spawns N processes
that accept on the same socket; each builds its own app here (``app``, a factory) with its own
AsyncKemem, model and engine connections. The metrics stay the server's, not one worker's:
``serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before the workers start, so
every worker's counters land there and /metrics and the dashboard read them summed
(``Metrics.read_registry``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from fastapi import FastAPI

HOST_ENV = "KEMEM__SERVE_HOST"  # the address ``serve`` binds: a keyless server answers for it
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def app() -> FastAPI:
    """One worker's app, as ``kemem-es serve`` builds it in a single process."""
    from kemem_es.async_kemem import AsyncKemem
    from kemem_es.config import get_settings
    from kemem_es.server.app import create_app

    settings = get_settings()
    host = os.environ.get(HOST_ENV)
    if not settings.server_api_keys and host:
        hosts = [*settings.server_allowed_hosts, host]
        settings = settings.model_copy(update={"server_allowed_hosts": hosts})
    km = AsyncKemem(settings)
    return create_app(km, settings, close=True)


def threads_per_worker(workers: int) -> int:
    """``KEMEM_EMBED_THREADS`` in each of ``workers`` processes: the cores shared out (at least
    one), so that the workers' model runs together use the cores once (embed.runs)."""
    return max(1, (os.cpu_count() or 1) // workers)


def shared_metrics_dir() -> Path:
    """A fresh directory for the workers' metric files (removed by ``cleanup``)."""
    path = Path(tempfile.mkdtemp(prefix="kemem-metrics-"))
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
