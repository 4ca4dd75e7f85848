#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl), everything issue 15 (live panels) needs measured, in
# one call (about 15 min on an H100; split it with the step names if a call's limit is shorter):
#   bash scripts/gpu-live-panels.sh [tests] [fill] [widgets]      (default: all three)
#   tests    the gpu-marked tests (cache round trip, corruption, two writers, cuDNN version,
#            charts that fill in, a second click stops the first) and the live notebooks
#   fill     `python -m labkit fill` into an empty cache, timed, then once more (all skipped)
#   widgets  bench_widgets: first visit with an empty cache, then revisit after restart
# Logs and data/bench/widget_latency.csv go to $OUT when set.
set -uo pipefail
source .whl/setup.sh || exit 1
out="${OUT:-/tmp}"
steps="${*:-tests fill widgets}"
export LABKIT_MODE=live LABKIT_GIT_COMMIT="${LABKIT_GIT_COMMIT:-}"
for step in $steps; do
  case "$step" in
    tests)
      python3 -m pytest -m gpu -q -rs tests/ 2>&1 | tee "$out/gpu-tests.log"
      python3 -m pytest --nbmake notebooks/ -q 2>&1 | tee "$out/live-notebooks.log" ;;
    fill)
      cache=$(mktemp -d)
      { time LABKIT_CACHE="$cache" python3 -m labkit fill; } 2>&1 | tee "$out/fill.log"
      { time LABKIT_CACHE="$cache" python3 -m labkit fill; } 2>&1 | tail -n 6 | tee -a "$out/fill.log" ;;
    widgets)
      bash scripts/gpu-widgets.sh ;;
    *) echo "unknown step $step (tests, fill, widgets)"; exit 2 ;;
  esac
done
cp data/bench/widget_latency.csv "$out/" 2>/dev/null || true
