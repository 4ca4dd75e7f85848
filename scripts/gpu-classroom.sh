#!/usr/bin/env bash
# A class on one GPU (issue 28), on the GPU host (device tool, carry .whl):
#   bash scripts/gpu-classroom.sh [tests] [bench] [widgets]   (default: tests bench)
#   tests    tests/test_classroom_gpu.py + the lock/shared CPU tests, live, on this GPU
#   panels   the panels' tests live on this GPU (figure, panel parts, widgets, prefetch)
#   notebooks  every lesson notebook live under nbmake
#   bench    scripts/bench_classroom.py (8 learner processes, SECONDS default 120) -> $OUT/classroom_<gpu>.csv
#   bench2   the same on the host's first two GPUs, each learner on the GPU the class hub's spread gives it
#            (4 per GPU; needs two GPUs) -> $OUT/classroom_<gpu>_x2.csv, one row per GPU
#   widgets  scripts/bench_widgets.py first visit with an empty cache (into $d), then `fill --quick --into $d`,
#            then first visit of a learner with an empty cache and LABKIT_SHARED_CACHE=$d -> $OUT/widget_latency.csv
#   setupwidgets  the widgets' first visit after `python -m labkit warm-kernels` (what `make setup` runs)
#   kernels  CuPy's kernel compiles on a first visit (probe_kernel_compiles.py, probe_nvrtc_cost.py), numerics GPU tests
#   probe    where the slow first paints and shared-recording changes spend their time (probe_change: every
#            thread's stacks sampled), after `warm-kernels`: a fresh process's first panel (PROBE_FIRST), live,
#            empty cache in $d; PROBE_CHANGES measured live into $d; then the first panel, the builds and the
#            changes answered from $d as a learner's shared recording -> $OUT/probe-*.log
#   workers  each learner's build workers: how many, GPU memory each (probe_worker_memory.py), alone and in a class
#   reading  a learner's first panels from a quick-filled shared recording, at once and after READ_S s of reading
#   firstpanel  a learner's first panels (FIRST_PANELS) at once after the first cell from a quick-filled shared
#            recording in CLASS_DIR (default: a new folder), FIRST_REPEATS (3) fresh processes, no profiler, with the
#            warm-up's timeline; then the builds of PROFILE_PANELS under cProfile after 5 s of reading; then the
#            same first cell and panels piece by piece in one thread (probe_import_costs.py, -X importtime)
#            -> $OUT/first-*.log, $OUT/import-costs.log, $OUT/importtime.log
#   classnotebooks  a learner's lessons (CLASS_NOTEBOOKS: 01, 02, 09) run top to bottom in real kernels (nbclient, as
#            "Run all") from a shared recording in CLASS_DIR filled with `fill $CLASS_FILL` (default --quick; CLASS_FILL=""
#            for the whole grid, as an instructor fills; FILL_TIMEOUT), each cell's time printed; saved with their
#            outputs -> $OUT/class-executed/ (here: python scripts/screenshots.py --executed DIR)
#   kernelpanels  lesson 01's first cells then four panels' cells (KERNEL_PANELS) in a real kernel (nbclient, back to
#            back; scripts/probe_kernel_panel.py --plain), at once and after 3 s of reading, twice each, from a
#            quick-filled shared recording in CLASS_DIR: a panel's time with the kernel's widget messages in it
#   kernelcpu  the same cells with each cell's CPU time per thread (probe_kernel_panel --cpu), after 3 s of an idle
#            kernel: live, live without the prefetch worker, recorded; then live at once
#   builds   where panel builds spend their time (probe_panel_build, cProfile, no reading time): a fresh
#            process's first panels live with an empty cache in $d, then `fill --quick --into $d`, then the
#            same panels of a learner reading $d as the shared class recording -> $OUT/probe-builds*.log
# Step limits: STEP_TIMEOUT (default 300 s) or <STEP>_TIMEOUT. Logs go to $OUT.
set -uo pipefail
source scripts/gpu-lib.sh
# fill_class DIR NOTE [FILL ARGS...]: `python -m labkit fill ARGS --into DIR` under the fill step limit (FILL_TIMEOUT,
# default 300 s), its log in $out/fill.log; its time, NOTE and the log's last lines in $log
fill_class() {
  local d="$1" note="$2" t0; shift 2; t0=$(date +%s)
  timeout -k 10 "$(limit fill)" python3 -m labkit fill "$@" --into "$d" > "$out/fill.log" 2>&1
  echo "fill $* --into ($note): $(( $(date +%s) - t0 )) s; $(tail -c 400 "$out/fill.log" | tr '\r' '\n' | grep -v '^$' | tail -n 2)" | tee -a "$log"
}
step_tests() {
  live_pytest tests tests.log -rfEs tests/test_classroom_gpu.py tests/test_gpu_lock.py tests/test_shared_recording.py \
    tests/test_spread_gpu.py
}
step_panels() {
  live_pytest panels panels-tests.log tests/test_figure.py tests/test_panel_parts.py tests/test_widgets.py tests/test_prefetch.py
}
step_notebooks() {
  live_pytest notebooks notebooks.log --nbmake notebooks/
}
step_bench() {
  cp "data/bench/classroom_$slug.csv" "$out/" 2>/dev/null
  timeout -k 10 "$(limit bench)" python3 scripts/bench_classroom.py --seconds "${SECONDS_CLASS:-120}" \
    --out "$out/classroom_$slug.csv" > "$out/bench.log" 2>&1; tail -n 40 "$out/bench.log" | tee -a "$log"
}
step_bench2() {
  cp "data/bench/classroom_${slug}_x2.csv" "$out/" 2>/dev/null
  timeout -k 10 "$(limit bench2)" python3 scripts/bench_classroom.py --gpus 2 --seconds "${SECONDS_CLASS:-120}" \
    --out "$out/classroom_${slug}_x2.csv" > "$out/bench2.log" 2>&1; tail -n 40 "$out/bench2.log" | tee -a "$log"
}
step_widgets() {
  d=$(mktemp -d); e=$(mktemp -d); cp data/bench/widget_latency.csv "$out/widget_latency.csv"
  # each learner run starts from an empty CuPy kernel cache too (a machine that never ran labkit)
  LABKIT_MODE=live CUPY_CACHE_DIR="$(mktemp -d)" timeout -k 10 "$(limit widgets)" python3 scripts/bench_widgets.py --cache "$d" \
    --condition "first visit, empty cache" --out "$out/widget_latency.csv" > "$out/widgets.log" 2>&1
  tail -n 25 "$out/widgets.log" | tee -a "$log"
  fill_class "$d" "after the first visit" --quick
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" CUPY_CACHE_DIR="$(mktemp -d)" timeout -k 10 "$(limit widgets)" \
    python3 scripts/bench_widgets.py --cache "$e" \
    --condition "first visit, shared class recording" --out "$out/widget_latency.csv" > "$out/widgets-shared.log" 2>&1
  tail -n 25 "$out/widgets-shared.log" | tee -a "$log"
}
PROBE_CHANGES=${PROBE_CHANGES:-"network_report dtype=fp32 layout=NCHW -- fusion N=8 layout=NCHW -- workspace_sizes N=8 -- layout N=8 -- build_cost dtype=bf16 -- race_timeline launch=python"}
step_probe() {
  d=$(mktemp -d); e=$(mktemp -d); k=$(mktemp -d)
  CUPY_CACHE_DIR="$k" python3 -m labkit warm-kernels > "$out/warm-kernels.log" 2>&1  # the quick start's set-up
  # a fresh process's first panel, live, empty cache (sampled: every thread's stacks)
  LABKIT_MODE=live LABKIT_CACHE="$d" CUPY_CACHE_DIR="$k" timeout -k 10 "$(limit probe)" python3 scripts/probe_change.py \
    ${PROBE_FIRST:-algorithms N=8} > "$out/probe-first.log" 2>&1; grep -E "^(==|--)|innermost" "$out/probe-first.log" | cut -c1-600 | tee -a "$log"
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_CACHE="$d" CUPY_CACHE_DIR="$k" timeout -k 10 "$(limit probe)" python3 scripts/probe_change.py $PROBE_CHANGES \
    > "$out/probe-measure.log" 2>&1; grep -E "^(==|--)" "$out/probe-measure.log" | cut -c1-200 | tee -a "$log"
  # a learner reading $d as the class's shared recording: the same first panel, builds and changes
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$e" CUPY_CACHE_DIR="$k" timeout -k 10 "$(limit probe)" python3 scripts/probe_change.py \
    ${PROBE_FIRST:-algorithms N=8} -- $PROBE_CHANGES > "$out/probe-shared.log" 2>&1
  grep -E "^(==|--)|innermost" "$out/probe-shared.log" | cut -c1-600 | tee -a "$log"
}
# workers: what each learner's build workers hold on the GPU (probe_worker_memory.py), alone and in a class
step_workers() {
  LABKIT_MODE=live timeout -k 10 "$(limit workers)" python3 scripts/probe_worker_memory.py > "$out/workers.log" 2>&1
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$(mktemp -d)" timeout -k 10 "$(limit workers)" python3 scripts/probe_worker_memory.py \
    > "$out/workers-class.log" 2>&1; grep -vE "^\*\*Mode" "$out/workers.log" "$out/workers-class.log" | tee -a "$log"
}
# reading: a learner's first panels from a shared recording `fill --quick` filled, built at once after the
# first cell and after READ_S (default 3) seconds of reading the lesson's opening (no profiler) -> $OUT/reading*.log
step_reading() {
  d=$(mktemp -d); fill_class "$d" empty --quick
  for r in 0 "${READ_S:-3}"; do
    LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit reading)" \
      python3 scripts/probe_panel_build.py --plain --read "$r" algorithms fusion > "$out/reading-$r.log" 2>&1
    echo "-- reading $r s:" | tee -a "$log"; grep -E "^==|warm-up" "$out/reading-$r.log" | cut -c1-140 | tee -a "$log"
  done
}
step_firstpanel() {
  d="${CLASS_DIR:-$(mktemp -d)}"; mkdir -p "$d"; fill_class "$d" "CLASS_DIR" --quick
  for i in $(seq "${FIRST_REPEATS:-3}"); do
    # shellcheck disable=SC2086
    LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit firstpanel)" \
      python3 scripts/probe_panel_build.py --plain --read 0 ${FIRST_PANELS:-algorithms network_report strategies} \
      > "$out/first-$i.log" 2>&1
    grep -E "^==|warm-up steps" "$out/first-$i.log" | cut -c1-400 | tee -a "$log"
  done
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit firstpanel)" \
    python3 scripts/probe_panel_build.py --read 5 ${PROFILE_PANELS:-network_report strategies} > "$out/first-profile.log" 2>&1
  grep -E "^==" "$out/first-profile.log" | cut -c1-200 | tee -a "$log"
  # the same pieces one after another in one thread: the GIL-bound work such a first panel waits for
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit firstpanel)" \
    python3 -X importtime scripts/probe_import_costs.py > "$out/import-costs.log" 2> "$out/importtime.log"
  tee -a "$log" < "$out/import-costs.log"
}
step_classnotebooks() {
  d="${CLASS_DIR:-$(mktemp -d)}"; mkdir -p "$d"
  # shellcheck disable=SC2086
  fill_class "$d" "CLASS_DIR" ${CLASS_FILL---quick}
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit classnotebooks)" \
    python3 scripts/execute_notebooks.py --out "$out/class-executed" ${CLASS_NOTEBOOKS:-notebooks/01_what_is_a_workspace.ipynb \
    notebooks/02_workspace_strategies.ipynb notebooks/09_your_network.ipynb} 2>&1 | grep -v "^\[IPKernelApp\]" | tee -a "$log"
}
step_kernelpanels() {
  d="${CLASS_DIR:-$(mktemp -d)}"; mkdir -p "$d"
  [ -f "$d/fill.json" ] || fill_class "$d" "CLASS_DIR" --quick
  for r in 0 3; do
    for i in 1 2; do
      echo "-- real kernel, $r s of reading before the panels, run $i:" | tee -a "$log"
      # shellcheck disable=SC2086
      LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit kernelpanels)" \
        python3 scripts/probe_kernel_panel.py --plain --read "$r" --panel ${KERNEL_PANELS:-AlgorithmsPanel SweepPanel \
        StrategiesPanel ReportPanel} 2>&1 | grep -v "^\[IPKernelApp\]" | tee -a "$log"
    done
  done
}
# kernelcpu: the same panels' cells with each cell's CPU time per thread (--cpu), after 3 s of an idle kernel (a
# learner reading: no cell runs) live from the shared recording, live without the prefetch worker
# (LABKIT_PREFETCH=0), recorded (this host's CPU alone), then live at once after the first cells
step_kernelcpu() {
  d="${CLASS_DIR:-$(mktemp -d)}"; mkdir -p "$d"
  [ -f "$d/fill.json" ] || fill_class "$d" "CLASS_DIR" --quick
  local hows=("live 3" "live 3 LABKIT_PREFETCH=0" "recorded 3" "live 0")  # KERNELCPU_ARGS: e.g. "--profile 3" (default --plain)
  [ -n "${KERNELCPU_RUNS:-}" ] && IFS=, read -ra hows <<< "$KERNELCPU_RUNS"  # e.g. "live 0,live 0 LABKIT_PREFETCH=0"
  for how in "${hows[@]}"; do
    echo "-- real kernel, $how (mode, seconds idle before the panels), CPU per thread:" | tee -a "$log"
    set -- $how
    # shellcheck disable=SC2086
    env LABKIT_MODE="$1" "${3:-LABKIT_PREFETCH=1}" LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$(mktemp -d)" \
      timeout -k 10 "$(limit kernelpanels)" python3 scripts/probe_kernel_panel.py ${KERNELCPU_ARGS:---plain} --cpu --idle "$2" \
      --panel ${KERNEL_PANELS:-AlgorithmsPanel SweepPanel StrategiesPanel ReportPanel} 2>&1 | grep -v "^\[IPKernelApp\]" | tee -a "$log"
  done
}
BUILD_PANELS=${BUILD_PANELS:-"algorithms fusion network_report workspace_sizes strategies"}
step_builds() {
  d=$(mktemp -d); e=$(mktemp -d)
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_CACHE="$d" timeout -k 10 "$(limit builds)" python3 scripts/probe_panel_build.py $BUILD_PANELS \
    > "$out/probe-builds-live.log" 2>&1; grep -E "^==|warm-up" "$out/probe-builds-live.log" | cut -c1-220 | tee -a "$log"
  fill_class "$d" "after the live builds" --quick
  # shellcheck disable=SC2086
  LABKIT_MODE=live LABKIT_SHARED_CACHE="$d" LABKIT_CACHE="$e" timeout -k 10 "$(limit builds)" python3 scripts/probe_panel_build.py \
    $BUILD_PANELS > "$out/probe-builds-shared.log" 2>&1; grep -E "^==|warm-up" "$out/probe-builds-shared.log" | cut -c1-220 | tee -a "$log"
}
# kernels: CuPy's compiles on a first visit (an empty CuPy kernel cache) and what one costs
step_kernels() {
  live_pytest kernels kernels-tests.log tests/test_numerics_gpu.py tests/test_legacy.py tests/test_reference.py
  python3 scripts/probe_nvrtc_cost.py > "$out/nvrtc-cost.log" 2>&1; tee -a "$log" < "$out/nvrtc-cost.log"
  LABKIT_MODE=live LABKIT_CACHE="$(mktemp -d)" timeout -k 10 "$(limit kernels)" python3 scripts/probe_kernel_compiles.py \
    ${KERNEL_PANELS:-algorithms race fusion precision} > "$out/kernels.log" 2>&1; grep -vE "^   " "$out/kernels.log" | tee -a "$log"
}
# setupwidgets: a first visit with an empty cache after `make setup`'s `python -m labkit warm-kernels`
# (CuPy's kernels compiled at set-up, into an empty CuPy kernel cache first) -> $OUT/widget_latency.csv
step_setupwidgets() {
  k=$(mktemp -d); [ -f "$out/widget_latency.csv" ] || cp data/bench/widget_latency.csv "$out/widget_latency.csv"
  t0=$(date +%s); CUPY_CACHE_DIR="$k" python3 -m labkit warm-kernels > "$out/warm-kernels.log" 2>&1
  tail -n 3 "$out/warm-kernels.log" | tee -a "$log"; echo "warm-kernels: $(( $(date +%s) - t0 )) s" | tee -a "$log"
  LABKIT_MODE=live CUPY_CACHE_DIR="$k" timeout -k 10 "$(limit widgets)" python3 scripts/bench_widgets.py --cache "$(mktemp -d)" \
    --condition "first visit, empty cache, CuPy kernels compiled at setup" --out "$out/widget_latency.csv" \
    > "$out/widgets-setup.log" 2>&1
  tail -n 25 "$out/widgets-setup.log" | tee -a "$log"
}
run_steps "tests bench" "$@"
