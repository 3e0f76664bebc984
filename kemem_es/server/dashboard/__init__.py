"""The dashboard served at ``/dashboard`` (overview, query explorer, memory browser)."""

from __future__ import annotations

from kemem_es.server.dashboard.routes import router

__all__ = ["router"]
