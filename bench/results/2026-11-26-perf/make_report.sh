#!/bin/bash
# How report.md was assembled (inputs: the result files of bench/work/final.sh and the runs
# named in notes.md, written by bench.latency / ann_recall / profile_query / cold_start).
W=bench/work
python -m bench.perf_report --out bench/results/2026-11-26-perf --notes bench/results/2026-11-26-perf/notes.md \
 --latency "1M · 3.5 float merged (final, 6e6f46f)=$W/final-lat-1m-35-float.json" \
   "1M · 3.5 float merged + 200 writes/s (final)=$W/final-lat-1m-35-live.json" \
   "1M · A/B before ANN-filter fix, r1 (c9b1b1b)=$W/ab-annfilter-wt-prev-1.json" \
   "1M · A/B after ANN-filter fix, r1 (c3270a5)=$W/ab-annfilter-wt-perf-1.json" \
   "1M · A/B before, r2=$W/ab-annfilter-wt-prev-2.json" \
   "1M · A/B after, r2=$W/ab-annfilter-wt-perf-2.json" \
   "1M · 3.5 float merged, first run after the merge (ea0ec72)=$W/lat-1m-35-float-merged.json" \
   "1M · 3.5 float, official db as loaded (35 segments) (ea0ec72)=$W/lat-1m-35-loaded.json" \
   "1M · post-merge A/B: pre-merge 0850cd5, r1=$W/ab-merge-wt-premerge-1.json" \
   "1M · post-merge A/B: merged 7b47912, r1=$W/ab-merge-wt-perf-1.json" \
   "1M · post-merge A/B: pre-merge, r2=$W/ab-merge-wt-premerge-2.json" \
   "1M · post-merge A/B: merged, r2=$W/ab-merge-wt-perf-2.json" \
   "100k · 2.19 float merged (final)=$W/final-lat-100k-219-float.json" \
   "100k · 3.5 float merged (final)=$W/final-lat-100k-35-float.json" \
   "100k · 3.5 int8 merged (final)=$W/final-lat-100k-35-int8.json" \
   "100k · 3.5 float merged + 200 writes/s (final)=$W/final-lat-100k-35-live.json" \
 --throughput "3.5 · main 82061ca, r1=$W/tp-final35-main-1.json" "3.5 · perf 6e6f46f, r1=$W/tp-final35-wt-perf-1.json" \
   "3.5 · main, r2=$W/tp-final35-main-2.json" "3.5 · perf, r2=$W/tp-final35-wt-perf-2.json" \
   "2.19 · perf=$W/final-tp-219-perf.json" \
   "3.5 · main via perf's harness, r1 (load 2.5)=$W/tp2-35-main-1.json" "3.5 · perf via perf's harness, r1 (load 2.7)=$W/tp2-35-wt-perf-1.json" \
   "3.5 · main via perf's harness, r2 (load 3.8)=$W/tp2-35-main-2.json" "3.5 · perf via perf's harness, r2 (load 4.6)=$W/tp2-35-wt-perf-2.json" \
   "3.5 · main via perf's harness, r3 (load 5.5)=$W/tp2-35-main-3.json" "3.5 · perf via perf's harness, r3 (load 5.7)=$W/tp2-35-wt-perf-3.json" \
   "3.5 · main via perf's harness, quiet q1 (load 1.6)=$W/tp2-35-main-q1.json" "3.5 · perf via perf's harness, quiet q1 (load 2.2)=$W/tp2-35-wt-perf-q1.json" \
   "3.5 · main via perf's harness, quiet q2 (load 1.9)=$W/tp2-35-main-q2.json" "3.5 · perf via perf's harness, quiet q2 (load 2.6)=$W/tp2-35-wt-perf-q2.json" \
 --recall $W/recall-100k.json $W/recall-1m.json \
 --profile $W/final-prof-1m-per_user.json $W/final-prof-1m-large_approx.json --cold $W/final-cold.json
