"""A prepared window vector as a record another process adopts: only for the very window it
was computed for, by the same model, of the model's dimension (search.shared_window)."""

from __future__ import annotations

import numpy as np

from kemem_es.search.shared_window import digest, record, vector_of

WINDOW = "木木：我昨天去爬山了\n祁煜：累不累？"


def test_a_record_gives_its_vector_back_for_its_window() -> None:
    vec = np.linspace(-0.1, 0.1, 8)
    rec = record(WINDOW, vec, "m3e-small (int8)")
    got = vector_of(rec, WINDOW, "m3e-small (int8)", 8)
    assert got is not None and np.allclose(got, vec, atol=1e-7)


def test_another_window_model_or_dimension_is_refused() -> None:
    rec = record(WINDOW, np.ones(8) / np.sqrt(8), "m3e")
    assert vector_of(rec, WINDOW + "。", "m3e", 8) is None  # one character more
    assert vector_of(rec, WINDOW, "minilm", 8) is None
    assert vector_of(rec, WINDOW, "m3e", 16) is None
    assert vector_of({**rec, "vector": [float("nan")] * 8}, WINDOW, "m3e", 8) is None
    assert vector_of({**rec, "vector": ["a"] * 8}, WINDOW, "m3e", 8) is None
    assert vector_of({}, WINDOW, "m3e", 8) is None
    assert digest(WINDOW) != digest(WINDOW.replace("爬山", "游泳"))
