"""The ``int8-channel`` variant: 8-bit weights with one scale per output channel, derived from
the model's fp32 file and kept in a cache (issue 39).

The int8 files a model ships (``model_int8.onnx``, optimum's ``model_quantized.onnx``) are
usually onnxruntime's dynamic quantisation with one scale per weight matrix: a column of small
weights shares its scale with the matrix's largest, and loses most of its bits. One scale per
output channel keeps them. Measured for m3e-small (bench/results/2026-11-30-channel): the
vectors' cosine to fp32's 0.992 → 0.998, the error of a query–memory cosine 0.009 → 0.004, and
in stores 15× the dev sets' size fusion's R@5 +0.009 to +0.037 over the shipped int8 (most of
what fp32 buys, at int8's CPU a run against fp32's 4–5×).

The derived file is a pure function of the fp32 file and these settings, so it is written once
per machine under the cache directory (``KEMEM_MODEL_CACHE_DIR``), named by the fp32 file's
digest: an edited or replaced fp32 file gets a new one, and two processes deriving at once each
write a temporary file and rename it (the same bytes either way). Deriving needs the ``onnx``
package (in the base install, for the default variant ``auto``); loading a derived file needs
only onnxruntime.

The weights' sign follows the CPU (``weight_type``). onnxruntime multiplies uint8 activations by
int8 weights with VPMADDUBSW on x86 CPUs without VNNI, whose 16-bit pair sums saturate; with one
scale per channel every column uses the whole int8 range, so they saturate often: on an AMD EPYC
with AVX2 alone the int8-weight file's vectors sat at cosine 0.70 to fp32's
(bench/results/2026-11-30-avx2). uint8 weights take a kernel that widens to 16 bits first, exact
on every CPU, and cost the same there; VNNI (and AMX) multiply int8 weights in one exact
instruction, so CPUs with it keep int8 weights and their faster kernel.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from kemem_es.embed.files import EmbedderError

# Part of the derived file's name: a change of how it is derived must not reuse an old file.
RECIPE = "dyn-{weights}-per-channel-v1"

WeightType = Literal["qint8", "quint8"]

# CPU flags (Linux's /proc/cpuinfo names) of an exact int8 × uint8 multiply on x86.
_EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


@functools.cache  # the CPU does not change under a running process
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()  # not Linux: unknown, so the safe choice below


def weight_type(machine: str | None = None, flags: frozenset[str] | None = None) -> WeightType:
    """``"qint8"`` where onnxruntime multiplies int8 weights exactly (x86 with VNNI or AMX, and
    ARM's dot-product kernels), else ``"quint8"`` (x86 without VNNI: see the module's note)."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return "qint8"
    return "qint8" if (_cpu_flags() if flags is None else flags) & _EXACT_INT8_FLAGS else "quint8"


def recipe(weights: WeightType | None = None) -> str:
    return RECIPE.format(weights=weights or weight_type())


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """onnxruntime's quantiser logs advice on the root logger at WARNING; hold it back."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kemem-es/models`` (``~/.cache`` without it): shared by every kemem-es
    home on the machine, since the file depends on the model alone."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kemem-es" / "models"


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the file's sha256 (~0.1–0.2 s for a 95 MB model), read once
    a process for the same file: ``auto`` asks twice a load (``variant.derivable``, then the
    load itself). A file edited or replaced in place has another size or mtime, so another
    key."""
    st = path.stat()
    return _digest(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.cache
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def derived_path(fp32_path: Path, cache_dir: Path, weights: WeightType | None = None) -> Path:
    """Where the file derived for this CPU's weight type (or ``weights``) is cached."""
    return cache_dir / f"{fp32_path.stem}-{file_digest(fp32_path)}-{recipe(weights)}.onnx"


def channel_int8(fp32_path: Path, cache_dir: Path | None = None) -> Path:
    """The per-channel int8 file derived from ``fp32_path``: from the cache, or derived now."""
    cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    weights = weight_type()
    target = derived_path(fp32_path, cache_dir, weights)
    if target.is_file():
        return target
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise EmbedderError(
            "the int8-channel model variant is derived from the fp32 file with the onnx "
            "package (in kemem-es's base install): pip install onnx, or set "
            "KEMEM_MODEL_VARIANT=int8"
        ) from exc
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".onnx", dir=cache_dir)
        os.close(fd)
    except OSError as exc:
        raise EmbedderError(
            f"cannot write the int8-channel model under {cache_dir} ({exc.strerror}): "
            "set KEMEM_MODEL_CACHE_DIR to a writable directory"
        ) from exc
    try:
        with _quiet_root_logger():  # its advice to pre-process is for calibrated quantisation
            quantize_dynamic(
                str(fp32_path),
                tmp,
                per_channel=True,
                weight_type=QuantType.QInt8 if weights == "qint8" else QuantType.QUInt8,
            )
        os.chmod(tmp, 0o644)  # mkstemp's 0600: the cache is shared by the machine's users
        os.replace(tmp, target)
    except Exception as exc:
        raise EmbedderError(
            f"cannot derive the int8-channel model from {fp32_path}: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
