#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): the widget latency benchmark, live, for a learner who
# pauses PAUSE seconds after each change (default 3; the prefetch worker measures ahead meanwhile;
# 0 = first visits with prefetching off). Extra args go to scripts/bench_widgets.py.
# Log and the latency CSV go to $OUT when set.
set -uo pipefail
source .whl/setup.sh || exit 1
out="${OUT:-/tmp}"
pause="${1:-3}"; shift || true
export LABKIT_MODE=live
python3 scripts/bench_widgets.py --pause "$pause" "$@" 2>&1 | tee "$out/widgets-live-pause$pause.log"
cp data/bench/widget_latency.csv "$out/" 2>/dev/null || true
