"""`kemem-es engine install|start|stop|status`: the local development node."""

from __future__ import annotations

import typer
from rich.table import Table

from kemem_es.cli.common import console, guarded
from kemem_es.config import get_settings
from kemem_es.engine import connect
from kemem_es.engine.local import LocalEngine
from kemem_es.errors import EngineUnavailable
from kemem_es.store.layout import DATABASES, KINDS, index_alias

engine_app = typer.Typer(help="The local search node (OpenSearch from Maven Central).")


def _local(home: str | None, port: int | None) -> LocalEngine:
    return LocalEngine(get_settings(home=home, engine_port=port))


HomeOpt = typer.Option(None, "--home", help="engine home (default: KEMEM_HOME or ~/.kemem)")
PortOpt = typer.Option(None, "--port", help="HTTP port (default: KEMEM_ENGINE_PORT or 9251)")


@engine_app.command()
def install(home: str | None = HomeOpt, force: bool = False) -> None:
    """Fetch the engine jars with Maven (no start)."""
    with guarded():
        eng = _local(home, None)
        eng.install(force=force)
        console.print(f"engine jars in {eng.paths.lib}")


@engine_app.command()
def start(home: str | None = HomeOpt, port: int | None = PortOpt) -> None:
    """Start the node (idempotent) and wait until it is healthy."""
    with guarded():
        url = _local(home, port).start()
        console.print(f"local engine running at {url}")


@engine_app.command()
def stop(home: str | None = HomeOpt, port: int | None = PortOpt) -> None:
    """Stop the node this home started (nothing else)."""
    with guarded():
        stopped = _local(home, port).stop()
        console.print("stopped" if stopped else "not running")


@engine_app.command()
def status(home: str | None = HomeOpt, port: int | None = PortOpt) -> None:
    """Version, health and document counts of the configured cluster."""
    with guarded():
        settings = get_settings(home=home, engine_port=port)
        if not settings.es_url:
            local = LocalEngine(settings)
            console.print(f"local engine: pid {local.pid() or '-'}, home {settings.home}")
        try:
            engine = connect(settings)
        except EngineUnavailable as exc:
            console.print(f"[yellow]not reachable[/yellow]: {exc}")
            raise typer.Exit(3) from None
        health = engine.health()
        console.print(
            f"{engine.dialect} {engine.version} at {engine.url} — "
            f"cluster {health.get('cluster_name')} [bold]{health.get('status')}[/bold]"
        )
        table = Table("index (alias)", "docs")
        for db in DATABASES:
            for kind in KINDS:
                alias = index_alias(settings.index_prefix, db, kind)
                docs = engine.count(alias) if engine.index_exists(alias) else None
                table.add_row(alias, "-" if docs is None else str(docs))
        console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(engine_app, name="engine")
