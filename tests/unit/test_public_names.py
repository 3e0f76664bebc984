"""Where callers import from: the contract's models in one place."""

from __future__ import annotations

import kemem_es
import kemem_es.contract as contract


def test_the_contract_exports_the_request_and_response_models() -> None:
    assert {"QueryParams", "Weights", "QueryResponse", "EventHit", "Memory"} <= set(
        contract.__all__
    )
    assert {"Kemem", "AsyncKemem", "Settings", "EventRecord"} <= set(kemem_es.__all__)


def test_the_moved_paths_are_gone_at_0_1_0() -> None:
    """search.params / search.response were shims for code written before the contract; the
    models live in kemem_es.contract, the latin profile in kemem_es.search.profile."""
    import importlib

    import pytest

    from kemem_es.search.profile import script_params

    assert callable(script_params)
    for gone in ("kemem_es.search.params", "kemem_es.search.response"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)
