"""The HTTP server (``kemem-es serve``): the v23 /query contract and the Memory API over HTTP.

Needs the optional extra ``kemem-es[server]`` (FastAPI, uvicorn, prometheus_client)."""

from __future__ import annotations

from typing import Any


def create_app(*args: Any, **kwargs: Any) -> Any:
    """See :func:`kemem_es.server.app.create_app` (imported lazily: FastAPI is optional)."""
    from kemem_es.server.app import create_app as _create_app

    return _create_app(*args, **kwargs)


__all__ = ["create_app"]
