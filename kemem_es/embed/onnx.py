"""Sentence embeddings with onnxruntime: BERT-style ONNX export, mean pooling, L2 norm.

The model is a local directory (``KEMEM_MODEL_DIR``) or, for users with internet, a hub model id
(``KEMEM_MODEL``) fetched once with ``huggingface_hub``. No torch: onnxruntime on CPU is fast
enough for query-time embedding (a few ms) and batch indexing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from kemem_es.embed.files import (
    ONNX_NAMES,
    EmbedderError,
    Variant,
    download_model,
    find_file,
    other_variant,
    short_hash,
)
from kemem_es.embed.loading import load_session, load_tokenizer, lowercase_if_uncased
from kemem_es.embed.quantize import channel_int8
from kemem_es.embed.runs import SideBySide, default_parallel
from kemem_es.embed.variant import resolve as resolve_variant

if TYPE_CHECKING:
    from tokenizers import Encoding

    from kemem_es.config import Settings
    from kemem_es.embed.remote import RemoteEmbedder

__all__ = ["POOLINGS", "Embedder", "EmbedderError", "Pooling", "Variant", "download_model",
           "load_embedder"]  # fmt: skip

Pooling = Literal["mean", "cls", "last"]
POOLINGS: tuple[str, ...] = ("mean", "cls", "last")


class Embedder:
    """Text → unit-length float32 vectors, batched; safe to share between threads."""

    def __init__(
        self,
        model_dir: Path,
        variant: Variant = "int8",
        threads: int = 0,
        batch_size: int = 64,
        max_length: int = 256,
        long_window: int = 128,
        *,
        label: str | None = None,
        pooling: Pooling = "mean",
        normalize: bool = True,
        query_prefix: str = "",
        document_prefix: str = "",
        cache_dir: Path | None = None,
    ) -> None:
        model_dir = Path(model_dir).expanduser()
        if not model_dir.is_dir():
            raise EmbedderError(
                f"embedding model directory not found: {model_dir} (check KEMEM_MODEL_DIR)"
            )
        if variant not in ONNX_NAMES:
            raise EmbedderError(
                f"unknown model variant {variant!r}: use 'int8', 'int8-channel' or 'fp32'"
            )
        if pooling not in POOLINGS:
            raise EmbedderError(f"unknown pooling {pooling!r}: use mean, cls or last")
        self.pooling: Pooling = pooling
        self.normalize = normalize
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        onnx_path = find_file(model_dir, ONNX_NAMES[variant])
        if onnx_path is None:
            other = other_variant(variant)
            hint = (
                f"; the {other} variant is there: set KEMEM_MODEL_VARIANT={other}"
                if find_file(model_dir, ONNX_NAMES[other])
                else ""
            )
            raise EmbedderError(
                f"no {variant} ONNX model: {model_dir / ONNX_NAMES[variant][0]} is missing{hint}"
            )
        tok_path = find_file(model_dir, ("tokenizer.json",))
        if tok_path is None:
            raise EmbedderError(f"tokenizer missing: {model_dir / 'tokenizer.json'}")
        if variant == "int8-channel":  # derived from the fp32 file once, then cached
            onnx_path = channel_int8(onnx_path, cache_dir)

        self.model_dir = model_dir
        self.variant: Variant = variant
        self.onnx_path = onnx_path
        # int8 graphs quantise activations over the whole input tensor of a run, so a text's
        # vector would depend on its batch mates and their padding (R@5 of the vector mode
        # moved by 0.03 on a dev set when unrelated memories joined the import). Each text
        # runs alone there — as fast on a few cores — and a memory gets the same vector
        # whether it is imported in bulk, added on its own or asked as a query.
        quantized = variant != "fp32"  # int8 and int8-channel quantise activations alike
        self.batch_size = 1 if quantized else max(1, batch_size)
        self.max_length = max_length
        # Windows for a text longer than max_length (see embed): 128 tokens measured better
        # than the model's full window for long multi-topic texts.
        self.long_window = min(long_window, max_length)
        self._label = label or model_dir.name
        self._tokenizer, self._pad_id = load_tokenizer(tok_path, max_length)
        # True when the vocabulary is uncased and the input is lowercased for it (below).
        self.lowercases = lowercase_if_uncased(self._tokenizer)
        # int8: one thread a run and ``threads`` runs side by side (embed.runs: less CPU, the
        # same vectors); fp32's batched matrices split well over the threads of one run.
        side_by_side = quantized
        self._session = load_session(onnx_path, 1 if side_by_side else threads)
        self._runs = SideBySide((threads or default_parallel()) if side_by_side else 1)
        self._input_names = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._input_names:
            raise EmbedderError(
                f"{onnx_path} takes inputs {sorted(self._input_names)}; "
                "expected input_ids and attention_mask (a BERT-style encoder export)"
            )
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self._dim = self._resolve_dim(model_dir)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        """Model + variant, for reports and index metadata (e.g. ``m3e-small-onnx (int8)``);
        a pooling other than mean, no normalisation or a prefix are part of it (they change
        every vector, so an index written with one must not be queried with another)."""
        extra = [] if self.pooling == "mean" else [f"{self.pooling} pooling"]
        if not self.normalize:
            extra.append("not normalised")
        if self.query_prefix or self.document_prefix:
            extra.append("prefixes " + short_hash(self.query_prefix, self.document_prefix))
        return f"{self._label} ({', '.join([self.variant, *extra])})"

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts asked as queries: ``query_prefix`` goes before each (e5's ``query: ``,
        a Qwen3-Embedding instruction); ``embed`` is for the memories' own texts."""
        if isinstance(texts, str):
            raise TypeError("embed_queries() takes a sequence of texts")
        return self._embed([self.query_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """One query text → a (dim,) float32 vector."""
        return self.embed_queries([text])[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed many texts; row i belongs to ``texts[i]``; shape (n, dim), float32.

        A text longer than the model's window (``max_length`` tokens) is not cut: it is split
        into equal windows of at most ``long_window`` tokens, and the windows' mean-pooled
        states are averaged by their token counts. A long session summary then keeps what its
        last third says (head truncation dropped it), and windows shorter than the model's
        keep the topics of a multi-topic summary apart: on the English session set the vector
        mode's R@5 went 0.450 (head) → 0.500 (256-token windows) → 0.530 (128). fp32 texts
        are sorted by length before batching so each batch pads to similar lengths, then put
        back in the caller's order; int8 runs each window alone (see ``__init__``), so its rows
        equal ``embed_one`` exactly.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        if self.document_prefix:
            texts = [self.document_prefix + t for t in texts]
        return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """``embed`` without a prefix: the texts as given."""
        pieces: list[tuple[list[int], list[int]]] = []
        owner: list[int] = []
        for i, enc in enumerate(self._tokenizer.encode_batch(list(texts))):
            windows = self._windows(enc) if enc.overflowing else [(enc.ids, enc.type_ids)]
            pieces += windows
            owner += [i] * len(windows)
        pooled = np.empty((len(pieces), self._dim), dtype=np.float32)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i][0]), reverse=True)
        batches = [order[s : s + self.batch_size] for s in range(0, len(pieces), self.batch_size)]
        results = self._runs.map(lambda idx: self._pool([pieces[i] for i in idx]), batches)
        for idx, rows in zip(batches, results, strict=True):
            pooled[idx] = rows
        if len(pieces) == len(texts):  # no text overflowed: one piece each, in order
            out = pooled
        else:
            out = np.zeros((len(texts), self._dim), dtype=np.float32)
            weights = np.asarray([len(ids) for ids, _ in pieces], dtype=np.float32)
            np.add.at(out, np.asarray(owner), pooled * weights[:, None])
            out /= np.bincount(owner, weights=weights)[:, None].astype(np.float32)
        if not self.normalize:
            return out.astype(np.float32, copy=False)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Model tokens per text, without [CLS]/[SEP] (capped at ``max_length``): how much of
        the model's input a text takes, which characters tell only for Chinese (an English
        word is one to four tokens)."""
        encs = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [sum(e.attention_mask) for e in encs]

    def embed_one(self, text: str) -> np.ndarray:
        """One text → a (dim,) float32 unit vector (the query path)."""
        return self.embed([text])[0]

    def __repr__(self) -> str:
        return f"Embedder({self.name}, dim={self._dim}, path={self.onnx_path})"

    def _windows(self, enc: Encoding) -> list[tuple[list[int], list[int]]]:
        """An overflowing encoding's tokens in equal windows of at most ``long_window``, each
        framed by the text's own leading and trailing special tokens ([CLS] … [SEP])."""
        body = [
            t
            for part in (enc, *enc.overflowing)  # unpadded: the tokenizer pads nothing
            for t, special in zip(part.ids, part.special_tokens_mask, strict=True)
            if not special
        ]
        head = enc.ids[:1] if enc.special_tokens_mask[0] else []
        tail = enc.ids[-1:] if enc.special_tokens_mask[-1] else []
        room = max(1, self.long_window - len(head) - len(tail))
        size = -(-len(body) // -(-len(body) // room))  # equal windows, none over room
        out = []
        for j in range(0, len(body), size):
            ids = [*head, *body[j : j + size], *tail]
            out.append((ids, [0] * len(ids)))
        return out

    def _pool(self, pieces: Sequence[tuple[list[int], list[int]]]) -> np.ndarray:
        """Pooled last hidden states (not normalised) of token-id pieces, padded here (on the
        right): their mean over the real tokens, the first token's ([CLS]: bge) or the last
        real token's (decoder models such as Qwen3-Embedding, whose tokenizer ends each text
        with its end-of-text token)."""
        width = max(len(ids) for ids, _ in pieces)
        ids = np.full((len(pieces), width), self._pad_id, dtype=np.int64)
        types = np.zeros((len(pieces), width), dtype=np.int64)
        mask = np.zeros((len(pieces), width), dtype=np.int64)
        for row, (piece_ids, piece_types) in enumerate(pieces):
            ids[row, : len(piece_ids)] = piece_ids
            types[row, : len(piece_types)] = piece_types
            mask[row, : len(piece_ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = types
        if "position_ids" in self._input_names:  # decoder exports take positions too
            feed["position_ids"] = np.broadcast_to(np.arange(width, dtype=np.int64), ids.shape)
        hidden = self._session.run([self._output], feed)[0].astype(np.float32, copy=False)
        if hidden.ndim == 2:  # the graph pools already (a sentence_embedding output)
            return hidden
        if self.pooling == "cls":
            return hidden[:, 0, :]
        if self.pooling == "last":
            last = mask.sum(axis=1) - 1
            return hidden[np.arange(len(pieces)), last, :]
        m = mask[:, :, None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)

    def _resolve_dim(self, model_dir: Path) -> int:
        """Dimension from the graph's output shape, cross-checked with config.json's hidden_size.

        A mismatch means the directory mixes files of different models: fail now, not when the
        index rejects the vectors.
        """
        shape = next(o.shape for o in self._session.get_outputs() if o.name == self._output)
        from_graph = shape[-1] if shape and isinstance(shape[-1], int) else None
        from_config = None
        cfg = find_file(model_dir, ("config.json",))
        if cfg is not None:
            try:
                from_config = json.loads(cfg.read_text(encoding="utf-8")).get("hidden_size")
            except (OSError, ValueError):
                from_config = None
        if from_graph and from_config and from_graph != from_config:
            raise EmbedderError(
                f"{self.onnx_path} outputs {from_graph} dims but {cfg} says hidden_size "
                f"{from_config}: the model files do not belong together"
            )
        dim = from_graph or from_config
        if not dim:  # fully dynamic graph and no config: ask the model itself
            enc = self._tokenizer.encode("维度")
            dim = self._pool([(enc.ids, enc.type_ids)]).shape[1]
        return int(dim)

    @classmethod
    def from_settings(cls, settings: Settings, variant: Variant | None = None) -> Embedder:
        """A fresh embedder from ``KEMEM_MODEL_DIR`` (wins) or ``KEMEM_MODEL`` (a hub id);
        ``variant``: the file to load (default: ``KEMEM_MODEL_VARIANT`` resolved without a
        store, embed.variant)."""
        variant = variant or resolve_variant(settings)
        kwargs: dict[str, Any] = {
            "variant": variant,
            "threads": settings.embed_threads,
            "batch_size": settings.embed_batch,
            "max_length": settings.embed_max_length,
            "pooling": settings.embed_pooling,
            "normalize": settings.embed_normalize,
            "query_prefix": settings.embed_query_prefix,
            "document_prefix": settings.embed_document_prefix,
            "cache_dir": settings.model_cache_dir,
        }
        if settings.model_dir is not None:
            return cls(settings.model_dir, **kwargs)
        if settings.model:
            path = download_model(settings.model, variant)
            return cls(path, label=settings.model, **kwargs)
        raise EmbedderError(
            "no embedding model configured: set KEMEM_MODEL_DIR to a local ONNX model directory "
            "(or KEMEM_MODEL to a hub model id, with internet)"
        )


_CACHE: dict[tuple[object, ...], Embedder] = {}
_REMOTE: dict[tuple[object, ...], RemoteEmbedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(
    settings: Settings, stored_model: Callable[[], str | None] | None = None
) -> Embedder | RemoteEmbedder:
    """The shared embedder for these settings: sessions are costly, so each loads once.

    ``KEMEM_EMBED_URL`` set: the remote OpenAI-compatible service (``embed.remote``), else the
    local ONNX model, its variant resolved with ``stored_model`` (the model name the store's
    indices record: embed.variant). Keyed by every setting that changes a vector or how it is
    computed (two settings differing there must not share one).
    """
    if settings.embed_url:
        from kemem_es.embed.remote import RemoteEmbedder

        key: tuple[object, ...] = (
            "remote",
            settings.embed_url,
            settings.embed_model,
            settings.embed_api_key.get_secret_value() if settings.embed_api_key else None,
            settings.embed_timeout_s,
            settings.embed_dim,
            settings.embed_batch,
            settings.embed_query_prefix,
            settings.embed_document_prefix,
        )
        with _CACHE_LOCK:
            if key not in _REMOTE:
                _REMOTE[key] = RemoteEmbedder.from_settings(settings)
            return _REMOTE[key]
    source = str(settings.model_dir) if settings.model_dir is not None else settings.model
    variant = resolve_variant(settings, stored_model)
    key = (
        source,
        variant,
        settings.embed_threads,
        settings.embed_batch,
        settings.embed_max_length,
        settings.embed_pooling,
        settings.embed_normalize,
        settings.embed_query_prefix,
        settings.embed_document_prefix,
    )
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = Embedder.from_settings(settings, variant)
        return _CACHE[key]
