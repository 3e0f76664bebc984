"""`kemem-es serve`: the HTTP server (needs the ``[server]`` extra)."""

from __future__ import annotations

import ipaddress
import logging
import os
from typing import TYPE_CHECKING

import typer

from kemem_es.cli.common import EXIT_ERROR, EXIT_INVALID, error, guarded
from kemem_es.errors import EngineUnavailable, InvalidInput

if TYPE_CHECKING:
    from kemem_es.async_kemem import AsyncKemem
    from kemem_es.config import Settings

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind"),
    port: int = typer.Option(8765, "--port", help="port to bind (0: any free one)"),
    insecure: bool = typer.Option(
        False, "--insecure", help="allow a non-loopback address without API keys"
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning, error"),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="server processes (each with its own model and engine connections; metrics are "
        "summed across them)",
    ),
) -> None:
    """Serve /query, /query_simple and /v1/memories over HTTP (OpenAPI at /docs).

    API keys: KEMEM_SERVER_API_KEYS='{"key": ["agent_a"], "admin": ["*"]}'."""
    try:
        import uvicorn

        from kemem_es.server.app import create_app
    except ImportError as exc:
        error(f"the server needs its extra: pip install 'kemem-es[server]' ({exc})")
        raise typer.Exit(EXIT_ERROR) from None
    if log_level.lower() not in LOG_LEVELS:
        error(f"--log-level: one of {', '.join(LOG_LEVELS)}")
        raise typer.Exit(EXIT_INVALID)
    settings = _checked_settings(host, insecure)
    _configure_logging(log_level)
    km = _warmed_kemem(settings)
    if not settings.server_api_keys:
        logging.getLogger("kemem_es.server").warning("no API keys configured: open access")
        # the name it binds is one its clients may use (the Host check, server.app.HostCheck)
        hosts = [*settings.server_allowed_hosts, host]
        settings = settings.model_copy(update={"server_allowed_hosts": hosts})
    if workers > 1:  # the settings were checked above; each worker builds its own app
        _serve_workers(host, port, workers, log_level)
        return
    # The app warms up (engine, names) before it takes traffic and closes km at shutdown.
    app = create_app(km, settings, close=True)
    # Our own request log replaces uvicorn's access log (which would print query strings).
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False)


def _checked_settings(host: str, insecure: bool) -> Settings:
    """The settings, or exit: a bad KEMEM_* setting, an unusable key setting, or a
    non-loopback address without API keys (unless ``insecure``)."""
    from kemem_es.config import get_settings

    try:
        settings = get_settings()
    except InvalidInput as exc:  # a KEMEM_* setting, named (never quoting its value)
        detail = str(exc)
        if exc.field == "KEMEM_SERVER_API_KEYS":
            detail = 'KEMEM_SERVER_API_KEYS must be a JSON object {"key": ["agent_id", ...]}'
        error(f"settings: {detail}", soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None
    from kemem_es.server.auth import KeyRing

    try:  # before the model loads: an unusable key setting fails at once
        KeyRing(settings.server_api_keys)
    except ValueError as exc:  # an empty or blank key (the message never quotes a key)
        error(str(exc), soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None
    if not settings.server_api_keys and not is_loopback(host) and not insecure:
        error(
            f"refusing to serve on {host} without API keys: set "
            "KEMEM_SERVER_API_KEYS, bind 127.0.0.1, or pass --insecure",
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_INVALID)
    return settings


def _configure_logging(log_level: str) -> None:
    level = getattr(logging, log_level.upper(), logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    import jieba  # noqa: F401  (it sets its own logger to DEBUG on import)

    # One line per request is ours; the clients' per-call lines (and trace bodies: user text)
    # and jieba's start-up chatter stay below INFO.
    for noisy in ("jieba", "opensearch", "opensearchpy.trace", "elastic_transport"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def _warmed_kemem(settings: Settings) -> AsyncKemem:
    from kemem_es.async_kemem import AsyncKemem

    km = AsyncKemem(settings)
    with guarded():  # a missing model or a bad text file fails now, not on every request
        try:
            km.core.embedder  # noqa: B018
        except EngineUnavailable as exc:  # auto waits for the store to say which variant
            logging.getLogger("kemem_es.server").warning("model not loaded at start: %s", exc)
        km.core.tokenizer  # noqa: B018
        km.core.expander  # noqa: B018  (the lexicon, its overrides and the IDF table)
    return km


def _serve_workers(host: str, port: int, workers: int, log_level: str) -> None:
    import uvicorn

    from kemem_es.server import workers as multi

    os.environ[multi.HOST_ENV] = host
    # the cores shared among the workers' models, unless set: the workers run side by side
    os.environ.setdefault("KEMEM_EMBED_THREADS", str(multi.threads_per_worker(workers)))
    metrics_dir = multi.shared_metrics_dir()
    try:
        uvicorn.run(
            "kemem_es.server.workers:app",
            factory=True,
            workers=workers,
            host=host,
            port=port,
            log_level=log_level.lower(),
            access_log=False,
        )
    finally:
        multi.cleanup(metrics_dir)


def mcp(
    user: str | None = typer.Option(
        None, "--user", help="the one user its tools serve (else each call names one)"
    ),
    agent: str | None = typer.Option(
        None, "--agent", help="the one agent its tools serve (default: KEMEM_DEFAULT_AGENT_ID)"
    ),
) -> None:
    """An MCP server on stdin/stdout (tools remember, recall, context, forget,
    list_memories), for an
    agent that starts it; `kemem-es serve` has the same tools over HTTP at /mcp."""
    try:
        from kemem_es.mcp_server import run_stdio
    except ImportError as exc:
        error(f"the MCP server needs its extra: pip install 'kemem-es[mcp]' ({exc})")
        raise typer.Exit(EXIT_ERROR) from None
    # stdout carries the protocol: every log line goes to stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    with guarded():
        run_stdio(user, agent)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(mcp)
