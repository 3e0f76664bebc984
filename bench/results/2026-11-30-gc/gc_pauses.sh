#!/usr/bin/env bash
# The server's garbage collections under the classic load (4 clients, 30 s), per commit, one
# server at a time:
#   bash bench/results/2026-11-30-gc/gc_pauses.sh OUT_DIR LABEL=COMMIT ...
# (run from the repository root; KEMEM_* as for bench.load; the store bench-lead-lat-100000).
# Each commit is unpacked into a temporary tree with gc_spy.py as its sitecustomize.py, and
# bench.load serves from it (--tree): the server logs each collection into OUT_DIR/LABEL.
set -euo pipefail
out=$(realpath "$1"); shift
here=$(dirname "$(realpath "$0")")
for spec in "$@"; do
  label=${spec%%=*} commit=${spec#*=}
  tree=$(mktemp -d)
  git archive "$commit" | tar -x -C "$tree"
  cp "$here/gc_spy.py" "$tree/sitecustomize.py"
  mkdir -p "$out/$label" && rm -f "$out/$label"/gc-*.txt
  GC_SPY_DIR="$out/$label" python -m bench.load --reuse --keep --scale 100000 \
    --prefix 'bench-lead-lat-{n}' --modes http --workload classic --clients 4 --duration 30 \
    --tree "$label=$tree" --out "$out/$label/load.json" >/dev/null
  python - "$out/$label" <<'PY'
import glob, json, sys
d = sys.argv[1]
by = {}
for f in glob.glob(f"{d}/gc-*.txt"):
    for line in open(f):
        _, g, ms, _n = line.split()
        by.setdefault(int(g), []).append(float(ms))
(key, row), = json.load(open(f"{d}/load.json"))["trees"]["summary"].items()
gcs = {f"gen{g}": {"n": len(v), "sum_ms": round(sum(v), 1), "max_ms": round(max(v), 1)}
       for g, v in sorted(by.items())}
print(json.dumps({"tree": key, "req_s": row["rps_median"], "p50_ms": row["p50_ms_median"],
                  "p99_ms": row["p99_ms_median"], "server_cpu_ms": row["server_cpu_ms_per_req_median"],
                  "collections": gcs}))
PY
  rm -rf "$tree"
done
