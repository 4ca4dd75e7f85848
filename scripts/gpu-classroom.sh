#!/usr/bin/env bash
# A class on one GPU (issue 28), on the GPU host (device tool, carry .whl):
#   bash scripts/gpu-classroom.sh [tests] [bench] [widgets]   (default: tests bench)
#   tests    tests/test_classroom_gpu.py + the lock/shared CPU tests, live, on this GPU
#   bench    scripts/bench_classroom.py (8 learner processes, SECONDS default 120) -> $OUT/classroom_<gpu>.csv
#   widgets  scripts/bench_widgets.py first visit with an empty cache (into $d), then `fill --quick --into $d`,
#            then first visit of a learner with an empty cache and LABKIT_SHARED_CACHE=$d -> $OUT/widget_latency.csv
# Step limits: STEP_TIMEOUT (default 300 s) or <STEP>_TIMEOUT. Logs go to $OUT.
set -uo pipefail
source scripts/gpu-lib.sh
step_tests() {
  live_pytest tests tests.log -rfEs tests/test_classroom_gpu.py tests/test_gpu_lock.py tests/test_shared_recording.py
}
step_bench() {
  cp "data/bench/classroom_$slug.csv" "$out/" 2>/dev/null
  timeout -k 10 "$(limit bench)" python3 scripts/bench_classroom.py --seconds "${SECONDS_CLASS:-120}" \
    --out "$out/classroom_$slug.csv" > "$out/bench.log" 2>&1; tail -n 40 "$out/bench.log" | tee -a "$log"
}
step_widgets() {
  d=$(mktemp -d); e=$(mktemp -d); cp data/bench/widget_latency.csv "$out/widget_latency.csv"
  LABKIT_MODE=live timeout -k 10 "$(limit widgets)" python3 scripts/bench_widgets.py --cache "$d" \
    --condition "first visit, empty cache" --out "$out/widget_latency.csv" > "$out/widgets.log" 2>&1
  tail -n 25 "$out/widgets.log" | tee -a "$log"
  t0=$(date +%s); timeout -k 10 300 python3 -m labkit fill --quick --into "$d" > "$out/fill.log" 2>&1
  tail -n 6 "$out/fill.log" | tee -a "$log"; echo "fill --quick --into (after the first visit): $(( $(date +%s) - t0 )) s" | tee -a "$log"
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" timeout -k 10 "$(limit widgets)" python3 scripts/bench_widgets.py --cache "$e" \
    --condition "first visit, shared class recording" --out "$out/widget_latency.csv" > "$out/widgets-shared.log" 2>&1
  tail -n 25 "$out/widgets-shared.log" | tee -a "$log"
}
run_steps "tests bench" "$@"
