"""A prepared window vector as a record another process adopts: only for the very window it
was computed for, by the same model, of the model's dimension (search.shared_window)."""

from __future__ import annotations

from collections.abc import Sequence

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


def test_adopting_a_window_counts_its_turns_once_for_the_recall_too() -> None:
    from kemem_es.contract.params import QueryParams
    from kemem_es.search.query_text import QueryText
    from kemem_es.text.dialogue import context_turns
    from kemem_es.text.tokenizer import Tokenizer
    from tests.counting_model import Counting

    class Tokens(Counting):
        counted: list[str]

        def count_tokens(self, texts: Sequence[str]) -> list[int]:
            self.counted = [*getattr(self, "counted", []), *texts]
            return super().count_tokens(texts)

    emb = Tokens()
    qt = QueryText(emb, Tokenizer(), None)
    p = QueryParams(agent_id="a", user_id="u", context=WINDOW, context_vector="split")
    turns = context_turns(p.context, p.context_turns)
    window, _ = qt.earlier_window(turns)
    other = Counting()  # another process prepared it
    rec = record(window, other.embed_queries([window])[0].astype(float), emb.name)
    assert qt.adopt_window(turns, rec)
    qt.query_vector("还记得吗", turns, p)
    assert all(emb.counted.count(t.text) == 1 for t in turns)  # not once more for the recall
    assert emb.calls == [["还记得吗"]]  # the window's vector was adopted, not embedded
