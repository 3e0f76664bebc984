"""What every command shares: settings from flags, one-line errors, exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from kemem_es.errors import InvalidInput, KememError

console = Console()
err_console = Console(stderr=True)

EXIT_OK = 0
EXIT_PARTIAL = 1  # some records rejected (with --skip-invalid), the rest written
EXIT_INVALID = 2  # invalid input: nothing written
EXIT_ERROR = 3  # engine, model or setup error

MAX_PROBLEMS_SHOWN = 20


def _engine_errors() -> tuple[type[BaseException], ...]:
    from elastic_transport import TransportError
    from elasticsearch import ApiError
    from opensearchpy.exceptions import OpenSearchException

    return (OpenSearchException, ApiError, TransportError)


ENGINE_ERRORS = _engine_errors()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300] or type(exc).__name__
    if "index_not_found" in text:
        text += " — nothing indexed under this prefix yet: run `kemem-es init` / `kemem-es index`"
    return text


def print_problems(problems: list[str]) -> None:
    for line in problems[:MAX_PROBLEMS_SHOWN]:
        err_console.print(f"  [red]✗[/red] {line}", highlight=False)
    if len(problems) > MAX_PROBLEMS_SHOWN:
        err_console.print(f"  … and {len(problems) - MAX_PROBLEMS_SHOWN} more")


@contextmanager
def guarded() -> Iterator[None]:
    """Turn our errors into one clear line and a meaningful exit code, never a traceback."""
    try:
        yield
    except InvalidInput as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False)
        print_problems(exc.problems)
        raise typer.Exit(EXIT_INVALID) from None
    except KememError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    except ENGINE_ERRORS as exc:  # the cluster failed mid-command (went away, rejected a call)
        err_console.print(f"[red]error:[/red] search engine: {_one_line(exc)}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
