#!/bin/bash
# Issue 42 on today's host: the tree the issue measured (af7c6ce), main, and main with uvicorn's
# httptools + uvloop (pip --target into the tree copy), interleaved on the kept 100k store.
set -u
cd /work/main
export PYTHONPATH=/work/main KEMEM_HOME=/work/agents/es/home KEMEM_ENGINE_PORT=9151 KEMEM_MODEL_DIR=/work/shared/models/m3e-small-onnx
R=bench/results/2026-11-29-host
common=(--reuse --keep --scale 100000 --prefix 'bench-lead-lat-{n}' --modes http --duration 20 --rounds 2 --tree af7=/tmp/perf_af7 --tree main=/work/main --tree std=/tmp/perf_std)
uptime | tee $R/load.txt
python -m bench.load "${common[@]}" --workload classic --clients 1,2,4,8 --out $R/classic.json 2>&1 | grep -v "^  {" | tee $R/classic.txt
uptime | tee -a $R/load.txt
