"""Top-level typer app; each command group lives in its own module and registers itself here."""

from __future__ import annotations

import os
import sys

import typer

from kemem_es.cli import context, data, engine, memory, query, serve, text
from kemem_es.cli.common import EXIT_INVALID, error

app = typer.Typer(
    name="kemem-es",
    help="Memory retrieval for Chinese companion chat on Elasticsearch / OpenSearch.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for the shell
    pretty_exceptions_enable=False,
)


def _version(shown: bool) -> None:
    if shown:
        from kemem_es import __version__

        print(f"kemem-es {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """Memory retrieval for Chinese companion chat on Elasticsearch / OpenSearch."""


for module in (engine, data, memory, query, context, text, serve):
    module.register(app)


def not_utf8(args: list[str]) -> str | None:
    """Python keeps a command-line byte that is not UTF-8 as a lone surrogate (U+DC80–U+DCFF),
    which the text checks would report as one: name the real cause, the terminal's encoding.
    A path that exists is fine as it is (a file named in another encoding)."""
    for n, arg in enumerate(args, start=1):
        try:
            arg.encode()
        except UnicodeEncodeError as exc:
            if os.path.exists(arg):
                continue
            byte = ord(arg[exc.start]) - 0xDC00
            return (
                f"argument {n} is not valid UTF-8 (byte 0x{byte:02x} at character {exc.start}); "
                "is the terminal set to UTF-8?"
            )
    return None


def main() -> None:
    problem = not_utf8(sys.argv[1:])
    if problem:
        error(problem, soft_wrap=True)
        sys.exit(EXIT_INVALID)
    app()


if __name__ == "__main__":
    main()
