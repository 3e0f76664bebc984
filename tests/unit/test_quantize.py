"""The int8-channel variant (embed.quantize): derived once from the fp32 file, cached, closer to
fp32 than the shipped int8 file; clear errors when it cannot be derived. Against the m3e-small
export (skipped when it is absent); deriving takes a few seconds, once for the module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kemem_es.config import Settings
from kemem_es.embed import Embedder, EmbedderError
from kemem_es.embed.onnx import load_embedder
from kemem_es.embed.quantize import (
    _digest,
    channel_int8,
    derived_path,
    file_digest,
    recipe,
    weight_type,
)

_REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(
    os.environ.get("KEMEM_TEST_MODEL_DIR") or _REPO.parent / "shared" / "models" / "m3e-small-onnx"
)
needs_model = pytest.mark.skipif(
    not (MODEL_DIR / "model.onnx").is_file() or not (MODEL_DIR / "model_int8.onnx").is_file(),
    reason=f"test model (fp32 and int8 files) not found at {MODEL_DIR} (KEMEM_TEST_MODEL_DIR)",
)

TEXTS = [
    "木木对星座和蓝玫瑰感兴趣",
    "祁煜提议在画廊的圣诞装饰中加入红色元素，让整个空间显得温暖又喜庆，木木觉得很好看。",
    "今天下雨了",
    "我们一起去南京大学图书馆看书，然后在门口的咖啡店坐了一下午，聊了很多关于未来的事情。",
    "上司是做什么工作的呢？另外，金融科技精英论坛的地点是什么？",
    "She moved to Chengdu last spring and still misses the sea.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="module")
def channel(cache: Path) -> Embedder:
    return Embedder(MODEL_DIR, "int8-channel", cache_dir=cache)


@needs_model
def test_closer_to_fp32_than_the_shipped_int8(channel: Embedder) -> None:
    fp32 = Embedder(MODEL_DIR, "fp32").embed(TEXTS)
    shipped = Embedder(MODEL_DIR, "int8").embed(TEXTS)
    ours = channel.embed(TEXTS)
    cos_shipped = (shipped * fp32).sum(axis=1)
    cos_ours = (ours * fp32).sum(axis=1)
    # m3e-small: 0.992 against 0.998 on 600 MemDaily texts (bench/results/2026-11-30-channel);
    # on this CPU's kernels (int8 weights on an x86 CPU without VNNI saturated: cosine 0.70)
    assert cos_ours.mean() > cos_shipped.mean()
    assert cos_ours.min() > 0.995
    # and the cosines between texts, which the scores read, move less from fp32's
    err_shipped = np.abs(shipped @ shipped.T - fp32 @ fp32.T).mean()
    err_ours = np.abs(ours @ ours.T - fp32 @ fp32.T).mean()
    assert err_ours < err_shipped


@needs_model
def test_named_apart_and_run_like_int8(channel: Embedder, cache: Path) -> None:
    assert channel.name == f"{MODEL_DIR.name} (int8-channel)"  # an index records it
    assert channel.name != Embedder(MODEL_DIR, "int8").name
    assert channel.batch_size == 1  # activations are quantised per run, as int8's are
    assert channel.onnx_path.parent == cache and recipe() in channel.onnx_path.name
    # each text's vector is its own, whatever else the call holds
    alone = np.stack([channel.embed_one(t) for t in TEXTS])
    np.testing.assert_array_equal(channel.embed(TEXTS), alone)


@needs_model
def test_derived_once_then_read_from_the_cache(channel: Embedder, cache: Path) -> None:
    path = channel.onnx_path
    before = path.stat().st_mtime_ns
    again = Embedder(MODEL_DIR, "int8-channel", cache_dir=cache)
    assert again.onnx_path == path and path.stat().st_mtime_ns == before
    assert sorted(p.name for p in cache.iterdir()) == [path.name]  # no temporary file left
    np.testing.assert_array_equal(again.embed(TEXTS[:2]), channel.embed(TEXTS[:2]))


@needs_model
def test_settings_choose_the_variant_and_the_cache(
    channel: Embedder, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEMEM_MODEL_DIR", str(MODEL_DIR))
    monkeypatch.setenv("KEMEM_MODEL_VARIANT", "int8-channel")
    monkeypatch.setenv("KEMEM_MODEL_CACHE_DIR", str(cache))
    settings = Settings()
    assert settings.model_variant == "int8-channel" and settings.model_cache_dir == cache
    emb = load_embedder(settings)
    # the process shares one embedder per model and variant (an earlier test's may have come
    # from another cache directory: the same derived file, named alike)
    assert isinstance(emb, Embedder) and emb.variant == "int8-channel"
    assert emb.onnx_path.name == channel.onnx_path.name


def test_the_cache_name_follows_the_fp32_file(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"one")
    first = derived_path(model, tmp_path / "cache")
    assert derived_path(model, tmp_path / "cache") == first
    model.write_bytes(b"three")  # an edited or replaced file is derived again
    assert derived_path(model, tmp_path / "cache") != first


def test_the_digest_is_read_once_a_process(tmp_path: Path) -> None:
    # auto asks for the digest twice a load; a 95 MB file is read once
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    first = file_digest(model)
    hits = _digest.cache_info().hits
    assert file_digest(model) == first and _digest.cache_info().hits == hits + 1


def test_the_weights_sign_follows_the_cpu(tmp_path: Path) -> None:
    # x86 without VNNI multiplies int8 weights with saturating 16-bit sums: uint8 weights there
    assert weight_type("x86_64", frozenset({"avx2", "fma"})) == "quint8"
    assert weight_type("AMD64", frozenset({"avx2", "avx512f", "avx512bw"})) == "quint8"
    for exact in ("avx512_vnni", "avx_vnni", "amx_int8"):
        assert weight_type("x86_64", frozenset({"avx2", exact})) == "qint8"
    assert weight_type("aarch64", frozenset()) == "qint8"  # ARM's dot products are exact
    # each is its own file in the cache (a cache shared by two kinds of host keeps both)
    model = tmp_path / "model.onnx"
    model.write_bytes(b"fp32")
    assert derived_path(model, tmp_path, "qint8") != derived_path(model, tmp_path, "quint8")
    assert derived_path(model, tmp_path) == derived_path(model, tmp_path, weight_type())


def _only_int8(tmp_path: Path) -> Path:
    d = tmp_path / "m3e-int8-only"
    d.mkdir()
    for f in MODEL_DIR.iterdir():
        if f.name != "model.onnx":
            (d / f.name).symlink_to(f)
    return d


@needs_model
def test_no_fp32_file_says_which_and_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError) as err:
        Embedder(_only_int8(tmp_path), "int8-channel", cache_dir=tmp_path / "cache")
    msg = str(err.value)
    assert "model.onnx is missing" in msg and "KEMEM_MODEL_VARIANT=int8" in msg
    assert not (tmp_path / "cache").exists()


@needs_model
def test_without_the_onnx_package_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    with pytest.raises(EmbedderError, match=r"pip install onnx.*KEMEM_MODEL_VARIANT=int8"):
        channel_int8(MODEL_DIR / "model.onnx", tmp_path / "cache")


@needs_model
def test_an_unwritable_cache_says_what_to_set(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(EmbedderError, match="KEMEM_MODEL_CACHE_DIR"):
        channel_int8(MODEL_DIR / "model.onnx", blocker / "cache")
