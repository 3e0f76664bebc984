"""One query through every layer once: after warm-up, ``Kemem.query`` is one engine request
(the engine seam's request hook sees each request the package sends)."""

from __future__ import annotations

import threading

import pytest

from kemem_es.engine.client import Request


@pytest.mark.engine
def test_one_query_is_one_msearch_through_every_layer(kemem) -> None:
    """Kemem.query → MemoryService/Searcher → search planning (dialect) → Engine.msearch →
    Engine.request → the client: after warm-up, a query is exactly one request."""
    kemem.init()
    kemem.add("木木周末和祁煜去吃了火锅，点了双份毛肚", agent_id="a", user_id="u", refresh=True)
    kemem.query("火锅", agent_id="a", user_id="u")  # warm: scope counts, names, scripts
    seen: list[Request] = []
    caller = threading.get_ident()

    def hook(req: Request, answer: object, seconds: float) -> None:
        # the query's own requests: the warm-up query's reinforcement is flushed by a
        # background thread, which on a loaded machine can land in this window
        if threading.get_ident() == caller:
            seen.append(req)

    kemem.engine.hook = hook
    answer = kemem.query("火锅", agent_id="a", user_id="u", score_threshold=0)
    kemem.engine.hook = None
    assert answer.memory_events
    assert [(r.method, r.path) for r in seen] == [("POST", "/_msearch")]
