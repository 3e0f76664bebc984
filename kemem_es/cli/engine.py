"""`kemem-es engine install|start|stop|status`: the local development node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from kemem_es.cli.common import console, err_console, guarded, options_named, styled
from kemem_es.errors import EngineUnavailable, InvalidInput

if TYPE_CHECKING:
    from kemem_es.config import Settings
    from kemem_es.engine.local import LocalEngine

engine_app = typer.Typer(
    help="The local search node (OpenSearch, or an Elasticsearch development node, from Maven "
    "Central)."
)


def _local(
    home: str | None,
    port: int | None,
    version: str | None = None,
    nodes: int | None = None,
    engine: str | None = None,
) -> LocalEngine:
    from kemem_es.engine.local import ENGINES, LocalEngine

    if engine is not None and engine not in ("opensearch", "elasticsearch"):
        raise InvalidInput(
            f"unknown engine {engine!r}; use opensearch or elasticsearch", field="engine"
        )
    if version is not None and version not in ("auto", *ENGINES):
        raise InvalidInput(  # an invalid option (exit 2), not a setup error
            f"unknown engine version {version!r}; use one of auto, {', '.join(ENGINES)}",
            field="engine_version",
        )
    return LocalEngine(
        _settings(
            home=home, engine_port=port, engine_version=version, engine_nodes=nodes, engine=engine
        )
    )


OPTION_NAMES = {
    "engine_port": "--port",
    "engine_nodes": "--nodes",
    "engine_version": "--engine-version",
    "engine": "--engine",
}


def _settings(**options: Any) -> Settings:
    """A bad setting names its option (``--nodes``), or its KEMEM_* variable when it came from
    the environment (config.get_settings), not the field (``engine_nodes``)."""
    from kemem_es.config import get_settings

    with options_named(OPTION_NAMES):
        return get_settings(**options)


def _notes(eng: LocalEngine) -> None:
    for note in eng.notes:
        err_console.print(note, highlight=False, soft_wrap=True)


HomeOpt = typer.Option(None, "--home", help="engine home (default: KEMEM_HOME or ~/.kemem)")
PortOpt = typer.Option(None, "--port", help="HTTP port (default: KEMEM_ENGINE_PORT or 9251)")
VersionOpt = typer.Option(
    None,
    "--engine-version",
    help="auto (OpenSearch: 3.5 on a JDK 21+, else 2.19; Elasticsearch: 9.5 on a JDK 21+, else "
    "8.18), or one of 3.5, 2.19, 9.5, 8.18 (default: KEMEM_ENGINE_VERSION)",
)
EngineOpt = typer.Option(
    None,
    "--engine",
    help="opensearch, or elasticsearch: a development node from Maven Central without Painless, "
    "analysis-common, mapper-extras and reindex (default: KEMEM_ENGINE or opensearch)",
)


@engine_app.command()
def install(
    home: str | None = HomeOpt,
    version: str | None = VersionOpt,
    force: bool = False,
    engine: str | None = EngineOpt,
) -> None:
    """Fetch the engine jars with Maven (no start)."""
    with guarded():
        eng = _local(home, None, version, engine=engine)
        spec = eng.install(force=force)
        _notes(eng)
        console.print(f"{spec.name} jars in {eng.paths.lib(spec.version)}")


@engine_app.command()
def start(
    home: str | None = HomeOpt,
    port: int | None = PortOpt,
    version: str | None = VersionOpt,
    nodes: int | None = typer.Option(
        None, "--nodes", help="a local cluster of N nodes on ports PORT.. (KEMEM_ENGINE_NODES)"
    ),
    engine: str | None = EngineOpt,
) -> None:
    """Start the node (idempotent) and wait until it is healthy."""
    with guarded():
        eng = _local(home, port, version, nodes, engine)
        url = eng.start()
        _notes(eng)
        state = eng.state()
        console.print(
            f"local engine {_product(state)} {state.get('release', '?')} on Java "
            f"{state.get('java_version', '?')} running at {url}"
        )
        if state.get("missing"):
            console.print(
                "  a development node: it lacks " + "; ".join(state["missing"]),
                highlight=False,
                soft_wrap=True,
            )


def _product(state: dict[str, Any]) -> str:
    return "Elasticsearch" if state.get("product") == "elasticsearch" else "OpenSearch"


@engine_app.command()
def stop(home: str | None = HomeOpt, port: int | None = PortOpt) -> None:
    """Stop the node this home started (nothing else)."""
    with guarded():
        stopped = _local(home, port).stop()
        console.print("stopped" if stopped else "not running")


@engine_app.command()
def status(home: str | None = HomeOpt, port: int | None = PortOpt) -> None:
    """Version, health and document counts of the configured cluster."""
    from rich.table import Table
    from rich.text import Text

    from kemem_es.engine import connect
    from kemem_es.engine.local import LocalEngine
    from kemem_es.store.layout import DATABASES, KINDS, history_alias, index_alias, users_alias

    with guarded():
        settings = _settings(home=home, engine_port=port)
        if not settings.es_url:
            local = LocalEngine(settings)
            pid = local.pid()
            console.print(f"local engine: pid {pid or '-'}, home {settings.home}")
            state = local.state()
            if pid and not state:
                console.print("  engine OpenSearch 2.19 (started by an earlier kemem-es)")
            if pid and state:
                simd, why = local.simd()
                console.print(
                    f"  engine {_product(state)} {state.get('release')}, "
                    f"{state.get('nodes', 1)} node(s) "
                    f"(data {state.get('base')})\n"
                    f"  JDK    Java {state.get('java_version')} at {state.get('java_home')} "
                    f"(from {state.get('java_source')})\n"
                    f"  SIMD   {'on' if simd else 'off'} — {why}",
                    highlight=False,
                    soft_wrap=True,
                )
                for missing in state.get("missing", []):
                    console.print(f"  lacks  {missing}", highlight=False, soft_wrap=True)
        try:
            engine = connect(settings)
        except EngineUnavailable as exc:
            console.print(styled("not reachable", "yellow", f": {exc}"))
            raise typer.Exit(3) from None
        health = engine.health()
        where = f"{engine.dialect.name} {engine.version} at {engine.url} — "
        cluster = f"cluster {health.get('cluster_name')} "
        console.print(Text.assemble(where, cluster, (str(health.get("status")), "bold")))
        jvm = _cluster_jvm(engine)
        if jvm:
            console.print(jvm, highlight=False, soft_wrap=True)
        table = Table("index (alias)", "docs")
        prefix = settings.index_prefix
        aliases = [index_alias(prefix, db, kind) for db in DATABASES for kind in KINDS]
        for alias in [*aliases, history_alias(prefix), users_alias(prefix)]:
            docs = engine.count(alias) if engine.index_exists(alias) else None
            table.add_row(alias, "-" if docs is None else str(docs))
        console.print(table)
        from kemem_es.cli.data import calibration_line
        from kemem_es.store.embedding import stored

        cal = stored(engine)
        if cal is not None:
            console.print(calibration_line(cal), highlight=False, soft_wrap=True)


def _cluster_jvm(engine) -> str | None:
    from kemem_es.engine.local import jvm_info

    info = jvm_info(engine)
    if info is None:
        return None
    n = info["nodes"]
    return (
        f"JVM {', '.join(info['versions'])} on {n} node(s); "
        f"vector incubator module (SIMD) on {info['simd_nodes']} of {n}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(engine_app, name="engine")
