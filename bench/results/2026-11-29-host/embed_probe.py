"""One short query embedded at a time by a tree's own embedder (its defaults), 300 of
bench.scale's queries after 20 warm-up calls: wall p50 and CPU per query.

    PYTHONPATH=<tree> KEMEM_MODEL_DIR=<m3e-small-onnx> python embed_probe.py
"""

import time

import numpy as np

from bench import scale
from kemem_es.config import get_settings
from kemem_es.embed.onnx import load_embedder

queries = scale.queries(300, 7)
embedder = load_embedder(get_settings())
for q in queries[:20]:
    embedder.embed([q])
walls = []
cpu0 = time.process_time()
for q in queries:
    t = time.perf_counter()
    embedder.embed([q])
    walls.append(time.perf_counter() - t)
cpu = (time.process_time() - cpu0) / len(queries)
print(f"wall p50 {np.median(walls) * 1000:.2f} ms, CPU {cpu * 1000:.2f} ms per query")
