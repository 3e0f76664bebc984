"""Elasticsearch 8 request shapes, sent through the official client to a recording stand-in.

No Elasticsearch server can be had on these machines, so a tiny HTTP server answers as ES 8 and
records every request; the assertions are on what the real `elasticsearch` client sent. With
KEMEM_TEST_ES_URL set, the integration tests run against a live cluster as well.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import pytest

from kemem_es.config import get_settings
from kemem_es.contract.params import QueryParams
from kemem_es.engine import connect
from kemem_es.engine.dialect import Elasticsearch
from kemem_es.models import EventRecord
from kemem_es.search import events as ev
from kemem_es.search.searcher import Searcher
from kemem_es.store import BulkWriter, Scope, install
from kemem_es.store.validation import validate_items

DIMS = 8


class Recorder(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, str, object]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _body(self) -> object:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if not raw:
            return None
        if self.path.split("?")[0].endswith(("_bulk", "_msearch")):
            return [json.loads(line) for line in raw.splitlines() if line.strip()]
        return json.loads(raw)

    def _answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        body = self._body()
        path = self.path.split("?")[0]
        Recorder.requests.append((self.command, path, body))
        if path == "/":
            return self._answer(200, {"version": {"number": "8.15.0"}, "tagline": "ES"})
        if self.command == "HEAD":
            return self._answer(404, None)
        if path.endswith("_bulk"):
            items = [
                {
                    action: {"_id": meta.get("_id", "h"), "status": 201, "result": "created"}
                    for action, meta in line.items()  # "index" or "create"
                }
                for line in body[::2]
            ]
            return self._answer(200, {"errors": False, "items": items})
        if path.endswith("_mget"):
            return self._answer(200, {"docs": []})
        if path.endswith("_count"):
            # a scope (query given) is part of the index: the ANN clause keeps its filter
            return self._answer(200, {"count": 5 if body else 10})
        if path.endswith("_msearch"):
            # a scope's counts (size 0) as _count answered them: a scope is part of the index
            return self._answer(200, {"responses": [_msearch_answer(b) for b in body[1::2]]})
        if path.endswith("_search"):
            aggs = {f: {"buckets": []} for f in ("user_name", "agent_name", "entity_name")}
            return self._answer(200, {"hits": {"hits": []}, "aggregations": aggs})
        return self._answer(200, {"acknowledged": True})

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


def _msearch_answer(body: object) -> dict[str, object]:
    if isinstance(body, dict) and body.get("size") == 0 and body.get("track_total_hits"):
        return {"hits": {"total": {"value": 5 if "query" in body else 10}, "hits": []}}
    return {"hits": {"hits": []}}


@pytest.fixture()
def es_url() -> Iterator[str]:
    Recorder.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class FakeEmbedder:
    name = "fake"
    dim = DIMS

    def embed(self, texts):
        return np.ones((len(texts), DIMS), dtype=np.float32) / np.sqrt(DIMS)

    def embed_one(self, text):
        return self.embed([text])[0]


class SplitTokenizer:
    stopwords: frozenset = frozenset()

    def index_text(self, text: str) -> str:
        return " ".join(text)

    def index_texts(self, texts) -> list[str]:
        return [self.index_text(t) for t in texts]

    def tokenize(self, text: str) -> list[str]:
        return list(text)

    def scoped(self, names) -> SplitTokenizer:
        return self


def sent(method: str, suffix: str) -> list[object]:
    """The bodies sent; of msearches, the searches (a scope's size-0 counts left out)."""
    return [
        b
        for m, p, b in Recorder.requests
        if m == method and p.endswith(suffix) and not (suffix == "/_msearch" and _counts(b))
    ]


def _counts(lines: object) -> bool:
    return isinstance(lines, list) and all(
        isinstance(b, dict) and b.get("size") == 0 for b in lines[1::2]
    )


def test_dialect_is_detected_and_templates_use_dense_vector(es_url: str) -> None:
    engine = connect(get_settings(es_url=es_url, index_prefix="kemem"))
    assert isinstance(engine.dialect, Elasticsearch)
    install(engine, DIMS)
    (template,) = sent("PUT", "/_index_template/kemem-user-events")
    vector = template["template"]["mappings"]["properties"]["vector"]
    assert vector == {
        "type": "dense_vector",
        "dims": DIMS,
        "index": True,
        "similarity": "cosine",
        "index_options": {"type": "hnsw", "m": 16, "ef_construction": 128},
    }
    assert template["index_patterns"] == ["kemem-user-events-*"]
    (created,) = sent("PUT", "/kemem-official-entities-v2")
    assert created["aliases"] == {"kemem-official-entities": {"is_write_index": True}}
    assert "index.knn" not in created["settings"]


def test_bulk_lines_through_the_official_client(es_url: str) -> None:
    engine = connect(get_settings(es_url=es_url, index_prefix="kemem"))
    rec = EventRecord(
        id="e1", agent_id="a", user_id="u", description="吃火锅", created_at="2024-01-01 10:00:00"
    )
    good, problems = validate_items([("record 1", rec)], "events", "user", DIMS)
    assert not problems
    report = BulkWriter(engine, FakeEmbedder(), SplitTokenizer()).write(good, "events")
    assert report.indexed == 1
    lines, history = sent("PUT", "/_bulk") or sent("POST", "/_bulk")
    scope = Scope.of(agent_id="a", user_id="u")
    doc_id = scope.doc_id("e1")
    meta = {"_index": "kemem-user-events", "_id": doc_id, "routing": scope.routing}
    assert lines[0] == {"create": meta}  # absent when read: created only if still absent
    assert lines[1]["id"] == "e1" and lines[1]["uid"] == doc_id
    assert lines[1]["description_tok"] == "吃 火 锅"
    assert len(lines[1]["vector"]) == DIMS
    assert len(lines[1]["vector_code"]) == 12  # 8 int8 components in base64
    assert history[0] == {"index": {"_index": "kemem-history"}}
    assert history[1]["event"] == "ADD" and history[1]["memory_id"] == "e1"
    assert "vector_code" not in history[1]["new"] and "vector" not in history[1]["new"]


def test_a_field_is_added_to_an_existing_mapping(es_url: str) -> None:
    engine = connect(get_settings(es_url=es_url, index_prefix="kemem"))
    engine.put_mapping("kemem-user-events-v2", {"vector_code": {"type": "binary"}})
    (body,) = sent("PUT", "/kemem-user-events-v2/_mapping")
    assert body == {"properties": {"vector_code": {"type": "binary"}}}


@pytest.mark.parametrize("path", ["exact", "approx"])
def test_fused_query_shape(es_url: str, path: str) -> None:
    engine = connect(get_settings(es_url=es_url, index_prefix="kemem"))
    from kemem_es.expand import Expander, Lexicon

    searcher = Searcher(
        engine, FakeEmbedder(), SplitTokenizer(), Expander(Lexicon.from_mapping({}), None)
    )
    params = QueryParams(agent_id="a", user_id="u", path=path, now=datetime(2025, 1, 1))
    searcher.search_events(params, [], [0.1] * DIMS, params.now)
    (lines,) = sent("POST", "/_msearch")
    routing = Scope.of(agent_id="a", user_id="u").routing  # the user's shard only
    assert lines[0] == {"index": "kemem-user-events", "routing": routing}
    body = lines[1]
    if path == "approx":
        fs = body["rescore"]["query"]["rescore_query"]["function_score"]
        ann = body["query"]["bool"]["should"][-1]["constant_score"]["filter"]["knn"]
        assert ann["field"] == "vector" and ann["k"] == 50 and ann["filter"]
    else:
        fs = body["query"]["function_score"]
        # the threshold is on the calibrated score: the vector term's constant offset is added
        offset = ev.vec_offset(params, params.weights.model_dump())
        assert body["min_score"] == pytest.approx(0.5 + offset)
    scripts = [f["script_score"]["script"] for f in fs["functions"] if "script_score" in f]
    vec = next(s for s in scripts if "cosineSimilarity" in s["source"])
    assert vec["params"] == {"qv": [0.1] * DIMS, "field": "vector"}
