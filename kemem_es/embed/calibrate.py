"""The vector scale of the configured model, measured, not assumed.

The fused score reads a cosine on the model's own scale: ``vec = (cos − floor) / (ceil −
floor)``. The constants in ``contract.params`` (0.593 / 0.773 for Chinese, 0.45 / 0.63 for a
latin-script query, 0.62 / 0.80 for entity evidence, 0.7 for anchor feedback) were tuned for
m3e-small on the dev sets. Another model's cosines sit elsewhere (all-MiniLM-L6-v2 scores
unrelated English text 0.08 and a paraphrase 0.56, m3e 0.74 and 0.81), so those constants
clipped every MiniLM vector score to 0.

Here each number is re-expressed relative to the model's own distribution, measured on a small
shipped corpus (``data/calibration.tsv``: 40 Chinese and 40 English chat lines with the memory
each means; every line against the other lines' memories gives the unrelated pairs): a
constant c becomes ``u + (c − u_ref) / (p_ref − u_ref) · (p − u)``, with u, p the medians of
the unrelated and paraphrase cosines (the reference model's u_ref, p_ref measured the same
way), so a score of 0.5 sits at the same place between "unrelated" and "the same meaning" for
any model, and m3e gets back the numbers it was tuned with. Another file of m3e itself (its u
and p within ``VARIANT_TOL``) is also placed by the memories' median (``variant_shift``).

A language the model separates poorly (AUC of paraphrase over unrelated below ``STRONG_AUC``:
m3e on English 0.89, MiniLM on Chinese 0.83) takes the keyword-leaning profile m3e's English
was tuned with (``latin_weights`` and that scale); a language it separates well (m3e Chinese,
MiniLM English: 0.998) takes the default weights and the Chinese scale's position. In a
poorly separated language the vector also stops nominating candidates of its own (``candidates``):
fusion ranks the memories a search word matches first, and the vector's other picks fill the
limit after them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

import numpy as np

from kemem_es.contract.params import QueryParams, Weights

CORPUS_VERSION = 1
STRONG_AUC = 0.95
ROUND = 4
# Medians this close to the reference's: another file of the reference model (variant_shift).
VARIANT_TOL = 0.01

# m3e-small (int8), measured on data/calibration.tsv v1 with ``measure``: medians of the
# unrelated and paraphrase cosines, and of the memories' cosines to each other.
REFERENCE_MODEL = "m3e-small-onnx (int8)"
REFERENCE: dict[str, dict[str, float]] = {
    "zh": {"unrelated": 0.6917, "paraphrase": 0.8602, "memories": 0.7452, "auc": 0.998},
    "en": {"unrelated": 0.7398, "paraphrase": 0.8135, "memories": 0.8074, "auc": 0.889},
}


class _Embeds(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class Profile:
    """How one language's queries read the vector: its weights and its cosine scale."""

    weights: dict[str, float]
    vec_floor: float
    vec_ceil: float


def corpus() -> dict[str, list[tuple[str, str]]]:
    """The shipped calibration pairs by language: (what a user says, the memory it means)."""
    text = (resources.files("kemem_es.embed") / "data" / "calibration.tsv").read_text("utf-8")
    out: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        lang, said, memory = line.split("\t")
        out.setdefault(lang, []).append((said, memory))
    return out


def _queries(embedder: _Embeds, texts: list[str]) -> np.ndarray:
    embed_queries = getattr(embedder, "embed_queries", None)
    return embed_queries(texts) if embed_queries is not None else embedder.embed(texts)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def measure(embedder: _Embeds) -> dict[str, dict[str, float]]:
    """Per language: the medians of the paraphrase, unrelated and memory-to-memory cosines,
    and the AUC of paraphrase over unrelated (how well the model tells them apart)."""
    stats: dict[str, dict[str, float]] = {}
    for lang, pairs in corpus().items():
        q = _unit(_queries(embedder, [p[0] for p in pairs]))
        m = _unit(embedder.embed([p[1] for p in pairs]))
        sims = q @ m.T
        off = ~np.eye(len(pairs), dtype=bool)
        para, unrel = np.diag(sims), sims[off]
        stats[lang] = {
            "unrelated": round(float(np.median(unrel)), ROUND),
            "paraphrase": round(float(np.median(para)), ROUND),
            "memories": round(float(np.median((m @ m.T)[off])), ROUND),
            "auc": round(float(np.mean(para[:, None] > unrel[None, :])), 3),
        }
    return stats


def _place(
    c: float, ref: dict[str, float], got: dict[str, float], base: str = "unrelated"
) -> float:
    """Constant ``c`` of the reference scale at the same place on the measured one."""
    ref_span = ref["paraphrase"] - ref["unrelated"]
    span = max(got["paraphrase"] - got["unrelated"], 1e-3)
    return round(got[base] + (c - ref[base]) / ref_span * span, ROUND)


def _clip(x: float) -> float:
    return min(max(x, -0.999), 0.999)


def variant_shift(stats: dict[str, dict[str, float]]) -> float:
    """How far the Chinese mid-range of a file of the reference model itself sits from the
    reference file's: 0 for any other model. A file whose unrelated and paraphrase medians are
    the reference's within ``VARIANT_TOL`` is the same model quantised otherwise (int8-channel,
    fp32), and those two medians cannot show what its quantisation changed: the shipped int8
    file's noise lifts related-but-different texts' cosines, which is where a dialogue's
    memories score (the memories' median 0.7452 against 0.7410 with int8-channel and 0.7393
    with fp32, where 0.7452 would sit on their scale). Unshifted, every such memory scored
    ~0.01 lower with the better file and fewer cleared ``score_threshold``
    (bench/results/2026-12-01-auto); shifted, 0.5 keeps the meaning it was set with."""
    got, ref = stats["zh"], REFERENCE["zh"]
    if (
        abs(got["unrelated"] - ref["unrelated"]) > VARIANT_TOL
        or abs(got["paraphrase"] - ref["paraphrase"]) > VARIANT_TOL
    ):
        return 0.0
    return round(got["memories"] - _place(ref["memories"], ref, got), ROUND)


def calibration(stats: dict[str, dict[str, float]], model: str, dim: int) -> dict[str, Any]:
    """The query defaults for a model with these ``measure`` stats (JSON-able; stored in the
    indices' mapping meta and applied by ``apply``)."""
    d = QueryParams.model_fields
    strong_ref, weak_ref = REFERENCE["zh"], REFERENCE["en"]
    default_w = Weights().model_dump()
    latin_w = d["latin_weights"].get_default(call_default_factory=True).model_dump()
    zh_floor, zh_ceil = d["vec_floor"].default, d["vec_ceil"].default
    en_floor, en_ceil = d["latin_vec_floor"].default, d["latin_vec_ceil"].default

    shift = variant_shift(stats)  # 0 but for another file of the reference model

    def profile(lang: str) -> Profile:
        got = stats[lang]
        if got["auc"] >= STRONG_AUC:
            w, ref, lo, hi = default_w, strong_ref, zh_floor, zh_ceil
        else:
            w, ref, lo, hi = latin_w, weak_ref, en_floor, en_ceil
        moved = shift if lang == "zh" else 0.0
        floor = _clip(round(_place(lo, ref, got) + moved, ROUND))
        ceil = _clip(round(_place(hi, ref, got) + moved, ROUND))
        if ceil <= floor:
            ceil = _clip(floor + 0.05)
        return Profile(dict(w), floor, ceil)

    zh, en = profile("zh"), profile("en")
    ent_floor = _clip(
        round(_place(d["entity_vec_floor"].default, strong_ref, stats["zh"]) + shift, ROUND)
    )
    ent_ceil = _clip(
        round(_place(d["entity_vec_ceil"].default, strong_ref, stats["zh"]) + shift, ROUND)
    )
    anchor = _clip(_place(d["anchor_floor"].default, strong_ref, stats["zh"], base="memories"))
    return {
        "model": model,
        "dims": dim,
        "corpus": CORPUS_VERSION,
        "stats": stats,
        "params": {
            "weights": zh.weights,
            "vec_floor": zh.vec_floor,
            "vec_ceil": zh.vec_ceil,
            "latin_weights": en.weights,
            "latin_vec_floor": en.vec_floor,
            "latin_vec_ceil": en.vec_ceil,
            "entity_vec_floor": ent_floor,
            "entity_vec_ceil": max(ent_ceil, _clip(ent_floor + 0.05)),
            "anchor_floor": anchor,
            **candidates(stats),
        },
    }


def candidates(stats: dict[str, dict[str, float]]) -> dict[str, bool]:
    """Whether a memory no search word matches may rank by its vector alone, per script: only
    where the model tells a paraphrase from unrelated text well (``STRONG_AUC``). Where it does
    not, its nearest neighbours are mostly noise (m3e on English: the meant memory is the
    nearest of the corpus's 40 in 60 % of its lines, against 97.5 % for Chinese), so they
    only fill the limit after the memories the words find (``QueryParams.vector_candidates``)."""
    return {
        "vector_candidates": stats["zh"]["auc"] >= STRONG_AUC,
        "latin_vector_candidates": stats["en"]["auc"] >= STRONG_AUC,
    }


_MEMO: dict[str, dict[str, Any]] = {}


def calibrate(embedder: _Embeds) -> dict[str, Any]:
    """``calibration`` for this embedder, measured once per process and model name. The
    reference model gets the constants it was tuned with (``reference``): measured again, its
    int8 cosines move with the CPU's integer kernels (AVX-512 VNNI against AVX2: up to 0.007
    in a median), which would move every score by noise — enough to drop the README's 「胃疼」
    below 0.5 on one host and not on another."""
    key = f"{embedder.name}|{embedder.dim}"
    if key not in _MEMO:
        if embedder.name == REFERENCE_MODEL and embedder.dim == 512:
            _MEMO[key] = reference()
        else:
            _MEMO[key] = calibration(measure(embedder), embedder.name, embedder.dim)
    return _MEMO[key]


def for_embedder(embedder: Any) -> dict[str, Any] | None:
    """``calibrate`` for the package's embedders (ONNX, remote: they have ``embed_queries``);
    None for a caller's own object without it, which keeps the reference constants unless
    the caller sets the scale (a test's fake vectors have no meaningful distribution)."""
    if getattr(embedder, "embed_queries", None) is None:
        return None
    return calibrate(embedder)


def reference() -> dict[str, Any]:
    """The reference model's calibration: the constants as ``contract.params`` has them."""
    return calibration(REFERENCE, REFERENCE_MODEL, 512)


def stored_params(cal: dict[str, Any]) -> dict[str, Any]:
    """A stored calibration's query defaults. One stored before a default existed gets it
    from its own measured stats (the rule that ``calibration`` applies now), so an index
    calibrated by an older kemem-es keeps working without being measured again."""
    params = dict(cal.get("params", {}))
    stats = cal.get("stats")
    if isinstance(stats, dict) and all(
        isinstance(stats.get(lang), dict) and isinstance(stats[lang].get("auc"), int | float)
        for lang in ("zh", "en")
    ):
        for key, value in candidates(stats).items():
            params.setdefault(key, value)
    return params


def apply(params: QueryParams, cal: dict[str, Any] | None) -> QueryParams:
    """``params`` with the calibration's defaults for every knob the caller did not set; the
    caller's own choices (``model_fields_set``) stay theirs, and stay marked as chosen only
    when the caller chose them (the latin profile looks at that)."""
    if not cal:
        return params
    chosen = set(params.model_fields_set)
    update: dict[str, Any] = {}
    for key, value in stored_params(cal).items():
        if key in chosen or key not in QueryParams.model_fields:
            continue
        if key in ("weights", "latin_weights"):
            value = Weights(**value)
        elif isinstance(value, bool):
            pass
        elif not isinstance(value, int | float) or not math.isfinite(value):
            continue
        if getattr(params, key) != value:
            update[key] = value
    if not update:
        return params
    out = params.model_copy(update=update)
    object.__setattr__(out, "__pydantic_fields_set__", chosen)
    return out
