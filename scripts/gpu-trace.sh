#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): issue 26, under the hood.
#   bash scripts/gpu-trace.sh [probe] [buildlog] [tests] [bench] [record] [notebook]   (default: tests)
#   probe     scripts/probe_cupti.py (what CUPTI shows; parts 3-7)
#   buildlog  the head of cuDNN's frontend and backend logs for the base convolution
#   tests     tests/test_trace_gpu.py tests/test_workspace_gpu.py
#   bench     scripts/bench_under_the_hood.py -> $OUT/under_the_hood_<gpu>.csv
#   record    python -m labkit record --only <lesson 10's experiments> into a copy of data/recordings/<gpu> -> $OUT/recording.tgz
#   notebook  notebooks/10_under_the_hood.ipynb live under nbmake
#   executed  lessons 10 and 09 (EXECUTE_NOTEBOOKS) run live by scripts/execute_notebooks.py, saved with their
#             outputs -> $OUT/executed/*.ipynb.gz; here: python scripts/screenshots.py --executed DIR
set -uo pipefail
source scripts/gpu-lib.sh
step_probe() {
  LABKIT_MODE=live timeout -k 10 "$(limit probe)" python3 scripts/probe_cupti.py --skip 2 --out "$out" > "$out/probe.log" 2>&1
  echo "rc $?" >> "$out/probe.log"; cut -c1-220 "$out/probe.log" | tail -n 90 | tee -a "$log"
}
step_buildlog() {
  LABKIT_MODE=live timeout -k 10 "$(limit buildlog)" python3 -c "
from labkit import experiments
from labkit.gpu import buildlog
got = buildlog.capture(experiments.BASE)
print('build', got['build'])
for src in ('frontend', 'backend'):
    lines = got[src]
    print(f'--- {src}: {len(lines)} lines'); print('\n'.join(l[:200] for l in lines[:60])); print('...'); print('\n'.join(l[:200] for l in lines[-25:]))
print('engines', buildlog.engines(got['frontend'])[:12])
" > "$out/buildlog.log" 2>&1; echo "rc $?" >> "$out/buildlog.log"; tail -n 120 "$out/buildlog.log" | cut -c1-200 | tee -a "$log"
}
step_tests() {
  live_pytest tests tests.log --durations=8 tests/test_trace_gpu.py tests/test_workspace_gpu.py
}
step_slow() {
  LABKIT_MODE=live timeout -k 10 "$(limit slow)" python3 scripts/probe_slow_changes.py report > "$out/slow.log" 2>&1
  grep -E "^report|layer steps|strategy|^ +[a-z_]+ \(|^ *(preallocated|fixed|malloc|keyed|scratch|cupy|async)" "$out/slow.log" | tee -a "$log"
}
step_fusion15() {
  LABKIT_BUILD_WORKERS=15 LABKIT_MODE=live timeout -k 10 "$(limit fusion15)" python3 scripts/probe_slow_changes.py fusion > "$out/fusion15.log" 2>&1
  grep -E "^fusion" "$out/fusion15.log" | tee -a "$log"
}
step_bench() {
  LABKIT_MODE=live timeout -k 10 "$(limit bench)" python3 scripts/bench_under_the_hood.py --out "$out/under_the_hood_$slug.csv" 2>&1 | tail -n 40 | tee -a "$log"
}
step_record() {
  mkdir -p "$out/recording"; cp -r "data/recordings/$slug/." "$out/recording/"
  LABKIT_MODE=live timeout -k 10 "$(limit record)" python3 -m labkit record --out "$out/recording" --force \
    --only kernels --only fusion_kernels --only strategy_timeline --only race_timeline --only build_log 2>&1 | tail -n 15 | tee -a "$log"
  tar -C "$out/recording" -czf "$out/recording.tgz" . && rm -rf "$out/recording"
}
step_notebook() {
  LABKIT_MODE=live timeout -k 10 "$(limit notebook)" python3 -m pytest -q -p no:cacheprovider --nbmake --nbmake-timeout=500 \
    notebooks/10_under_the_hood.ipynb 2>&1 | tail -n 25 | tee -a "$log"
}
step_executed() {
  LABKIT_MODE=live timeout -k 10 "$(limit executed)" python3 scripts/execute_notebooks.py --out "$out/executed" \
    ${EXECUTE_NOTEBOOKS:-notebooks/10_under_the_hood.ipynb notebooks/09_your_network.ipynb} 2>&1 | grep -v "^\[IPKernelApp\]" | tee -a "$log"
}
run_steps "tests" "$@"
