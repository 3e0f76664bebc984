"""embed.runs: one call's model runs side by side, in order, the same vectors as one at a time."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from kemem_es.embed.runs import SideBySide, default_parallel

_REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(
    os.environ.get("KEMEM_TEST_MODEL_DIR") or _REPO.parent / "shared" / "models" / "m3e-small-onnx"
)
# the second model (384 d, English-centred), where the shared models are
MINILM_DIR = MODEL_DIR.parent / "all-minilm-l6-v2-onnx"


def test_results_keep_the_items_order_and_use_several_threads() -> None:
    seen: set[int] = set()
    barrier = threading.Barrier(2, timeout=5)

    def square(x: int) -> int:
        seen.add(threading.get_ident())
        if x < 2:
            barrier.wait()  # the first two items only finish when both run at once
        return x * x

    assert SideBySide(2).map(square, list(range(7))) == [x * x for x in range(7)]
    assert len(seen) == 2


def test_one_item_or_one_thread_runs_in_the_caller() -> None:
    me = threading.get_ident()
    assert SideBySide(4).map(lambda _: threading.get_ident(), [0]) == [me]
    assert SideBySide(1).map(lambda _: threading.get_ident(), [0, 1, 2]) == [me, me, me]
    assert SideBySide(0).parallel == 1
    assert default_parallel() >= 1


def test_a_failing_run_raises_in_the_caller() -> None:
    def fail(x: int) -> int:
        if x == 3:
            raise ValueError("run 3")
        return x

    with pytest.raises(ValueError, match="run 3"):
        SideBySide(2).map(fail, list(range(5)))


@pytest.mark.parametrize(
    "model_dir",
    [
        pytest.param(MODEL_DIR, id="m3e"),
        pytest.param(
            MINILM_DIR,
            id="minilm",
            marks=pytest.mark.skipif(not MINILM_DIR.is_dir(), reason="no all-minilm-l6-v2-onnx"),
        ),
    ],
)
@pytest.mark.skipif(not MODEL_DIR.is_dir(), reason="needs the m3e model (KEMEM_TEST_MODEL_DIR)")
def test_int8_vectors_are_the_same_side_by_side_and_one_at_a_time(model_dir: Path) -> None:
    from kemem_es.embed.onnx import Embedder

    texts = [f"第{i}次和朋友去{place}吃饭，聊到了工作和家里的事" for i, place in
             enumerate(["火锅店", "公园", "海边", "老街", "食堂", "夜市"] * 3)]  # fmt: skip
    texts.append("a long english text " * 120)  # windows: several runs for one text
    one = Embedder(model_dir, "int8", threads=1)
    two = Embedder(model_dir, "int8", threads=2)
    together = two.embed(texts)
    assert together.shape == (len(texts), one.dim)
    assert np.array_equal(together, one.embed(texts))
    assert np.array_equal(together[5], one.embed_one(texts[5]))
    assert np.array_equal(two.embed_queries(texts[:3]), one.embed_queries(texts[:3]))
