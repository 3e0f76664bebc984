"""The int8-quantised vector index option, end to end on the real engine."""

from __future__ import annotations

import uuid

import pytest
from support import drop_prefix

from kemem_es.store.layout import index_alias
from kemem_es.store.templates import index_body
from tests.engine import test_query_engine as tq

pytestmark = pytest.mark.engine


def test_index_body_quantization_per_dialect() -> None:
    os_vec = index_body("events", "opensearch", 8, "int8")["mappings"]["properties"]["vector"]
    assert os_vec["method"]["parameters"]["encoder"] == {"name": "sq"}
    es_vec = index_body("events", "elasticsearch", 8, "int8")["mappings"]["properties"]["vector"]
    assert es_vec["index_options"]["type"] == "int8_hnsw"
    plain = index_body("events", "opensearch", 8)["mappings"]["properties"]["vector"]
    assert "encoder" not in plain["method"]["parameters"]
    with pytest.raises(ValueError):
        index_body("events", "opensearch", 8, "int4")


@pytest.fixture()
def quantized(engine_settings, embedder):
    from kemem_es import Kemem

    prefix = f"test-q-{uuid.uuid4().hex[:8]}"
    settings = engine_settings.model_copy(
        update={"index_prefix": prefix, "vector_quantization": "int8"}
    )
    km = Kemem(settings)
    km.embedder = embedder
    yield tq.km.__wrapped__(km)
    drop_prefix(km)


@pytest.mark.es_node_lacks(
    "Painless: without it the score is native, and a knn clause scores the int8 vectors where "
    "the script scores the stored floats (docs/engines.md)"
)
def test_quantized_index_answers_like_the_float_one(quantized, kemem) -> None:
    alias = index_alias(quantized.settings.index_prefix, "user", "events")
    mapping = next(iter(quantized.engine.get_index(alias).values()))["mappings"]
    vec = mapping["properties"]["vector"]
    assert vec.get("method", {}).get("parameters", {}).get("encoder", {}).get("name") == "sq" or (
        vec.get("index_options", {}).get("type") == "int8_hnsw"
    )
    plain = tq.km.__wrapped__(kemem)
    for path in ("approx", "exact"):
        got = tq.q(quantized, "最近总是失眠，晚上睡不着", path=path)
        want = tq.q(plain, "最近总是失眠，晚上睡不着", path=path)
        # Tiny corpus: the ANN finds every neighbour either way, and the fused score reads the
        # float vectors, so ranking and scores are the same.
        assert tq.ids(got) == tq.ids(want)
        for a, b in zip(got.memory_events, want.memory_events, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
