"""What a setting must be (absolute paths, readable files, header-safe keys) and a bad one
reported as one line naming its ``KEMEM_*`` variable."""

from __future__ import annotations

import os
import urllib.parse
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kemem_es.errors import InvalidInput

if TYPE_CHECKING:
    from kemem_es.config import Settings

# Paths made absolute when the settings load; the files among them must exist and be readable.
PATH_SETTINGS = (
    "java_home",
    "model_dir",
    "es_ca_certs",
    "user_dict",
    "lexicon_path",
    "lexicon_overrides",
    "idf_path",
    "extract_prompt_path",
    "session_tokenizer",
)
FILE_SETTINGS = (
    "es_ca_certs",
    "user_dict",
    "lexicon_path",
    "lexicon_overrides",
    "idf_path",
    "session_tokenizer",
)


def absolute_path(path: Path) -> Path:
    return path.expanduser().absolute()


def setting_variable(field: str) -> str:
    """The environment variable of a settings field: ``user_dict`` → ``KEMEM_USER_DICT``."""
    return f"KEMEM_{field.upper()}"


NOT_A_HEADER_TOKEN = (
    "must be printable ASCII without spaces (it is sent in an HTTP header; check for a stray "
    "character, a newline or a full-width letter)"
)


def is_header_token(value: str) -> bool:
    """Printable ASCII, no spaces: what a Bearer token in an HTTP header can carry."""
    return all("!" <= ch <= "~" for ch in value)


def settings_error(exc: ValidationError, given: dict[str, Any]) -> InvalidInput:
    """A bad setting as one line naming what to fix: the KEMEM_* variable (or the option the
    caller passed), not a pydantic traceback."""
    problems = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        msg = err["msg"].removeprefix("Value error, ")
        if not field and ": " in msg:  # a model check names its field first ("user_dict: …")
            field, msg = msg.split(": ", 1)
        name = field if field in given else setting_variable(field)
        problems.append(f"{name}: {msg}")  # not the value: it may be a key
    first = problems[0] if problems else str(exc)
    return InvalidInput(f"configuration: {first}", problems, field=first.split(":", 1)[0])


@contextmanager
def setting_file(field: str, also: tuple[str, Path | None] | None = None) -> Iterator[None]:
    """A file a setting names that exists but cannot be parsed (not a lexicon, a bad line) as
    the one-line settings error naming the variable, not a ValueError from deep inside.
    ``also``: another setting read in the same call, blamed when the error names its file."""
    try:
        yield
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        if also is not None and also[1] is not None and str(also[1]) in str(exc):
            field = also[0]
        name = setting_variable(field)
        why = " ".join(str(exc).split())[:300] or type(exc).__name__
        problem = f"{name}: cannot load it: {why}"
        raise InvalidInput(f"configuration: {problem}", [problem], field=name) from None


def usable_url(url: str | None) -> str | None:
    """A URL the clients can use: no stray space (it passed the pattern, then failed deep in
    a client), a numeric port. Never quotes the URL: it may hold a password."""
    if not url:
        return url
    if any(ch.isspace() for ch in url):
        raise ValueError("must not contain spaces (check for a trailing space or newline)")
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018  (raises on a port that is no number)
    except ValueError:
        raise ValueError("the port must be a number from 1 to 65535") from None
    return url


def url_credentials(settings: Settings) -> None:
    """``http://user:pass@host:9200``: the credentials become basic auth (the first request,
    made with urllib, would read ``user:pass@host`` as a host name)."""
    if not settings.es_url:
        return
    parts = urllib.parse.urlsplit(settings.es_url)
    if parts.username is None and parts.password is None:
        return
    if settings.es_username or settings.es_password:
        raise ValueError(
            "es_url: holds a user name and password, and KEMEM_ES_USERNAME / "
            "KEMEM_ES_PASSWORD are set too: give the credentials in one place"
        )
    settings.es_username = urllib.parse.unquote(parts.username or "")
    settings.es_password = urllib.parse.unquote(parts.password or "")
    netloc = parts.netloc.rsplit("@", 1)[1]
    settings.es_url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def readable_files(settings: Settings) -> None:
    """The files the text pipeline and the TLS context read: checked when the settings load,
    named, not at first use deep in the tokenizer."""
    for name in FILE_SETTINGS:
        path = getattr(settings, name)
        if path is None:
            continue
        if not path.exists():
            raise ValueError(f"{name}: no such file: {path}")
        if not path.is_file():
            raise ValueError(f"{name}: not a file: {path}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"{name}: cannot read {path} (permissions)")
