"""Embedder against the research-only m3e-small ONNX export (skipped when it is absent)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from kemem_es.config import Settings
from kemem_es.embed import Embedder, EmbedderError, load_embedder
from kemem_es.embed.files import ONNX_NAMES, find_file

_REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(
    os.environ.get("KEMEM_TEST_MODEL_DIR") or _REPO.parent / "shared" / "models" / "m3e-small-onnx"
)
needs_model = pytest.mark.skipif(
    not (MODEL_DIR / "tokenizer.json").is_file(),
    reason=f"test model not found at {MODEL_DIR} (set KEMEM_TEST_MODEL_DIR)",
)

MIXED = [
    "好",
    "木木对星座和蓝玫瑰感兴趣",
    "祁煜提议在画廊的圣诞装饰中加入红色元素，让整个空间显得温暖又喜庆，木木觉得很好看。",
    "今天下雨了",
    "我们一起去南京大学图书馆看书，然后在门口的咖啡店坐了一下午，聊了很多关于未来的事情。",
    "",
    "猫",
]


@pytest.fixture(scope="module")
def int8() -> Embedder:
    return Embedder(MODEL_DIR, "int8", batch_size=3)  # batch_size is fp32's only


@pytest.fixture(scope="module")
def fp32() -> Embedder:
    return Embedder(MODEL_DIR, "fp32", batch_size=3)


@needs_model
def test_dim_norm_and_dtype(int8: Embedder) -> None:
    vecs = int8.embed(MIXED)
    assert int8.dim == 512
    assert vecs.shape == (len(MIXED), 512)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert "int8" in int8.name and "m3e" in int8.name


@needs_model
def test_empty_input(int8: Embedder) -> None:
    out = int8.embed([])
    assert out.shape == (0, 512) and out.dtype == np.float32


@needs_model
def test_batch_equals_one_by_one_in_order(fp32: Embedder) -> None:
    # Small batches and mixed lengths: sorting and several batches must not reorder rows.
    batched = fp32.embed(MIXED)
    singles = np.stack([fp32.embed_one(t) for t in MIXED])
    np.testing.assert_allclose(batched, singles, atol=1e-4)
    np.testing.assert_allclose(fp32.embed(MIXED[::-1])[::-1], batched, atol=1e-4)


@needs_model
def test_int8_rows_do_not_depend_on_their_batch(int8: Embedder) -> None:
    # Dynamic int8 quantisation scales activations over a run's whole input, so each text runs
    # alone: a memory's vector is the same in any import and equals its query vector.
    assert int8.batch_size == 1
    batched = int8.embed(MIXED)
    singles = np.stack([int8.embed_one(t) for t in MIXED])
    np.testing.assert_array_equal(batched, singles)
    np.testing.assert_array_equal(
        int8.embed([*MIXED[::-1], "另一段文字"])[: len(MIXED)][::-1], batched
    )


@needs_model
def test_int8_close_to_fp32(int8: Embedder, fp32: Embedder) -> None:
    a = int8.embed(MIXED[1:5])
    b = fp32.embed(MIXED[1:5])
    cos = (a * b).sum(axis=1)
    assert (cos > 0.95).all(), cos


@needs_model
@pytest.mark.parametrize("variant", ["int8", "fp32"])
def test_semantics(variant: str, int8: Embedder, fp32: Embedder) -> None:
    emb = int8 if variant == "int8" else fp32
    q, near, far = emb.embed(["我很喜欢养猫", "我家里养了一只可爱的小猫咪", "明天股市可能会下跌"])
    assert q @ near > q @ far


def test_missing_dir_raises(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="not found"):
        Embedder(tmp_path / "nope")


@needs_model
def test_missing_variant_names_path(tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer.json", "config.json"):
        shutil.copy(MODEL_DIR / name, tmp_path / name)
    with pytest.raises(EmbedderError, match=r"model_int8\.onnx") as err:
        Embedder(tmp_path, "int8")
    assert "KEMEM_MODEL_VARIANT=fp32" in str(err.value)
    assert Embedder(tmp_path, "fp32").dim == 512


@needs_model
def test_onnx_subfolder(tmp_path: Path) -> None:
    (tmp_path / "onnx").mkdir()
    shutil.copy(MODEL_DIR / "model_int8.onnx", tmp_path / "onnx" / "model_int8.onnx")
    shutil.copy(MODEL_DIR / "tokenizer.json", tmp_path / "tokenizer.json")
    assert Embedder(tmp_path).embed_one("你好").shape == (512,)


def test_hub_id_offline_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hf_constants

    # The hub reads HF_HUB_OFFLINE at import time, so set both the variable and the constant.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    settings = Settings(model="kemem-test/no-such-model", model_dir=None)
    with pytest.raises(EmbedderError, match="KEMEM_MODEL_DIR") as err:
        Embedder.from_settings(settings)
    assert "\n" not in str(err.value)


def test_nothing_configured_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEMEM_MODEL_DIR", raising=False)
    monkeypatch.delenv("KEMEM_MODEL", raising=False)
    with pytest.raises(EmbedderError, match=r"KEMEM_MODEL_DIR.*KEMEM_MODEL"):
        load_embedder(Settings())


@needs_model
def test_settings_model_dir_wins_and_is_cached() -> None:
    settings = Settings(model_dir=MODEL_DIR, model="kemem-test/never-fetched", embed_threads=1)
    first = load_embedder(settings)
    assert first is load_embedder(Settings(model_dir=MODEL_DIR, embed_threads=1))
    # auto, the default: int8-channel, derived from the directory's fp32 file where it has one
    has_fp32 = find_file(MODEL_DIR, ONNX_NAMES["fp32"]) is not None
    assert first.variant == ("int8-channel" if has_fp32 else "int8") and first.dim == 512


def _wordpiece(vocab: list[str]) -> object:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def test_an_uncased_vocabulary_gets_lowercased_input() -> None:
    """m3e's vocabulary has no capitals but its tokenizer keeps them: without lowercasing,
    every capitalised word (a name, KTV) is [UNK]."""
    from kemem_es.embed.loading import lowercase_if_uncased as _lowercase_if_uncased

    vocab = ["[UNK]", "[CLS]", "<S>", "emma", "told", "nova", "ktv", "##s"]
    tok = _wordpiece(vocab)
    assert tok.encode("Emma told Nova").tokens == ["[UNK]", "told", "[UNK]"]
    assert _lowercase_if_uncased(tok) is True  # [UNK] and <S> are markers, not cased words
    assert tok.encode("Emma told Nova KTVs").tokens == ["emma", "told", "nova", "ktv", "##s"]
    cased = _wordpiece([*vocab, "Emma"])
    assert _lowercase_if_uncased(cased) is False
    assert cased.encode("Emma").tokens == ["Emma"]


@needs_model
def test_the_model_reads_capitalised_words(int8: Embedder) -> None:
    assert int8.lowercases
    assert "[UNK]" not in int8._tokenizer.encode("Emma asked Nova about the KTV").tokens
    # an English word takes one to four tokens; a Han character one
    assert int8.count_tokens(["sourdough starter", "木木吃火锅", ""]) == [6, 5, 0]
    a, b = int8.embed(["Emma adopted a cat", "emma adopted a cat"])
    assert float(a @ b) > 0.999


@needs_model
def test_a_text_longer_than_the_window_is_read_to_its_end() -> None:
    """Past ``max_length`` tokens the text runs in further windows, averaged: two texts that
    differ only after the first window get different vectors, each nearer its own ending (head
    truncation gave both the same vector), and rows stay unit length and in order."""
    small = Embedder(MODEL_DIR, "fp32", max_length=16)
    head = "我们一起去南京大学图书馆看书，然后在门口的咖啡店坐了一下午，"
    assert small.count_tokens([head])[0] > 14  # fills the first window ([CLS] + 14 + [SEP])
    cat, fund = head + "聊了她新养的小猫咪", head + "聊了股票和基金理财"
    rows = small.embed(["猫", cat, fund, "理财"])
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    q_cat, v_cat, v_fund, q_fund = rows
    assert float(v_cat @ v_fund) < 0.99
    assert float(v_cat @ q_cat) > float(v_fund @ q_cat)
    assert float(v_fund @ q_fund) > float(v_cat @ q_fund)
    one_by_one = np.stack([small.embed_one(t) for t in ("猫", cat, fund, "理财")])
    np.testing.assert_allclose(rows, one_by_one, atol=1e-5)
    # the windows: equal sizes within the limit, each framed by [CLS] … [SEP], every token once
    tok = small._tokenizer
    windows = [ids for ids, _ in small._windows(tok.encode(cat))]
    sizes = [len(w) for w in windows]
    assert len(windows) >= 2 and max(sizes) <= small.long_window and max(sizes) - min(sizes) <= 1
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert all(w[0] == cls and w[-1] == sep for w in windows)
    uncut = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    assert [t for w in windows for t in w[1:-1]] == uncut.encode(cat, add_special_tokens=False).ids
