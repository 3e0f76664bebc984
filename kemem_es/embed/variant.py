"""Which model file a process loads when ``KEMEM_MODEL_VARIANT`` is ``auto``, the default
(docs/embedders.md).

In order: the variant the store's indices were written with (their recorded model name), so a
store keeps its vectors whatever this process could load; else ``int8-channel`` where it can
be had (a local fp32 file, and the onnx package or the file already derived: most
of fp32's quality at int8's cost, bench/results/2026-11-30-channel; a cache it could not be
written to is not "can be had": the store then starts on ``int8``); else ``int8``. A hub model
id gets ``int8`` unless its store says otherwise: its fp32 file is not fetched unasked (4× the
download). Whichever is chosen, an index written with another model is still refused
(store.embedding), never mixed. An engine that cannot say which variant its store holds fails
the load (front.parts: ``Parts._stored_model``), to be asked again at the next call.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast, get_args

from kemem_es.config import Settings
from kemem_es.embed.files import ONNX_NAMES, Variant, find_file
from kemem_es.embed.quantize import default_cache_dir, derived_path

log = logging.getLogger(__name__)


def named_variant(model_name: str | None) -> Variant | None:
    """The variant an embedder's name records (``m3e-small-onnx (int8-channel, cls pooling)``
    → ``int8-channel``); None for a remote model's name or one that records none."""
    if not model_name or not model_name.endswith(")") or "(" not in model_name:
        return None
    first = model_name[model_name.rindex("(") + 1 : -1].split(",")[0].strip()
    return cast(Variant, first) if first in get_args(Variant) else None


def derivable(model_dir: Path, cache_dir: Path | None) -> bool:
    """Whether this process can load the int8-channel file: derived already, or derivable (the
    onnx package, and a cache directory this process may create or write)."""
    fp32 = find_file(Path(model_dir).expanduser(), ONNX_NAMES["fp32"])
    if fp32 is None:
        return False
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    if derived_path(fp32, cache).is_file():
        return True
    return importlib.util.find_spec("onnx") is not None and _writable(cache)


def _writable(directory: Path) -> bool:
    """Whether ``directory`` could be written: it, or the nearest folder above it that exists
    (where it would be created)."""
    for folder in (directory, *directory.parents):
        if folder.exists():
            return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
    return False


def resolve(settings: Settings, stored_model: Callable[[], str | None] | None = None) -> Variant:
    """The variant to load: the setting, or for ``auto`` the order in the module's docstring.
    ``stored_model`` reads the model name the store's indices record (None: no store yet)."""
    if settings.model_variant != "auto":
        return settings.model_variant
    if stored_model is not None:
        found = named_variant(stored_model())
        if found is not None:
            return found
    if settings.model_dir is not None and derivable(settings.model_dir, settings.model_cache_dir):
        return "int8-channel"
    if settings.model_dir is not None:
        log.info(
            "model variant int8: int8-channel needs the model's fp32 file, the onnx package "
            "and a writable KEMEM_MODEL_CACHE_DIR (docs/embedders.md)"
        )
    return "int8"
