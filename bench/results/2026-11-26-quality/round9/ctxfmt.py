"""Fusion R@5 on the Chinese dev sets when a caller formats ``context`` another way: speaker
lines (the harness's), a list of chat messages, lines without labels, ``user:``/``assistant:``
labels, or every turn on one line (with or without labels). Needs the round-6 store.

    KEMEM_ES_URL=http://127.0.0.1:9261 python bench/results/2026-11-26-quality/round9/ctxfmt.py \
        FORMAT [MODE ...]
"""

from __future__ import annotations

import sys
from typing import Any

import bench.dialogue_eval as de

FORMAT = sys.argv[1]


def role(t: dict) -> str:
    return "user" if t["role"] == "user" else "assistant"


def query_text(q: dict) -> tuple[str, Any]:
    *prev, last = q["turns"]
    context: Any = {
        "labels": "\n".join(f"{t['speaker']}：{t['text']}" for t in prev),
        "plain": "\n".join(t["text"] for t in prev),
        "roles": "\n".join(f"{role(t)}: {t['text']}" for t in prev),
        "oneline": " ".join(f"{t['speaker']}：{t['text']}" for t in prev),
        "oneline_plain": " ".join(t["text"] for t in prev),
        "list": [{"role": role(t), "content": t["text"]} for t in prev],
    }[FORMAT]
    return last["text"], context


def main() -> None:
    de.query_text = query_text
    modes = sys.argv[2:] or ["fusion"]
    res = de.run(de.parser().parse_args(["--reuse", "--prefix", "bench-q6-zh", "--modes", *modes]))
    halves = de.halves(res)
    for mode, r in res["modes"].items():
        sets = r["by_set"]
        print(
            f"{FORMAT:14s} {mode:8s} long R@5 {sets['long']['recall@5']:.3f}  "
            f"short R@5 {sets['short']['recall@5']:.3f}  halves {halves[mode]}"
        )


if __name__ == "__main__":
    main()
