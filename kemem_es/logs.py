"""What the libraries under kemem-es log, kept to one line and free of secrets.

- The engine clients (opensearch-py, elasticsearch / elastic-transport) log every failed
  request at WARNING with its traceback (~30 lines), next to kemem's own one-line message: on a
  hung engine every timed-out request filled a screen. :class:`OneLine` keeps their line and
  names the exception instead of printing its traceback (``KEMEM`` errors say the rest).
- ``httpx`` logs each request's full URL at INFO (``HTTP Request: POST https://…?key=…``): a
  key in an LLM endpoint's query string would be logged. Its logger is set to WARNING unless
  the application configured a level for it.
"""

from __future__ import annotations

import logging

ENGINE_CLIENT_LOGGERS = ("opensearch", "elasticsearch", "elastic_transport")


class OneLine(logging.Filter):
    """A record's traceback replaced by the exception's type, on the same line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            record.msg = f"{record.getMessage()} ({type(exc).__name__})"
            record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


_ONE_LINE = OneLine()


def quiet_client_logs() -> None:
    """Idempotent: the filters and the httpx level, once per process."""
    for name in ENGINE_CLIENT_LOGGERS:
        for logger in _with_children(name):
            if _ONE_LINE not in logger.filters:
                logger.addFilter(_ONE_LINE)
    httpx = logging.getLogger("httpx")
    if httpx.level == logging.NOTSET:
        httpx.setLevel(logging.WARNING)


def _with_children(name: str) -> list[logging.Logger]:
    """A logger and the children that exist (a filter does not apply to a child's records:
    elastic-transport logs as ``elastic_transport.transport``, ``.node_pool``)."""
    found = [logging.getLogger(name)]
    for other in list(logging.root.manager.loggerDict):
        if other.startswith(name + "."):
            found.append(logging.getLogger(other))
    return found
