"""What the no-LLM session fallback keeps, on the hand-labelled lines of bench/session_fallback/
(``informative``: a user statement worth remembering).

    python -m bench.fallback_eval
"""

from __future__ import annotations

import json
from pathlib import Path

from kemem_es.session.fallback import kept_sentences

DATA = Path(__file__).resolve().parent / "session_fallback"


def main() -> int:
    print("| set | user turns | informative | kept & informative | kept but noise | missed |")
    print("|---|---|---|---|---|---|")
    for name in ("dev.jsonl", "dialogue_30.jsonl"):
        rows = [json.loads(x) for x in (DATA / name).read_text(encoding="utf-8").splitlines()]
        rows = [r for r in rows if r.get("role", "user") == "user"]
        kept = [bool(kept_sentences(r["content"])) for r in rows]
        info = [bool(r["informative"]) for r in rows]
        tp = sum(k and i for k, i in zip(kept, info, strict=True))
        fp = sum(k and not i for k, i in zip(kept, info, strict=True))
        fn = sum(i and not k for k, i in zip(kept, info, strict=True))
        print(f"| {name} | {len(rows)} | {sum(info)} | {tp} | {fp} | {fn} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
