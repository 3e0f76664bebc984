"""The HTTP server (``kemem-es serve``): the v23 /query contract and the Memory API over HTTP.

Needs the optional extra ``kemem-es[server]`` (FastAPI, uvicorn, prometheus_client)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from kemem_es.async_kemem import AsyncKemem
    from kemem_es.config import Settings


def create_app(
    kemem: AsyncKemem | None = None, settings: Settings | None = None, close: bool | None = None
) -> FastAPI:
    """See :func:`kemem_es.server.app.create_app` (imported lazily: FastAPI is optional)."""
    from kemem_es.server.app import create_app as _create_app

    return _create_app(kemem, settings, close)


__all__ = ["create_app"]
