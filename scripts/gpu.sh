#!/usr/bin/env bash
# usage: bash scripts/gpu.sh STEP [STEP...]        (no STEP: tests)
#
# The checks a maintainer runs on a GPU host, step by step:
#
#   doctor      the machine, the mode, the recordings
#   tests       every gpu-marked test, live (GPU_TESTS: other test files or pytest arguments)
#   notebooks   every lesson, live, under nbmake
#   fill        `python -m labkit fill --quick` into an empty cache, then again (it resumes: nothing left)
#   record      `python -m labkit record` into data/recordings/<folder> (RECORD_ARGS, e.g. "--only plans
#               --force"; <folder>: LABKIT_RECORDING_DIR, else h100-sxm on an H100 SXM, else the GPU's slug)
#               -> $OUT/recording.tgz
#   bench       `python -m labkit bench strategies` and `bench vs-torch`, scripts/kernels_per_call.py
#   report      scripts/bench_report.py, then scripts/bench_report_models.py (REPORT_ARGS, e.g. --unnamed)
#   builds      scripts/bench_builds.py --workers 0,8
#   trace       scripts/bench_under_the_hood.py (lesson 10's traces against untraced timings)
#   widgets     scripts/bench_widgets.py: a first visit with an empty cache and empty CuPy and CUDA JIT kernel
#               caches, then after `python -m labkit warm-kernels` (what `make setup` runs)
#   classroom   the class's GPU tests, scripts/bench_classroom.py (CLASS_SECONDS, default 120), then a
#               learner's first visit (bench_widgets.py) from a shared class recording `fill --quick` filled
#   classroom2  on a host with two GPUs or more: 8 learners spread over the first two by the class hub's
#               spread (labkit.gpu.host.spread), 4 per GPU -> data/bench/classroom_<gpu>_x2.csv, one row per GPU
#   firstvisit  a learner's first panels in real kernels (bench_kernel_panels.py) and lessons 01, 02 and 09
#               as "Run all" (execute_notebooks.py), from a quick-filled shared recording
#               -> data/bench/first_visit_<gpu>.csv
#   executed    lessons 10 and 09 (EXECUTE_NOTEBOOKS) run live and saved with their outputs -> $OUT/executed;
#               then, on any machine: python scripts/screenshots.py --executed DIR
#
# Each step runs under STEP_TIMEOUT seconds (default 600) or <STEP>_TIMEOUT; its log goes to $OUT
# (default /tmp/labkit-gpu), its lines that matter to the screen and $OUT/gpu.log. The benchmarks'
# CSVs are written under data/bench and copied to $OUT/bench. Python: .venv/bin/python when there is
# one (`make setup`), else python3; an offline wheel kit in .whl/ is installed first when present.
set -uo pipefail
case "${1:-}" in -h | --help | help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/labkit-gpu}"
log="$out/gpu.log"
py=python3
[ -x .venv/bin/python ] && [ ! -f .whl/setup.sh ] && py=.venv/bin/python

limit() { local v="${1^^}_TIMEOUT"; echo "${!v:-${STEP_TIMEOUT:-600}}"; }
# live STEP LOGFILE COMMAND...: COMMAND in live mode under STEP's limit, its output in $out/LOGFILE
live() {
  local step="$1" file="$out/$2"
  shift 2
  LABKIT_MODE=live timeout -k 10 "$(limit "$step")" "$@" > "$file" 2>&1
  echo "rc $?" >> "$file"
}
# pytest_live STEP LOGFILE ARGS...: pytest, live; failures, skips and the summary line to the screen
pytest_live() {
  local step="$1" file="$2"
  shift 2
  live "$step" "$file" $py -m pytest -q -rfEs --tb=short -p no:cacheprovider --durations=5 "$@"
  grep -E "^E |passed|failed|error|SKIPPED|^[0-9.]+s call" "$out/$file" | tail -n 40 | tee -a "$log"
}
# fill_class DIR: `python -m labkit fill --quick --into DIR` (a class's shared recording)
fill_class() {
  live fill "fill-class.log" $py -m labkit fill --quick --into "$1"
  tail -n 3 "$out/fill-class.log" | tr '\r' '\n' | grep -v '^$' | tail -n 3 | tee -a "$log"
}

step_doctor() { $py -m labkit doctor | tee -a "$log"; }
step_tests() {
  # shellcheck disable=SC2086
  pytest_live tests tests.log -m gpu ${GPU_TESTS:-tests/}
}
step_notebooks() { pytest_live notebooks notebooks.log --nbmake --nbmake-timeout=500 notebooks/; }
step_fill() {
  local cache
  cache=$(mktemp -d)
  for run in first again; do
    live fill "fill-$run.log" env LABKIT_CACHE="$cache" $py -m labkit fill --quick
    tail -n 3 "$out/fill-$run.log" | tee -a "$log"
  done
}
step_record() {
  local folder="${LABKIT_RECORDING_DIR:-$slug}"
  [ "$slug" = h100-80gb-hbm3 ] && folder="${LABKIT_RECORDING_DIR:-h100-sxm}"
  # shellcheck disable=SC2086
  LABKIT_MODE=live timeout -s INT -k 30 "$(limit record)" $py -m labkit record --out "data/recordings/$folder" \
    ${RECORD_ARGS:-} > "$out/record.log" 2>&1
  tail -n 4 "$out/record.log" | tee -a "$log"
  tar -czf "$out/recording.tgz" -C data/recordings "$folder"
}
step_bench() {
  live bench bench-strategies.log $py -m labkit bench strategies
  live bench bench-vs-torch.log $py -m labkit bench vs-torch
  live bench kernels-per-call.log $py scripts/kernels_per_call.py
  tail -n 4 "$out"/bench-*.log "$out/kernels-per-call.log" | tee -a "$log"
}
step_report() {
  local cache
  cache=$(mktemp -d)
  live report bench-report.log $py scripts/bench_report.py --cache "$cache/report"
  # shellcheck disable=SC2086
  live report bench-report-models.log $py scripts/bench_report_models.py --cache "$cache/models" ${REPORT_ARGS:-}
  tail -n 12 "$out/bench-report.log" "$out/bench-report-models.log" | tee -a "$log"
}
step_builds() {
  live builds bench-builds.log $py scripts/bench_builds.py --workers 0,8 --out "data/bench/builds_$slug.csv"
  tail -n 20 "$out/bench-builds.log" | tee -a "$log"
}
step_trace() {
  live trace bench-trace.log $py scripts/bench_under_the_hood.py --out "data/bench/under_the_hood_$slug.csv"
  tail -n 30 "$out/bench-trace.log" | tee -a "$log"
}
step_widgets() {
  local kernels jit
  kernels=$(mktemp -d)
  jit=$(mktemp -d)  # CUDA's JIT cache (cuDNN's compiled kernels): empty, whatever ran on this host before
  # what `make setup` leaves: pip byte-compiles what it installs, the Makefile compiles labkit
  [ -f .whl/setup.sh ] && $py -m compileall -q .whl/site labkit > /dev/null
  live widgets widgets-empty.log env CUPY_CACHE_DIR="$kernels" CUDA_CACHE_PATH="$jit" $py scripts/bench_widgets.py \
    --cache "$(mktemp -d)" --condition "first visit, empty cache"
  rm -rf "$jit" && mkdir -p "$jit"
  CUPY_CACHE_DIR="$kernels" CUDA_CACHE_PATH="$jit" $py -m labkit warm-kernels | tee -a "$log"
  live widgets widgets-setup.log env CUPY_CACHE_DIR="$kernels" CUDA_CACHE_PATH="$jit" $py scripts/bench_widgets.py \
    --cache "$(mktemp -d)" --condition "first visit, empty cache, kernels compiled at setup"
  tail -n 25 "$out/widgets-empty.log" "$out/widgets-setup.log" | tee -a "$log"
}
step_classroom() {
  local class
  class=$(mktemp -d)
  pytest_live classroom classroom-tests.log tests/test_classroom_gpu.py tests/test_gpu_lock.py \
    tests/test_shared_recording.py
  live classroom bench-classroom.log $py scripts/bench_classroom.py --seconds "${CLASS_SECONDS:-120}" \
    --out "data/bench/classroom_$slug.csv"
  tail -n 30 "$out/bench-classroom.log" | tee -a "$log"
  fill_class "$class"
  live classroom widgets-shared.log env LABKIT_SHARED_CACHE="$class" CUPY_CACHE_DIR="$(mktemp -d)" \
    $py scripts/bench_widgets.py --cache "$(mktemp -d)" --condition "first visit, shared class recording"
  tail -n 25 "$out/widgets-shared.log" | tee -a "$log"
}
step_classroom2() {
  pytest_live classroom2 classroom2-tests.log tests/test_spread_gpu.py
  live classroom2 bench-classroom2.log $py scripts/bench_classroom.py --gpus 2 --seconds "${CLASS_SECONDS:-120}" \
    --out "data/bench/classroom_${slug}_x2.csv"
  tail -n 30 "$out/bench-classroom2.log" | tee -a "$log"
}
step_firstvisit() {
  local class panels="AlgorithmsPanel SweepPanel StrategiesPanel ReportPanel" how
  class=$(mktemp -d)
  fill_class "$class"
  : > "$out/firstvisit.log"
  for how in "live 3" "live 3 LABKIT_PREFETCH=0" "recorded 3" "live 0"; do
    # shellcheck disable=SC2086
    set -- $how
    echo "-- real kernel, $how (mode, seconds idle before the panels), CPU per thread:" >> "$out/firstvisit.log"
    # shellcheck disable=SC2086
    env LABKIT_MODE="$1" "${3:-LABKIT_PREFETCH=1}" LABKIT_SHARED_CACHE="$class" LABKIT_CACHE="$(mktemp -d)" \
      timeout -k 10 "$(limit firstvisit)" $py scripts/bench_kernel_panels.py run --cpu --idle "$2" \
      --panel $panels 2>&1 | grep -v "^\[IPKernelApp\]" >> "$out/firstvisit.log"
  done
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$class" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit firstvisit)" \
    $py scripts/execute_notebooks.py --out "$out/class-executed" notebooks/01_what_is_a_workspace.ipynb \
    notebooks/02_workspace_strategies.ipynb notebooks/09_your_network.ipynb 2>&1 | grep -v "^\[IPKernelApp\]" \
    >> "$out/firstvisit.log"
  $py scripts/bench_kernel_panels.py csv --gpu "$($py -c 'from labkit import env; print(env.environment().gpu_name)')" \
    --date "$(date +%F)" --commit "$LABKIT_GIT_COMMIT" "$out/firstvisit.log" > "data/bench/first_visit_$slug.csv"
  grep -E "^--|^cpu:|ran in" "$out/firstvisit.log" | cut -c1-160 | tee -a "$log"
}
step_executed() {
  # shellcheck disable=SC2086
  live executed executed.log $py scripts/execute_notebooks.py --out "$out/executed" \
    ${EXECUTE_NOTEBOOKS:-notebooks/10_under_the_hood.ipynb notebooks/09_your_network.ipynb}
  grep -v "^\[IPKernelApp\]" "$out/executed.log" | tail -n 30 | tee -a "$log"
}

steps="${*:-tests}"
for step in $steps; do
  if ! declare -F "step_$step" > /dev/null; then
    echo "unknown step $step (bash scripts/gpu.sh --help lists them)" >&2
    exit 2
  fi
done
mkdir -p "$out/bench"
if [ -f .whl/setup.sh ]; then
  # shellcheck disable=SC1091
  source .whl/setup.sh > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
  python3 -m compileall -q -j 0 .whl/site labkit > /dev/null 2>&1 || true  # as pip does on install
fi
export LABKIT_GIT_COMMIT="${LABKIT_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || true)}"
slug=$($py -c "from labkit import env; print(env.gpu_slug(env.environment().gpu_name))")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"
for step in $steps; do
  echo "== $step ($(date +%T))" | tee -a "$log"
  "step_$step"
done
cp data/bench/*.csv data/bench/*.json "$out/bench/" 2> /dev/null
echo "== done ($(date +%T)); logs and data/bench in $out" | tee -a "$log"
