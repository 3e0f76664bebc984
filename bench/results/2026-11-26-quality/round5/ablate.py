"""Round 5 ablations: the final code minus one change, then bench.dialogue_eval, e.g.
``python ablate.py no-latin-profile --corpus en --keywords written --prefix P --reuse``.
Patches are applied before the package's first query, so the run uses them throughout."""

import sys

from bench.dialogue_eval import main


def patch(which: str) -> None:
    if which == "no-lowercase":  # the embedder keeps capitals (they become [UNK])
        import kemem_es.embed.onnx as onnx

        onnx._lowercase_if_uncased = lambda tok: False
    elif which == "no-english-idf":  # jieba's IDF only
        import kemem_es.text.english_idf as e

        e.english_idf.cache_clear()
        e.ENGLISH_IDF_PATH = e.ENGLISH_IDF_PATH.with_name("missing.txt.gz")
    elif which == "no-latin-profile":  # English queries use the default weights and scale
        import kemem_es.search.searcher as s

        s.script_params = lambda params, texts: (params, "default")
    elif which == "no-token-window":  # the dialogue window counted in characters
        import kemem_es.search.query_text as q

        q.QueryText.length = lambda self, text: len(text)
    else:
        raise SystemExit(f"unknown ablation {which!r}")


if __name__ == "__main__":
    patch(sys.argv[1])
    raise SystemExit(main(sys.argv[2:]))
