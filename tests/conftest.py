"""Shared fixtures. Engine tests run against a real node: KEMEM_TEST_ES_URL when set (e.g. a live
Elasticsearch 8), else the local OpenSearch node, started here if it is not running yet.

The tests are laid out by what they need: ``unit/`` (no engine, no server process), ``engine/``
(a node), ``http/`` (the server, in process or as a real ``kemem-es serve``), ``browser/`` (the
dashboard in chromium). The helpers they share (``support``, ``llm_stub``, ``dashboard_support``)
stay in this folder, which pytest puts on ``sys.path`` with this file; the layer folders go
there too, so a test module imports another by its name (``from test_server import client``)
wherever each lives — test file names stay unique across the layers."""

from __future__ import annotations

import gc
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import close_opened, drop_prefix

from kemem_es.config import Settings, get_settings

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("unit", "engine", "http", "browser")
sys.path.extend(str(REPO / "tests" / layer) for layer in LAYERS)


def model_dir() -> Path:
    return Path(
        os.environ.get("KEMEM_TEST_MODEL_DIR", REPO.parent / "shared/models/m3e-small-onnx")
    )


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the engine fixture is an engine test whatever its marks say, so that
    ``pytest -m "not engine"`` never starts a node; ``tests/unit`` holds none of them."""
    unit = Path(__file__).resolve().parent / "unit"
    misplaced = []
    for item in items:
        if "engine_settings" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.engine)
        if item.get_closest_marker("engine") and unit in item.path.resolve().parents:
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            f"engine tests in tests/unit, move them to tests/engine: {misplaced}"
        )


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    """An in-process server (``TestClient``) settles the heap of the process it runs in
    (server/heap.py), here pytest's: undone after each test, so that no test's objects stay
    frozen out of the collector for the rest of the run."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


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
