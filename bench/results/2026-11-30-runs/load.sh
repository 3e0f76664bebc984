#!/bin/bash
# Issue 42, 2026-11-30: the int8 model on one thread a run with a call's texts side by side
# (cec3700) and the entity search's 14 fields (df27193), against the tree before them (f02ef18,
# `git archive`d into /tmp/perf_before). Host: Intel family 6 model 167, AVX-512 VNNI, 2 cores.
set -u
cd /work/main
export PYTHONPATH=/work/main KEMEM_HOME=/work/agents/es/home KEMEM_ENGINE_PORT=9151 KEMEM_MODEL_DIR=/work/shared/models/m3e-small-onnx
R=bench/results/2026-11-30-runs
# the indexing slice, before and after interleaved, twice (engine warm from the second on)
for i in 1 2; do
  (cd /tmp/perf_before && PYTHONPATH=/tmp/perf_before python -m bench.latency --scale --throughput-docs 5000 --out /work/main/$R/throughput-before-$i.json)
  python -m bench.latency --scale --throughput-docs 5000 --out $R/throughput-after-$i.json
done
# the 100k store (main's bench.latency), its latency per stage and the chat scenario
python -m bench.latency --scale 100000 --keep --prefix 'bench-lead-lat-{n}' --no-throughput --out $R/latency-100k.json
store=(--reuse --keep --scale 100000 --prefix 'bench-lead-lat-{n}' --modes http --duration 20 --rounds 2)
uptime | tee $R/load.txt
python -m bench.load "${store[@]}" --tree before=/tmp/perf_before --tree after=/work/main --workload classic \
  --clients 1,2,4,8,16 --out $R/classic.json 2>&1 | grep -v "^  {" | tee $R/classic.txt
python -m bench.load "${store[@]}" --tree before=/tmp/perf_before --tree after=/work/main --workload chat \
  --clients 2,4,8,16 --out $R/chat.json 2>&1 | grep -v "^  {" | tee $R/chat.txt
uptime | tee -a $R/load.txt
# one client's session turns profiled (the node's stats around 40 turns), then the session mix
python -m bench.session_profile --prefix bench-lead-lat-100000 --turns 40 --out $R/session-profile.json
python -m bench.load "${store[@]}" --tree before=/tmp/perf_before --tree after=/work/main --workload session \
  --clients 2,4,8 --out $R/session.json 2>&1 | grep -v "^  {" | tee $R/session.txt
uptime | tee -a $R/load.txt
# the node's heap: the default 1g against 4g (what README names), the kept 100k store, twice each
for heap in 1g 4g 1g 4g; do
  kemem-es engine stop; KEMEM_ENGINE_HEAP=$heap kemem-es engine start; sleep 20
  python -m bench.latency --scale 100000 --reuse --prefix 'bench-lead-lat-{n}' --no-throughput --out $R/heap-$heap-N.json
done
