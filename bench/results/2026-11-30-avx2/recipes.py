"""Each dynamic int8 recipe's vectors against fp32's on this CPU, and what a run costs.

python bench/results/2026-11-30-avx2/recipes.py > recipes.txt
Derives the six recipes (per tensor / per channel; int8 or uint8 weights; reduce_range) from
m3e-small's fp32 file into a temporary directory and runs 150 MemDaily queries + 150 memories
through each, batch 1, one thread (as the package runs int8 files). CPU ms a text: median of
three passes, the files' order reversed on alternate passes.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[3]
MODEL = Path(os.environ.get("KEMEM_TEST_MODEL_DIR") or REPO.parent / "shared/models/m3e-small-onnx")
DATA = REPO.parent / "shared/data/dev/memdaily"
RECIPES = {
    "s8-tensor": dict(per_channel=False, weight_type=QuantType.QInt8),  # = the shipped file
    "u8-tensor": dict(per_channel=False, weight_type=QuantType.QUInt8),
    "s8-channel": dict(per_channel=True, weight_type=QuantType.QInt8),  # the v1 recipe
    "s8-channel-rr": dict(per_channel=True, reduce_range=True, weight_type=QuantType.QInt8),
    "u8-channel": dict(per_channel=True, weight_type=QuantType.QUInt8),
    "u8-channel-rr": dict(per_channel=True, reduce_range=True, weight_type=QuantType.QUInt8),
}


def texts(name: str, n: int = 150) -> list[str]:
    with gzip.open(DATA / name, "rt") as fh:
        return [json.loads(line)["text"] for line, _ in zip(fh, range(n), strict=False)]


def main() -> None:
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    tok.enable_truncation(512)
    feeds = []
    for t in texts("queries.jsonl.gz") + texts("corpus.jsonl.gz"):
        ids = np.array([tok.encode(t).ids], dtype=np.int64)
        feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    logging.getLogger().setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp())
    files = {"fp32": MODEL / "model.onnx", "shipped int8": MODEL / "model_int8.onnx"}
    for name, kw in RECIPES.items():
        quantize_dynamic(str(MODEL / "model.onnx"), str(tmp / f"{name}.onnx"), **kw)
        files[name] = tmp / f"{name}.onnx"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sessions = {n: ort.InferenceSession(str(p), opts) for n, p in files.items()}

    def run(s: ort.InferenceSession) -> np.ndarray:
        names = {i.name for i in s.get_inputs()}
        out = []
        for f in feeds:
            feed = {k: v for k, v in f.items() if k in names}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(f["input_ids"])
            v = s.run(None, feed)[0][0].mean(axis=0)
            out.append(v / np.linalg.norm(v))
        return np.array(out)

    times: dict[str, list[float]] = {n: [] for n in sessions}
    vecs: dict[str, np.ndarray] = {}
    order = list(sessions)
    for p in range(3):
        for n in order if p % 2 == 0 else order[::-1]:
            t0 = time.process_time()
            vecs[n] = run(sessions[n])
            times[n].append((time.process_time() - t0) / len(feeds) * 1000)
    ref = vecs["fp32"]
    ref_sim = ref[:150] @ ref[150:].T
    for n, x in vecs.items():
        cos = (x * ref).sum(axis=1)
        err = np.abs(x[:150] @ x[150:].T - ref_sim).mean()
        print(
            f"{n:14s} cosine to fp32 mean {cos.mean():.5f} min {cos.min():.5f}; "
            f"query-memory cosine error {err:.5f}; {np.median(times[n]):.2f} ms CPU a text "
            f"({' '.join(f'{t:.2f}' for t in times[n])})"
        )


if __name__ == "__main__":
    main()
