#!/bin/bash
# all-MiniLM-L6-v2: the English dev set (every mode), then the Chinese dev set (every mode with
# words first, which the calibration gives MiniLM's Chinese, and fusion as before)
R=bench/results/2026-11-29-en
export KEMEM_MODEL_DIR=/work/shared/models/all-minilm-l6-v2-onnx
log() { echo "$(date -u +%T) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/runs.log; }
while pgrep -f run-check.sh > /dev/null; do sleep 10; done
log "start minilm-en"
python -m bench.dialogue_eval --corpus en --workers 2 --prefix bench-en-minilm-en --keep --out $R/minilm-en.json > $R/minilm-en.log 2>&1
log "end minilm-en; start minilm-zh"
python -m bench.dialogue_eval --corpus zh --workers 2 --prefix bench-en-minilm-zh --keep --out $R/minilm-zh.json > $R/minilm-zh.log 2>&1
log "end minilm-zh; start minilm-zh-before"
python -m bench.dialogue_eval --corpus zh --workers 2 --prefix bench-en-minilm-zh --reuse --modes fusion \
  --set '{"vector_candidates": true}' --out $R/minilm-zh-before.json > $R/minilm-zh-before.log 2>&1
log "end minilm-zh-before"
