#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): issue 27's parallel plan builds.
#   bash scripts/gpu-builds.sh [tests] [panels] [engine] [bench] [report] [fusion] [memory] [widgets]   (default: tests bench)
#   tests      tests/test_builds_gpu.py (worker-built plans = one-process plans, correct; faults; compile budgets)
#   panels     live panels handed back at their first paint: tests/test_localcache_gpu.py, test_prefetch_gpu.py,
#              test_panel_parts.py, test_experiments_gpu.py, then scripts/probe_panel_build.py (a fresh kernel)
#   engine     tests/test_engine_gpu.py tests/test_saved_plans_gpu.py tests/test_experiments_gpu.py
#   bench      scripts/bench_builds.py --workers 0,8 -> $OUT/builds_<gpu>.csv
#   report     tests/test_report_gpu.py tests/test_isolated.py (the report's worker now has build workers)
#   fusion     scripts/probe_slow_changes.py fusion (where a fusion change's time goes)
#   memory     GPU memory of a process and its build workers (nvidia-smi)
#   widgets    scripts/bench_widgets.py, first visit, empty cache, every panel (PANELS=...: some) -> $OUT/widget_latency.csv
# Step limits: STEP_TIMEOUT (default 300 s) or <STEP>_TIMEOUT. Logs go to $OUT.
set -uo pipefail
source scripts/gpu-lib.sh
step_tests() {
  live_pytest tests tests.log tests/test_builds_gpu.py
}
step_panels() {
  live_pytest panels panels.log tests/test_localcache_gpu.py tests/test_prefetch_gpu.py tests/test_panel_parts.py \
    tests/test_experiments_gpu.py
  d=$(mktemp -d); LABKIT_MODE=live LABKIT_CACHE=$d timeout -k 10 120 python3 scripts/probe_panel_build.py \
    algorithms workspace_sizes fusion > "$out/probe_panel_build.log" 2>&1; grep -E "==|warm" "$out/probe_panel_build.log" | tee -a "$log"
}
step_engine() {
  LABKIT_MODE=live timeout -k 10 "$(limit engine)" python3 -m pytest -q -rfE --tb=short -p no:cacheprovider --durations=5 \
    tests/test_engine_gpu.py tests/test_saved_plans_gpu.py tests/test_experiments_gpu.py 2>&1 | tail -n 30 | tee -a "$log"
}
step_bench() {
  timeout -k 10 "$(limit bench)" python3 scripts/bench_builds.py --workers 0,8 --out "$out/builds_$slug.csv" 2>&1 | tail -n 30 | tee -a "$log"
}
step_report() {
  live_pytest report report.log tests/test_report_gpu.py tests/test_isolated.py
}
step_fusion() {
  LABKIT_MODE=live timeout -k 10 "$(limit fusion)" python3 scripts/probe_slow_changes.py fusion > "$out/fusion.log" 2>&1
  grep -E "^fusion|autotune|^ +bias_relu|PoolStats" "$out/fusion.log" | tee -a "$log"
}
step_memory() {  # GPU memory of this process and its build workers, once they are up
  LABKIT_MODE=live timeout -k 10 "$(limit memory)" python3 -c "
import subprocess, time
from labkit.gpu import build_pool
p = build_pool.start_workers(); t0 = time.time()
while len(p.pids()) < p.size and time.time() - t0 < 60: time.sleep(0.1)
time.sleep(2)
print(subprocess.run(['nvidia-smi', '--query-compute-apps=pid,used_memory', '--format=csv,noheader'], capture_output=True, text=True).stdout)
" 2>&1 | tail -n 20 | tee -a "$log"
}
step_widgets() {
  d=$(mktemp -d); cp data/bench/widget_latency.csv "$out/widget_latency.csv"
  LABKIT_MODE=live timeout -k 10 "$(limit widgets)" python3 scripts/bench_widgets.py --cache "$d" \
    --condition "first visit, empty cache" --out "$out/widget_latency.csv" ${PANELS:+--panels $PANELS} 2>&1 | tee "$out/widgets.log" | tail -n 40 | tee -a "$log"
}
run_steps "tests bench" "$@"
