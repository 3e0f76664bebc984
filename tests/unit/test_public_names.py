"""Where callers import from: the contract's models in one place, and the paths earlier versions
used still giving the same classes (a harness written against them keeps working)."""

from __future__ import annotations

import kemem_es
import kemem_es.contract as contract


def test_the_contract_exports_the_request_and_response_models() -> None:
    assert {"QueryParams", "Weights", "QueryResponse", "EventHit", "Memory"} <= set(
        contract.__all__
    )
    assert {"Kemem", "AsyncKemem", "Settings", "EventRecord"} <= set(kemem_es.__all__)


def test_earlier_import_paths_give_the_same_classes() -> None:
    from kemem_es.search.params import QueryParams, script_params
    from kemem_es.search.profile import script_params as profile_script_params
    from kemem_es.search.response import EventHit, QueryResponse

    assert QueryParams is contract.QueryParams and QueryResponse is contract.QueryResponse
    assert EventHit is contract.EventHit and script_params is profile_script_params
