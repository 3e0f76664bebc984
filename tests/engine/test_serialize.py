"""The orjson serializer writes the JSON the engine would get from the default one."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest
from opensearchpy.serializer import JSONSerializer

from kemem_es.engine.serialize import FastJSONSerializer

pytest.importorskip("orjson")


def test_same_values_as_the_default_serializer() -> None:
    doc = {
        "description": "木木和室友一起吃了火锅",
        "vector": np.random.default_rng(1).normal(size=512).round(6).tolist(),
        "n": 3,
        "ok": True,
        "none": None,
        "at": datetime(2024, 1, 2, 3, 4, 5),
        "np": np.float32(0.5),
    }
    fast, default = FastJSONSerializer().dumps(doc), JSONSerializer().dumps(doc)
    assert isinstance(fast, str)
    assert json.loads(fast) == json.loads(default)
    assert "木木" in fast  # UTF-8, not \u escapes
    assert FastJSONSerializer().loads(fast) == json.loads(default)
    assert FastJSONSerializer().dumps("already a string") == "already a string"


@pytest.mark.engine
def test_engine_client_uses_it(engine_settings) -> None:
    from kemem_es.engine.client import connect

    engine = connect(engine_settings)
    if engine.dialect.name != "opensearch":
        pytest.skip(
            "the serializer is opensearch-py's (elastic-transport brings its own orjson one)"
        )
    assert isinstance(engine.client.transport.serializer, FastJSONSerializer)
