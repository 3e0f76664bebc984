#!/bin/bash
# the check corpus (Chinese check + English check_session): every mode with words first, then fusion as before
R=bench/results/2026-11-29-en
log() { echo "$(date -u +%T) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> $R/runs.log; }
log "start words-check"
python -m bench.dialogue_eval --corpus check --workers 2 --prefix bench-en-check --keep --out $R/words-check.json > $R/words-check.log 2>&1
log "end words-check; start before-check"
python -m bench.dialogue_eval --corpus check --workers 2 --prefix bench-en-check --reuse --modes fusion \
  --set '{"latin_vector_candidates": true}' --out $R/before-check.json > $R/before-check.log 2>&1
log "end before-check"
