"""Top-level typer app; each command group lives in its own module and registers itself here."""

from __future__ import annotations

import typer

from kemem_es.cli import data, engine, memory, query, serve, text

app = typer.Typer(
    name="kemem-es",
    help="Memory retrieval for Chinese companion chat on Elasticsearch / OpenSearch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (engine, data, memory, query, text, serve):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
