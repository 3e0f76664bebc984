"""Shared fixtures. Engine tests run against a real node: KEMEM_TEST_ES_URL when set (e.g. a live
Elasticsearch 8), else the local OpenSearch node, started here if it is not running yet."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import close_opened, drop_prefix

from kemem_es.config import Settings, get_settings

REPO = Path(__file__).resolve().parent.parent


def model_dir() -> Path:
    return Path(
        os.environ.get("KEMEM_TEST_MODEL_DIR", REPO.parent / "shared/models/m3e-small-onnx")
    )


@pytest.fixture(scope="session")
def engine_settings() -> Settings:
    """Settings pointing at the test cluster (the engine is started if local and not running)."""
    url = os.environ.get("KEMEM_TEST_ES_URL")
    settings = get_settings(es_url=url, model_dir=model_dir())
    if not url:
        from kemem_es.engine.local import LocalEngine

        local = LocalEngine(settings)
        if not local.http_ok():
            local.start()
    return settings


@pytest.fixture(scope="session")
def embedder(engine_settings: Settings):
    from kemem_es.embed import load_embedder

    return load_embedder(engine_settings)


@pytest.fixture()
def kemem(engine_settings: Settings, embedder) -> Iterator:
    """A Kemem on a fresh index prefix; its indices are deleted afterwards."""
    from kemem_es import Kemem

    prefix = f"test-{uuid.uuid4().hex[:8]}"
    km = Kemem(engine_settings.model_copy(update={"index_prefix": prefix}))
    km.embedder = embedder
    yield km
    drop_prefix(km)


@pytest.fixture(scope="session", autouse=True)
def _close_what_tests_opened() -> Iterator[None]:
    """The in-process servers' AsyncKemem instances of tests that dropped no prefix after them."""
    yield
    close_opened()
