"""A scope's two counts (memories in scope, memories on its shard) come in one round trip
(issue 42) and equal the engine's own counts; a missing index counts nothing."""

from __future__ import annotations

from typing import Any

from test_tenancy import rows

from kemem_es.contract.params import QueryParams
from kemem_es.search import events as ev
from kemem_es.store.layout import index_alias


def test_scope_counts_in_one_round_trip(kemem: Any) -> None:
    kemem.init()
    mine, other = {"agent_id": "ca", "user_id": "cu1"}, {"agent_id": "ca", "user_id": "cu2"}
    kemem.index_records(rows(mine, "我的记忆", n=3), "events")
    kemem.index_records(rows(other, "别人的记忆", n=2), "events")
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    kemem.engine.refresh(alias)
    searcher = kemem.searcher
    sent: list[str] = []
    kemem.engine.hook = lambda req, answer, s: sent.append(req.path)
    params = QueryParams(**mine)
    n_scope, n_shard = searcher._scope_counts("user", params)
    assert sent == ["/_msearch"]
    assert n_scope == 3
    routing = ev.routing("user", params)
    assert n_shard == kemem.engine.count(alias, routing=routing)  # the engine's own count
    assert n_scope == kemem.engine.count(
        alias, {"bool": {"filter": ev.request_filters("user", params)}}, routing
    )
    sent.clear()
    assert searcher._scope_counts("user", params) == (n_scope, n_shard)  # cached
    assert sent == []


def test_scope_counts_of_a_missing_index_are_zero(kemem: Any) -> None:
    params = QueryParams(agent_id="ca", user_id="nobody")
    assert kemem.searcher._scope_counts("user", params) == (0, 0)
