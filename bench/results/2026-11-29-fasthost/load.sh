#!/bin/bash
# Issue 42 on a host with AVX-512 VNNI (kernel fc-v669, the kernel of 2026-11-26), every command
# of report.md in its order. The tree the issue measured (af7c6ce) is `git archive`d into
# /tmp/perf_af7, the tree before this session's change (bdb7cff) into /tmp/perf_before.
set -u
cd /work/main
export PYTHONPATH=/work/main KEMEM_HOME=/work/agents/es/home KEMEM_ENGINE_PORT=9151 KEMEM_MODEL_DIR=/work/shared/models/m3e-small-onnx
R=bench/results/2026-11-29-fasthost
store=(--reuse --keep --scale 100000 --prefix 'bench-lead-lat-{n}' --modes http --duration 20 --rounds 2)
# the store, latency per stage, the chat scenario; then the indexing slice twice, engine warm
python -m bench.latency --scale 100000 --keep --prefix 'bench-lead-lat-{n}' --out $R/latency-100k.json
for i in 1 2; do python -m bench.latency --throughput-docs 5000 --out $R/throughput-$i.json; done
uptime | tee $R/load.txt
# §1: the tree against main, classic mix
python -m bench.load "${store[@]}" --tree af7=/tmp/perf_af7 --tree main=/work/main --workload classic \
  --clients 1,2,4,8,16 --out $R/classic.json 2>&1 | grep -v "^  {" | tee $R/classic.txt
# one server worker against two
python -m bench.load "${store[@]}" --tree w1=/work/main:1 --tree w2=/work/main:2 --workload classic \
  --clients 4,8,16 --out $R/workers.json 2>&1 | grep -v "^  {" | tee $R/workers.txt
# §2: main alone under the chat app's mixes
for w in chat session; do
  python -m bench.load "${store[@]}" --tree main=/work/main --workload $w --clients 2,4,8,16 \
    --out $R/$w.json 2>&1 | grep -v "^  {" | tee $R/$w.txt
done
uptime | tee -a $R/load.txt
# §3: before (bdb7cff) against the change, session mix
python -m bench.load "${store[@]}" --tree before=/tmp/perf_before --tree after=/work/main --workload session \
  --clients 2,4,8 --out $R/session-ab.json 2>&1 | grep -v "^  {" | tee $R/session-ab.txt
# §1, the engine's profile: JFR under 8 clients of the classic mix (a 60 s load; the recording
# starts 25 s in, for 25 s), then jfr print and jfr_categories.py (the commands of jfr-engine.txt)
