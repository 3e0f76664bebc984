"""Where a model's files are (a local directory, or fetched from the hub), and the error that
says what to set when they are not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kemem_es.errors import KememError

if TYPE_CHECKING:
    pass

Variant = Literal["int8", "int8-channel", "fp32"]

# Names each variant's file goes by: ours first, then the optimum / transformers.js convention.
# int8-channel is derived from the fp32 file (embed.quantize), so that is the file it needs.
ONNX_NAMES: dict[str, tuple[str, ...]] = {
    "int8": ("model_int8.onnx", "model_quantized.onnx"),
    "int8-channel": ("model.onnx",),
    "fp32": ("model.onnx",),
}
SUBDIRS = ("", "onnx")  # files sit at the root, or in onnx/ as many hub repos ship them
HUB_SIDE_FILES = (
    "tokenizer.json",
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


class EmbedderError(KememError):
    """The embedding model cannot be found, fetched or loaded; the message says what to set."""


def find_file(model_dir: Path, names: Sequence[str]) -> Path | None:
    """First of ``names`` present at the root or in ``onnx/``."""
    for sub in SUBDIRS:
        for name in names:
            candidate = model_dir / sub / name
            if candidate.is_file():
                return candidate
    return None


def other_variant(variant: str) -> str:
    """The variant to suggest when ``variant``'s file is missing."""
    return "fp32" if variant == "int8" else "int8"


def short_hash(*parts: str) -> str:
    """A short stable digest of prefix texts (an instruction may be long, and any character)."""
    import hashlib

    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:8]


def download_model(model_id: str, variant: Variant = "int8") -> Path:
    """Fetch (or reuse from the hub cache) only the chosen ONNX file and the tokenizer files."""
    from huggingface_hub import snapshot_download

    onnx_names = list(ONNX_NAMES[variant])  # only the variant asked for: the others are big
    files = [*onnx_names, *(f"{n}_data" for n in onnx_names), *HUB_SIDE_FILES]
    patterns = [f"{sub}/{f}" if sub else f for sub in SUBDIRS for f in files]
    try:
        path = Path(snapshot_download(model_id, allow_patterns=patterns))
    except Exception as exc:  # offline, unknown repo, gated, network down ...
        reason = first_sentence(str(exc)) or "no details"
        raise EmbedderError(
            f"cannot fetch embedding model {model_id!r} from the hub ({type(exc).__name__}: "
            f"{reason}); download it elsewhere and set KEMEM_MODEL_DIR to its directory"
        ) from exc
    if find_file(path, onnx_names) is None:
        raise EmbedderError(
            f"hub model {model_id!r} has no {variant} ONNX file (looked for "
            f"{', '.join(onnx_names)} at the root and in onnx/); try "
            f"KEMEM_MODEL_VARIANT={other_variant(variant)}, or export one and set KEMEM_MODEL_DIR"
        )
    return path


def first_sentence(message: str, limit: int = 160) -> str:
    """Hub errors run to several lines; the first sentence says what went wrong."""
    line = message.strip().split("\n", 1)[0]
    sentence = line.split(". ", 1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
