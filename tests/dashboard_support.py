"""Helpers shared by the dashboard tests: a Kemem on a fresh ``dash-`` index prefix."""

from __future__ import annotations

import uuid
from typing import Any

from support import drop_prefix

from kemem_es import Kemem
from kemem_es.config import Settings


def make_kemem(engine_settings: Settings, embedder: Any) -> Kemem:
    """A Kemem on a fresh ``dash-`` prefix, reinforcement off (counts and strengths stay put)."""
    prefix = f"dash-{uuid.uuid4().hex[:8]}"
    km = Kemem(engine_settings.model_copy(update={"index_prefix": prefix, "reinforce": False}))
    km.embedder = embedder
    return km


def drop(km: Kemem) -> None:
    km.close()
    drop_prefix(km)
