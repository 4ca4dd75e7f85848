#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl), everything issue 15 (live panels) needs measured.
# The whole of it takes about 15 min on an H100: split it over calls with the step names.
#   bash scripts/gpu-live-panels.sh [gputests] [notebooks] [fill] [widgets]   (default: all four)
#   gputests   the gpu-marked tests (cache round trip, corruption, two writers, cuDNN version,
#              charts that fill in, a second click stops the first, ...)        ~3 min
#   notebooks  the live notebooks under nbmake                                  ~2.5 min
#   fill       `python -m labkit fill --quick` into an empty cache, timed, then once more (all skipped)
#   widgets    bench_widgets: first visit with an empty cache, then revisit after restart
# GPU_TESTS: test paths (default tests/); WIDGET_PANELS: the panels to bench (default all).
# Each step is stopped after STEP_TIMEOUT seconds (default 300) so a later step still runs.
# Logs and data/bench/widget_latency.csv go to $OUT when set.
set -uo pipefail
source .whl/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1 || { cat "${OUT:-/tmp}/setup.log"; exit 1; }
out="${OUT:-/tmp}"
steps="${*:-gputests notebooks fill widgets}"
limit="${STEP_TIMEOUT:-300}"
export LABKIT_MODE=live LABKIT_GIT_COMMIT="${LABKIT_GIT_COMMIT:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.log"
for step in $steps; do
  echo "== $step ($(date +%T))"
  case "$step" in
    gputests)
      timeout -s INT -k 20 "$limit" python3 -m pytest -m gpu -q -rfEs --tb=short --durations=15 ${GPU_TESTS:-tests/} > "$out/gpu-tests.log" 2>&1
      tail -n 40 "$out/gpu-tests.log" ;;
    notebooks)
      timeout -s INT -k 20 "$limit" python3 -m pytest --nbmake notebooks/ -q --durations=10 > "$out/live-notebooks.log" 2>&1
      tail -n 25 "$out/live-notebooks.log" ;;
    fill)
      cache=$(mktemp -d)
      { time LABKIT_CACHE="$cache" timeout "$limit" python3 -m labkit fill --quick; } > "$out/fill.log" 2>&1
      { time LABKIT_CACHE="$cache" python3 -m labkit fill --quick; } >> "$out/fill.log" 2>&1
      tail -n 20 "$out/fill.log" ;;
    widgets)
      cache=$(mktemp -d)
      timeout "$limit" python3 scripts/bench_widgets.py ${WIDGET_PANELS:+--panels $WIDGET_PANELS} --cache "$cache" --condition "first visit, empty cache" > "$out/widgets-first.log" 2>&1
      tail -n 25 "$out/widgets-first.log"
      timeout "$limit" python3 scripts/bench_widgets.py ${WIDGET_PANELS:+--panels $WIDGET_PANELS} --cache "$cache" --condition "revisit after restart" > "$out/widgets-revisit.log" 2>&1
      tail -n 25 "$out/widgets-revisit.log" ;;
    *) echo "unknown step $step (gputests, notebooks, fill, widgets)"; exit 2 ;;
  esac
done
cp data/bench/widget_latency.csv "$out/" 2>/dev/null || true
