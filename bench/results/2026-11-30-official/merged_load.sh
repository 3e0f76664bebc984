#!/usr/bin/env bash
# The classic load as deployed (the server reinforces what it recalls), each tree's round on a
# store force-merged first, so no round runs on what the one before it rewrote:
#   bash bench/results/2026-11-30-official/merged_load.sh BEFORE_DIR OUT_DIR
# (run from the repository root; KEMEM_* as for bench.load; the store bench-lead-lat-100000)
set -euo pipefail
before=$1 out=$2 url=http://127.0.0.1:${KEMEM_ENGINE_PORT:-9200}
merge() {
  curl -sf -m 1800 -XPOST "$url/bench-lead-lat-100000-*/_refresh" >/dev/null
  curl -sf -m 1800 -XPOST "$url/bench-lead-lat-100000-*-events-*,bench-lead-lat-100000-*-entities-*/_forcemerge?max_num_segments=1" >/dev/null
  curl -sf -XPOST "$url/bench-lead-lat-100000-*/_refresh" >/dev/null
  curl -s "$url/_cat/indices/bench-lead-lat-100000-*?h=index,docs.deleted,segments.count"
}
for round in 0 1; do
  for tree in before after; do
    dir=$([ "$tree" = before ] && echo "$before" || echo .)
    merge
    sleep 20
    python -m bench.load --reuse --keep --scale 100000 --prefix 'bench-lead-lat-{n}' --modes http \
      --workload classic --reinforce --clients 16 --duration 30 --tree "$tree=$dir" \
      --out "$out/merged-$tree-$round.json"
    curl -s "$url/_cat/indices/bench-lead-lat-100000-*official*?h=index,docs.deleted,segments.count"
  done
done
