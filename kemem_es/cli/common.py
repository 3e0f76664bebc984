"""What every command shares: settings from flags, one-line errors, exit codes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from kemem_es.errors import InvalidInput, KememError, NotFound

if TYPE_CHECKING:
    from kemem_es.kemem import Kemem

# No Rich markup: what is printed is user data ('[/s]' in a memory, an id) or a message quoting it,
# shown as given; the CLI's own styling is explicit (``error``, ``styled``).
console = Console(markup=False)
err_console = Console(stderr=True, markup=False)

EXIT_OK = 0
EXIT_PARTIAL = 1  # some records rejected (with --skip-invalid), the rest written
EXIT_INVALID = 2  # invalid input: nothing written
EXIT_ERROR = 3  # engine, model or setup error
EXIT_NOT_FOUND = 4  # no memory with that id in that scope

MAX_PROBLEMS_SHOWN = 20


def styled(label: str, style: str, rest: str) -> Text:
    """Our own label styled, then ``rest`` as plain text (never read as markup)."""
    return Text.assemble((label, style), rest)


def error(message: str, soft_wrap: bool = False) -> None:
    """The one ``error: …`` line on stderr; the message is printed as written."""
    err_console.print(styled("error:", "red", f" {message}"), highlight=False, soft_wrap=soft_wrap)


def print_problems(problems: list[str]) -> None:
    """One ✗ per record; a record with several problems lists them under it."""
    from kemem_es.store.validation import by_record

    records = list(by_record(problems).items())
    for label, found in records[:MAX_PROBLEMS_SHOWN]:
        if len(found) == 1:
            line = f"{label}: {found[0]}" if found[0] else label
            err_console.print(styled("  ✗", "red", f" {line}"), highlight=False)
            continue
        err_console.print(styled("  ✗", "red", f" {label}: {len(found)} problems"), highlight=False)
        for problem in found:
            err_console.print(f"      {problem}", highlight=False)
    if len(records) > MAX_PROBLEMS_SHOWN:
        err_console.print(f"  … and {len(records) - MAX_PROBLEMS_SHOWN} more")


@contextmanager
def guarded() -> Iterator[None]:
    """Turn our errors into one clear line and a meaningful exit code, never a traceback."""
    try:
        yield
    except InvalidInput as exc:
        # a setting's line whole (rich would break it at 80 columns in a log)
        error(str(exc), soft_wrap=bool(exc.field and exc.field.startswith("KEMEM_")))
        # not again what the line says (a settings error's message is its first problem)
        print_problems([p for p in exc.problems if not str(exc).endswith(p)])
        raise typer.Exit(EXIT_INVALID) from None
    except NotFound as exc:
        error(str(exc))
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except KememError as exc:
        error(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


@contextmanager
def options_named(names: dict[str, str]) -> Iterator[None]:
    """Name the command-line option (``--limit``) or argument (``TEXT``) in an invalid-option
    error, not the field."""
    try:
        yield
    except InvalidInput as exc:
        if not exc.field or exc.field.startswith("KEMEM_"):  # a setting, not an option
            raise
        option = names.get(exc.field, "--" + exc.field.replace("_", "-"))
        what = f"option {option}" if option.startswith("-") else f"argument {option}"
        detail = str(exc).split(f"{exc.field}: ", 1)[-1]  # after "configuration: field: " too
        raise InvalidInput(f"{what}: {detail}", field=exc.field) from None


def open_kemem(**settings: Any) -> Kemem:
    """A Kemem, the Memory API loaded only now: ``kemem-es --help`` and the engine commands
    never import it."""
    from kemem_es.kemem import Kemem

    return Kemem(**settings)
