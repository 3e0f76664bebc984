"""Round 14: the dialogue's earlier turns as more "sentences" of the vector term, offline. The
best-sentence cosine becomes the best over the utterance's sentences and each earlier turn
(``all``) or each earlier user turn (``user``), every turn blended with the dialogue window at
weight ``tw`` as the utterance's sentences are. Fusion's R@5 per set and half; with a fourth
argument, round 13's anchor feedback runs on top (the package's ``search.anchor.feedback``).

    python -m bench.fusion_offline dump dialogue --prefix P --out sig.pkl
    python bench/results/2026-11-26-quality/round14/turn_parts.py sig.pkl zh P [fb]
"""

import pickle
import sys
from datetime import datetime

import numpy as np

import bench.dialogue_eval as de
from bench.common import make_kemem
from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import fusion, top
from kemem_es.contract.params import QueryParams
from kemem_es.search import anchor
from kemem_es.search.query_text import EMBED_MAX_TOKENS
from kemem_es.store import vector_code
from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD
from kemem_es.text.dialogue import context_turns, dialogue_window, split_label

dump, corpus, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
with open(dump, "rb") as f:
    data = pickle.load(f)
qs = {q["qid"]: q for q in de.load_queries(corpus=corpus)}
km = make_kemem(prefix)
s = km.searcher
emb = s.text.embedder


def blend(u, d, w):
    v = w * u + (1 - w) * d
    return v / np.linalg.norm(v)


extra = {}
for dd in data:
    q = qs[dd["qid"]]
    text, context = de.query_text(q)
    p = QueryParams(
        user_id=q["user_id"],
        agent_id=q["agent_id"],
        context=context,
        now=datetime.fromisoformat(q["now"]),
    )
    utt = split_label(text).text
    turns = context_turns(p.context, p.context_turns)
    if not turns:
        extra[dd["qid"]] = None
        continue
    window, _ = dialogue_window(utt, list(turns), EMBED_MAX_TOKENS, s.text.length)
    u, d = emb.embed([utt, window]).astype(float)
    roles = [t["role"] for t in q["turns"][:-1]][-len(turns) :]
    T = emb.embed([t.text for t in turns]).astype(float)
    extra[dd["qid"]] = (u, d, T, roles, p.utterance_weight)
print("embedded", flush=True)
SETS = {"all": None, "short": ("recall", "situational"), "long": ("long",), "check": ("check",)}


def score(dd, variant, tw):
    V = dd["V"].astype(np.float32)
    e = extra[dd["qid"]]
    scos = dd["scos"]
    if e is not None and variant != "now":
        _, d, T, roles, _ = e
        sel = [i for i, r in enumerate(roles) if variant == "all" or r == "user"]
        if variant == "user_last2":
            sel = sel[-2:]
        if sel:
            P = np.stack([blend(T[i], d, tw) for i in sel])
            scos = np.maximum(scos, (V @ P.T.astype(np.float32)).max(axis=1))
    dd2 = dict(dd)
    dd2["scos"] = scos
    return fusion(dd2)


P0 = QueryParams(agent_id="a", user_id="u")


def top_fb(d, sc):
    order = np.argsort(-sc, kind="stable")[: anchor.request_size(P0, "user")]
    rows = []
    for i in order:
        fields = {}
        if "official" not in d["ids"][i]:
            fields[TIME_FIELD] = [str(int((1e5 - d["age"][i]) * 86_400_000))]
        fields[VECTOR_CODE_FIELD] = [vector_code.encode(d["V"][i].astype(np.float32))]
        rows.append((d["ids"][i], {"fields": fields}, float(sc[i])))
    return [r[0] for r in anchor.feedback(P0, rows)[:10]]


if len(sys.argv) > 4:
    top = top_fb
for variant, tw in [
    ("now", 0),
    ("all", 0.5),
    ("user", 0.3),
    ("user", 0.5),
    ("user", 0.7),
    ("user", 1.0),
]:
    out = {}
    for name, styles in SETS.items():
        for half in ("", "a", "b"):
            ds = [
                x
                for x in data
                if (styles is None or x["style"] in styles) and half in ("", x["half"])
            ]
            if ds:
                m = mean_metrics([metrics(top(x, score(x, variant, tw)), x["gold"]) for x in ds])
                out[name + (f" {half}" if half else "")] = round(m["recall@5"], 4)
    print(variant, tw, out, flush=True)
