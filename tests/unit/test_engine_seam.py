"""The engine seam: one request method (deadline, hook, errors), pure dialects, one query = one
pass through each layer."""

from __future__ import annotations

import time
from typing import Any

import pytest
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from kemem_es.config import Settings
from kemem_es.engine.client import Engine, Request
from kemem_es.engine.dialect import Elasticsearch, OpenSearch
from kemem_es.engine.errors import activity, deadline
from kemem_es.errors import ConcurrentChange, DeadlineExceeded, EngineRefused, EngineUnavailable


class FakeSend:
    """A client library that records what it is asked to send and answers ``answers``."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[Request] = []

    def __call__(self, request: Request) -> Any:
        self.sent.append(request)
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, Exception):
            raise answer
        return answer


def engine_with(send: FakeSend, dialect: Any = None) -> Engine:
    info = {"version": {"number": "3.5.0", "distribution": "opensearch"}}
    return Engine(None, Settings(), info, dialect or OpenSearch("3.5.0"), send)


def test_every_verb_is_one_request_seen_by_the_hook() -> None:
    send = FakeSend({"responses": [{"hits": {"hits": []}}]}, {"count": 3, "_shards": {}})
    engine = engine_with(send)
    seen: list[tuple[str, str]] = []
    engine.hook = lambda req, answer, s: seen.append((req.method, req.path))
    engine.msearch([("i", {"query": {"match_all": {}}}, "r1")])
    assert engine.count("i", {"term": {"a": 1}}, routing="r1") == 3
    assert seen == [("POST", "/_msearch"), ("POST", "/i/_count")]
    msearch, count = send.sent
    assert msearch.ndjson and msearch.body[0] == {"index": "i", "routing": "r1"}
    assert count.params == {"routing": "r1"} and count.body == {"query": {"term": {"a": 1}}}


def test_reads_get_what_is_left_of_the_deadline_writes_the_clients_limit() -> None:
    send = FakeSend({"hits": {}}, {"items": []})
    engine = engine_with(send)
    with deadline(2.0):
        engine.search("i", {})
        engine.bulk([{"index": {"_index": "i"}}, {}])
    read, write = send.sent
    assert read.timeout is not None and 1.0 < read.timeout <= 2.0
    assert write.timeout is None  # the client's write timeout


def test_a_passed_deadline_sends_nothing() -> None:
    send = FakeSend()
    engine = engine_with(send)
    with deadline(0.01), pytest.raises(DeadlineExceeded):
        time.sleep(0.02)
        engine.search("i", {})
    assert send.sent == []


def test_client_errors_are_translated_once_with_the_callers_activity() -> None:
    refused = TransportError(400, "parsing_exception", {"error": {"type": "parsing_exception"}})
    send = FakeSend(
        refused,
        OSConnectionError("N/A", "refused", None),
        ConnectionTimeout("TIMEOUT", "read timed out", None),
    )
    engine = engine_with(send)
    seen: list[Any] = []
    engine.hook = lambda req, answer, s: seen.append(answer)
    with activity("listing memories"), pytest.raises(EngineRefused, match=r"^listing memories"):
        engine.search("i", {})
    with pytest.raises(EngineUnavailable, match=r"^search engine") as down:
        engine.refresh("i")
    assert not down.value.answered and down.value.reason
    with pytest.raises(DeadlineExceeded):
        engine.get_index("i")
    assert seen == [None, None, None]  # the hook sees failed requests too


def test_a_missing_document_is_none_not_an_error() -> None:
    send = FakeSend(TransportError(404, "not_found", {"found": False}))
    assert engine_with(send).get("i", "x", excludes=["vector"], routing="r") is None
    (req,) = send.sent
    assert req.path == "/i/_doc/x" and req.params == {"_source_excludes": "vector", "routing": "r"}


def test_dialects_differ_only_in_pure_pieces() -> None:
    os_fn = OpenSearch().vector_function("vector", [0.5], 2.0)
    es_fn = Elasticsearch().vector_function("vector", [0.5], 2.0)
    assert os_fn["weight"] == es_fn["weight"] == 2.0
    assert os_fn["script_score"]["script"]["source"] == "knn_score"
    assert "cosineSimilarity" in es_fn["script_score"]["script"]["source"]
    assert OpenSearch().ann_query("v", [1.0], 5, []) == {"knn": {"v": {"vector": [1.0], "k": 5}}}
    assert Elasticsearch().ann_query("v", [1.0], 5, [{"term": {"a": 1}}])["knn"]["filter"]
    body = {"settings": {}, "mappings": {"properties": {"k": {"type": "keyword"}}}}
    assert Elasticsearch("8.19.0").index_body(body) is body
    fixed = OpenSearch("3.5.0").template_body({"template": body})["template"]
    assert fixed["mappings"]["properties"]["k"]["use_similarity"] is True


def test_points_in_time_use_each_dialects_endpoints() -> None:
    for dialect, opened, path in (
        (OpenSearch("3.5.0"), {"pit_id": "p1"}, "/i/_search/point_in_time"),
        (Elasticsearch("8.19.0"), {"id": "p1"}, "/i/_pit"),
    ):
        send = FakeSend(opened, {})
        engine = engine_with(send, dialect)
        assert engine.open_pit("i", "1m") == "p1"
        engine.close_pit("p1")
        assert send.sent[0].path == path and send.sent[1].method == "DELETE"
        assert send.sent[1].body == dialect.pit_close_body("p1")


def test_delete_by_query_runs_again_while_documents_changed_meanwhile() -> None:
    # "conflicts": "proceed" skips a document written while the engine deletes: it still matches
    send = FakeSend({"deleted": 3, "version_conflicts": 1}, {"deleted": 1, "version_conflicts": 0})
    assert engine_with(send).delete_by_query("i", {"query": {"term": {"a": 1}}}) == 4
    assert [r.path for r in send.sent] == ["/i/_delete_by_query"] * 2
    busy = FakeSend(*[{"deleted": 0, "version_conflicts": 2}] * 10)
    with pytest.raises(ConcurrentChange, match="kept changing"):
        engine_with(busy).delete_by_query("i", {"query": {"match_all": {}}})
    assert len(busy.sent) == 5
