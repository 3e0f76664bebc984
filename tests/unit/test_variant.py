"""KEMEM_MODEL_VARIANT=auto (embed.variant, the default): the store's own variant first, then
int8-channel where this process can load it, then int8. No model runs here: a stand-in fp32
file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from kemem_es.config import Settings
from kemem_es.embed import variant as variant_mod
from kemem_es.embed.quantize import derived_path
from kemem_es.embed.variant import named_variant, resolve


def _settings(tmp_path: Path, fp32: bool = True, **update: Any) -> Settings:
    model = tmp_path / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "model_int8.onnx").write_bytes(b"int8")
    if fp32:
        (model / "model.onnx").write_bytes(b"fp32")
    values: dict[str, Any] = {
        "model_dir": model,
        "model_variant": "auto",
        "model_cache_dir": tmp_path / "cache",
    }
    return Settings(**(values | update))


@pytest.fixture()
def no_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        variant_mod.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnx" else real(name, *a),
    )


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("m3e-small-onnx (int8)", "int8"),
        ("m3e-small-onnx (int8-channel)", "int8-channel"),
        ("bge-m3 (fp32, cls pooling, prefixes 1a2b3c4d)", "fp32"),
        ("text-embedding-v3", None),  # a remote model records no file
        ("odd (not a variant)", None),
        (None, None),
    ],
)
def test_the_variant_a_model_name_records(name: str | None, want: str | None) -> None:
    assert named_variant(name) == want


def test_the_store_s_variant_comes_first(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert resolve(s, lambda: "m3e-small-onnx (int8)") == "int8"
    assert resolve(s, lambda: "m3e-small-onnx (fp32)") == "fp32"
    assert resolve(s, lambda: None) == "int8-channel"  # no store yet


def test_a_set_variant_wins_and_the_store_is_not_asked(tmp_path: Path) -> None:
    asked: list[bool] = []

    def stored() -> str:
        asked.append(True)
        return "m3e-small-onnx (int8-channel)"

    assert resolve(_settings(tmp_path, model_variant="int8"), stored) == "int8"
    assert resolve(_settings(tmp_path, model_variant="fp32"), stored) == "fp32"
    assert asked == []


def test_int8_channel_where_it_can_be_had(tmp_path: Path) -> None:
    assert resolve(_settings(tmp_path)) == "int8-channel"  # fp32 file, onnx installed
    assert resolve(_settings(tmp_path / "x", fp32=False)) == "int8"  # no fp32 file


@pytest.mark.usefixtures("no_onnx")
def test_without_the_onnx_package_only_a_derived_file_will_do(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert resolve(s) == "int8"
    assert s.model_dir is not None and s.model_cache_dir is not None
    cached = derived_path(s.model_dir / "model.onnx", s.model_cache_dir)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"derived earlier")
    assert resolve(s) == "int8-channel"


def test_a_hub_model_id_gets_int8(tmp_path: Path) -> None:
    s = _settings(tmp_path, model_dir=None, model="BAAI/bge-small-zh-v1.5")
    assert resolve(s) == "int8"  # its fp32 file is not fetched unasked
    assert resolve(s, lambda: "BAAI/bge-small-zh-v1.5 (fp32)") == "fp32"


def test_auto_is_the_default() -> None:
    # a new store gets int8-channel where it can be had; a store keeps the variant it records
    assert Settings.model_fields["model_variant"].default == "auto"


def test_a_cache_that_cannot_be_written_starts_a_new_store_on_int8(tmp_path: Path) -> None:
    """Deriving would fail at the load (every call refused): auto gives int8 instead, which the
    new store then records and keeps. (A file where the cache's folder would be: what a
    read-only mount is to a process, and testable as root.)"""
    blocked = tmp_path / "not-a-folder"
    blocked.write_bytes(b"")
    s = _settings(tmp_path, model_cache_dir=blocked / "kemem-es" / "models")
    assert resolve(s) == "int8"
    assert resolve(s, lambda: "m3e-small-onnx (int8-channel)") == "int8-channel"
    assert resolve(_settings(tmp_path, model_cache_dir=tmp_path / "new" / "cache")) == (
        "int8-channel"  # a folder not made yet, under one that can be written
    )


def test_an_engine_that_cannot_say_now_is_asked_again_not_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Choosing by the files while the engine is down would load int8-channel for a store
    written with int8, refused until the process restarts: the load fails and is retried."""
    from kemem_es.errors import EngineUnavailable
    from kemem_es.front.parts import Parts

    answers: list[Any] = [EngineUnavailable("down"), {"model": "m3e-small-onnx (int8)"}]

    def stored(engine: object) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    loaded: list[str] = []

    def load(settings: Settings, stored_model: Any) -> str:
        loaded.append(resolve(settings, stored_model))
        return "the embedder"

    monkeypatch.setattr("kemem_es.store.embedding.stored", stored)
    monkeypatch.setattr("kemem_es.embed.load_embedder", load)
    parts = Parts(_settings(tmp_path))
    parts.__dict__["engine"] = object()  # stands in: `stored` above answers for it
    with pytest.raises(EngineUnavailable, match="KEMEM_MODEL_VARIANT=auto") as err:
        parts.embedder  # noqa: B018
    assert "set KEMEM_MODEL_VARIANT" in str(err.value) and loaded == []
    assert parts.embedder == "the embedder"
    assert loaded == ["int8"]  # the store's, not the files' int8-channel
