"""Counting tokens for the context budget with a real tokenizer (``tokenizers``).

The tokenizer is a ``tokenizer.json``: ``KEMEM_SESSION_TOKENIZER``, else the embedding model's
(``KEMEM_MODEL_DIR/tokenizer.json``). Give your chat model's own file for exact counts: the
default is a BERT-style vocabulary that counts every Han character as one token, while the BPE
vocabularies of Qwen, DeepSeek or GPT-4o merge frequent pairs (fewer tokens per character), so
the default errs on the safe side for Chinese: a context it fits in N tokens fits the chat
model's N too (docs/sessions.md). Without any tokenizer file, every character counts as one
token (the same rule for Chinese; generous for latin text).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from kemem_es.errors import InvalidInput


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def count_parts(self, parts: Sequence[str]) -> tuple[str, int, list[int]]:
        """The parts joined by line breaks (empty ones left out), its tokens, and each
        part's tokens (0 for an empty one), from one tokenisation of the whole text."""
        ...


def _joined(parts: Sequence[str]) -> tuple[str, list[tuple[int, int] | None]]:
    """``"\n".join`` of the non-empty parts, and each part's character span in it."""
    spans: list[tuple[int, int] | None] = []
    at = 0
    for p in parts:
        if not p:
            spans.append(None)
            continue
        if at:
            at += 1  # the line break before it
        spans.append((at, at + len(p)))
        at += len(p)
    return "\n".join(p for p in parts if p), spans


class CharCounter:
    """One token per character (no tokenizer file available)."""

    name = "characters"

    def count(self, text: str) -> int:
        return len(text)

    def count_parts(self, parts: Sequence[str]) -> tuple[str, int, list[int]]:
        text, _ = _joined(parts)
        return text, len(text), [len(p) for p in parts]


COUNTS_KEPT = 8192  # line counts a counter remembers
CACHED_MAX_CHARS = 2000  # longer texts (whole contexts) are counted each time

# Pre-tokenizers that drop whitespace and only ever split: no token holds a line break. BERT-
# style vocabularies (m3e, bge, MiniLM) use the first; byte-level BPE (Qwen, GPT) does not.
_SPLITTING = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_SPLIT_ONLY = _SPLITTING | {"Punctuation", "Digits", "UnicodeScripts"}
# Normalizers that map characters one by one (or compose within a line): none joins two lines.
_PER_CHAR = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"}


def splits_lines(config: Mapping[str, object]) -> bool:
    """Whether a ``tokenizer.json`` never makes a token across a line break, so that a text's
    tokens are exactly the sum of its lines' (what ``count_parts`` relies on to count a whole
    context from the lines' remembered counts instead of tokenising it again)."""

    def kinds(node: object, seq: str) -> list[str] | None:
        if node is None:
            return []
        if not isinstance(node, Mapping):
            return None
        if node.get("type") == "Sequence":
            out: list[str] = []
            for sub in node.get(seq) or []:
                got = kinds(sub, seq)
                if got is None:
                    return None
                out += got
            return out
        return [str(node.get("type"))]

    pre = kinds(config.get("pre_tokenizer"), "pretokenizers")
    norm = kinds(config.get("normalizer"), "normalizers")
    if pre is None or norm is None or not set(pre) & _SPLITTING:
        return False
    if not set(pre) <= _SPLIT_ONLY or not set(norm) <= _PER_CHAR:
        return False
    added = config.get("added_tokens") or []  # matched before pre-tokenizing: one with a space
    return isinstance(added, list) and all(  # or line break in it could span two lines
        isinstance(a, Mapping) and not any(c.isspace() for c in str(a.get("content", "")))
        for a in added
    )


class FileCounter:
    """Tokens of a ``tokenizer.json`` (special tokens not added: the text's own tokens)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library's own error types vary by version
            raise InvalidInput(
                f"configuration: KEMEM_SESSION_TOKENIZER: cannot load {path}: "
                f"{' '.join(str(exc).split())[:200]}",
                field="KEMEM_SESSION_TOKENIZER",
            ) from None
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = str(path)
        self.by_lines = splits_lines(json.loads(self._tok.to_str()))
        # A window's turns and the overview's lines come back in every context of a session:
        # their counts are remembered (the whole texts, new each time, simply miss).
        self._cached = lru_cache(maxsize=COUNTS_KEPT)(self._encode)

    def _encode(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self._cached(text) if len(text) <= CACHED_MAX_CHARS else self._encode(text)

    def count_parts(self, parts: Sequence[str]) -> tuple[str, int, list[int]]:
        """A context's parts and their sum, counted exactly. Where no token spans a line
        break (``splits_lines``: the default BERT-style vocabulary), from the lines' counts,
        which recur from one context of a session to the next (tokenising a 2,000-token
        context again cost ~2.5 ms of a ``context()`` call). Otherwise in the whole text's one
        tokenisation: a token belongs to the part its first character is in (a BPE vocabulary
        that merges across a line break gives the token to one part, and counts the whole
        exactly)."""
        text, spans = _joined(parts)
        if not text:
            return text, 0, [0] * len(parts)
        if self.by_lines:
            counts = [sum(map(self.count, p.split("\n"))) if p else 0 for p in parts]
            return text, sum(counts), counts
        offsets = self._tok.encode(text, add_special_tokens=False).offsets
        starts = sorted(start for start, _ in offsets)
        counts = [
            0 if span is None else bisect_left(starts, span[1]) - bisect_left(starts, span[0])
            for span in spans
        ]
        return text, len(offsets), counts


@lru_cache(maxsize=8)
def _load(path: str) -> FileCounter:
    return FileCounter(Path(path))


def token_counter(tokenizer: Path | None, model_dir: Path | None) -> TokenCounter:
    """The configured counter: the given file, else the model's, else characters."""
    if tokenizer is not None:
        return _load(str(tokenizer))
    if model_dir is not None and (model_dir / "tokenizer.json").is_file():
        return _load(str(model_dir / "tokenizer.json"))
    return CharCounter()
