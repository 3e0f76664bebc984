"""What differs between OpenSearch 2.x/3.x and Elasticsearch 8.x, as pure objects.

A dialect builds the vector pieces of a query (a function_score function, an ANN clause), fixes
up index bodies for its engine, and names its point-in-time endpoints. It holds no client and
makes no request: query builders (search/, store/) take a dialect, so a body can be built and
tested without a cluster. Everything else (templates, queries, bulk lines) is the same JSON on
both engines and goes through the one ``Engine`` (engine/client.py).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any


class Dialect:
    """One engine's flavour of the shared JSON. ``version``: the cluster's version number."""

    name: str = ""
    # native (no script on the query path: knn clauses, distance_feature) or script; the
    # Engine sets it from KEMEM_SCORING once it knows whether the cluster runs Painless
    scoring: str = "script"
    # A knn clause's score is knn_scale × (1 + cos) / 2 (see ``vector_clause``).
    knn_scale = 1.0
    # Native scoring scores a vector clause exactly over at most this many documents a shard
    # (the engines' bound on k and num_candidates).
    NATIVE_K = 10_000

    def __init__(self, version: str = "?") -> None:
        self.version = version

    @property
    def native(self) -> bool:
        return self.scoring == "native"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.version!r})"

    @property
    def major(self) -> int | None:
        head = self.version.split(".")[0]
        return int(head) if head.isdigit() else None

    # -- query pieces ------------------------------------------------------------------------
    def vector_function(self, field: str, query_vector: Sequence[float], weight: float) -> dict:
        """A function_score function worth ``weight * (1 + cos) / 2`` (so it stays in [0, w])."""
        return {
            "script_score": {"script": self._cosine_script(field, query_vector)},
            "weight": weight,
        }

    def _cosine_script(self, field: str, query_vector: Sequence[float]) -> dict[str, Any]:
        raise NotImplementedError

    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        """An approximate nearest-neighbour query clause restricted by ``filters``."""
        raise NotImplementedError

    def vector_clause(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict],
        weight: float,
    ) -> dict:  # fmt: skip
        """A script-free query clause worth ``weight * (1 + cos) / 2`` on each of the ``k``
        documents within ``filters`` nearest the vector: on every one of them, exactly, when the
        filter matches at most ``k`` documents of a shard (the engine then compares them all
        instead of walking the graph)."""
        clause = self.ann_query(field, unit_vector(query_vector), k, filters)
        body = clause["knn"].get(field, clause["knn"])  # OpenSearch nests it under the field
        body["boost"] = weight / self.knn_scale
        return clause

    # -- index bodies ------------------------------------------------------------------------
    def index_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """An index's settings + mappings as this engine needs them (unchanged by default)."""
        return body

    def template_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """An index template's body: its ``template`` fixed up like an index body."""
        if "template" not in body:
            return body
        return {**body, "template": self.index_body(body["template"])}

    # -- points in time ----------------------------------------------------------------------
    pit_open_path: str = ""  # after /{index}
    pit_close_path: str = ""

    def pit_id(self, resp: dict[str, Any]) -> str:
        raise NotImplementedError

    def pit_close_body(self, pit_id: str) -> dict[str, Any]:
        raise NotImplementedError


def unit_vector(vector: Sequence[float]) -> list[float]:
    """``vector`` at unit length (in double precision). A knn clause's similarity is the cosine
    only for a unit query vector (inner-product graphs; Elasticsearch's cosine does not divide
    by it either), and the model's vectors are 1 ± 1e-5 long: scores were 1e-5 off."""
    norm = math.sqrt(math.fsum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class OpenSearch(Dialect):
    """OpenSearch 2.19 / 3.x with the k-NN plugin (lucene engine)."""

    name = "opensearch"
    # The lucene engine's inner-product score is 1 + ip for ip >= 0 (1 / (1 - ip) below), the
    # vectors are unit length: 2 × (1 + cos) / 2 wherever the cosine is not negative.
    knn_scale = 2.0
    pit_open_path = "/_search/point_in_time"
    pit_close_path = "/_search/point_in_time"

    def _cosine_script(self, field: str, query_vector: Sequence[float]) -> dict[str, Any]:
        # knn_score with cosinesimil scores (1 + cos) / 2 on 2.19 (lucene-style normalisation).
        params = {"field": field, "query_value": list(query_vector), "space_type": "cosinesimil"}
        return {"lang": "knn", "source": "knn_score", "params": params}

    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        clause: dict[str, Any] = {"vector": list(query_vector), "k": k}
        if filters:
            clause["filter"] = {"bool": {"filter": filters}}
        return {"knn": {field: clause}}

    def index_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """Index settings that give OpenSearch 3.x the keyword scores of 2.x.

        3.0 changed two defaults: text is scored with Lucene's BM25, without the (k1 + 1)
        factor of 2.x's (every BM25 score 2.2 times lower, and kw = bm25 / (bm25 + k) with
        it), and a term query on a keyword field became constant-score. The fusion weights were
        tuned on 2.x, so 3.x indices keep 2.x's formula (``LegacyBM25``) and score keyword
        fields (``use_similarity``); both settings are unknown to 2.x, which needs neither."""
        if self.major is None or self.major < 3:
            return body
        body = copy.deepcopy(body)
        settings = body.setdefault("settings", {})
        if "index.similarity.default.type" not in settings and "similarity" not in settings.get(
            "index", {}
        ):
            settings["index.similarity.default.type"] = "LegacyBM25"
        stack = [body.get("mappings", {}).get("properties", {})]
        while stack:
            for spec in stack.pop().values():
                if spec.get("type") == "keyword":
                    spec.setdefault("use_similarity", True)
                stack.append(spec.get("properties", {}))
        return body

    def pit_id(self, resp: dict[str, Any]) -> str:
        return str(resp["pit_id"])

    def pit_close_body(self, pit_id: str) -> dict[str, Any]:
        return {"pit_id": [pit_id]}


class Elasticsearch(Dialect):
    """Elasticsearch 8.x (dense_vector, cosine similarity)."""

    name = "elasticsearch"
    pit_open_path = "/_pit"
    pit_close_path = "/_pit"

    def _cosine_script(self, field: str, query_vector: Sequence[float]) -> dict[str, Any]:
        return {
            "source": "(cosineSimilarity(params.qv, params.field) + 1.0) / 2.0",
            "params": {"qv": list(query_vector), "field": field},
        }

    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        clause: dict[str, Any] = {
            "field": field,
            "query_vector": list(query_vector),
            "k": k,
            # at most 10 000 (the engine's bound), never fewer than k
            "num_candidates": max(min(max(k * 2, 100), self.NATIVE_K), k),
        }
        if filters:
            clause["filter"] = filters
        return {"knn": clause}

    def pit_id(self, resp: dict[str, Any]) -> str:
        return str(resp["id"])

    def pit_close_body(self, pit_id: str) -> dict[str, Any]:
        return {"id": pit_id}


DIALECTS: dict[str, type[Dialect]] = {"opensearch": OpenSearch, "elasticsearch": Elasticsearch}


def detect_dialect(info: dict[str, Any]) -> str:
    """The dialect's name from the cluster's root endpoint (``GET /``)."""
    distribution = info.get("version", {}).get("distribution", "elasticsearch")
    return "opensearch" if distribution == "opensearch" else "elasticsearch"


def dialect_for(name: str, info: dict[str, Any]) -> Dialect:
    """The dialect ``name`` of the cluster ``info`` describes."""
    return DIALECTS[name](str(info.get("version", {}).get("number", "?")))
