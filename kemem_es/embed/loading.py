"""Loading a model's tokenizer (cased or not) and its onnxruntime session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

from kemem_es.embed.files import EmbedderError


def load_tokenizer(path: Path, max_length: int) -> tuple[Tokenizer, int]:
    """The tokenizer, cutting at ``max_length`` with the rest kept as overflow (embed() runs
    it as further windows), and its pad id; padding is done per batch of pieces."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # corrupt or foreign-format file
        raise EmbedderError(f"cannot read tokenizer {path}: {exc}") from exc
    tok.enable_truncation(max_length=max_length)
    # Keep the file's pad token if it names one; BERT vocabularies use [PAD] = 0.
    pad_token = (tok.padding or {}).get("pad_token") or "[PAD]"
    pad_id = tok.token_to_id(pad_token)
    tok.no_padding()
    return tok, pad_id if pad_id is not None else 0


def lowercase_if_uncased(tok: Tokenizer) -> bool:
    """Lowercase the input when the vocabulary has no capital letters but the tokenizer keeps
    them (m3e ships bert-base-chinese's lowercase vocabulary with ``lowercase: false``): every
    capitalised word — names, sentence starts, KTV — would otherwise become [UNK], and an
    English memory would lose exactly its most telling words. Returns whether it did."""
    from tokenizers import normalizers

    # Markers such as [UNK] or <S> are not words: look at word pieces made of letters only.
    pieces = (t.removeprefix("##") for t in tok.get_vocab())
    cased = any(p.isalpha() and any("A" <= ch <= "Z" for ch in p) for p in pieces)
    if cased:
        return False
    current = tok.normalizer
    lower = normalizers.Lowercase()
    tok.normalizer = lower if current is None else normalizers.Sequence([current, lower])
    return True


class Node(Protocol):
    name: str
    shape: list[int | str | None]


class Session(Protocol):
    """What the embedder uses of an onnxruntime InferenceSession (onnxruntime has no types)."""

    def get_inputs(self) -> list[Node]: ...

    def get_outputs(self) -> list[Node]: ...

    def run(self, output_names: list[str], input_feed: dict[str, np.ndarray]) -> list[Any]: ...


def load_session(path: Path, threads: int) -> Session:
    import onnxruntime as ort

    from kemem_es.embed.ort_options import session_options

    opts = session_options(threads)  # no spin-waiting threads (issue 42)
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbedderError(f"cannot load ONNX model {path}: {exc}") from exc
