#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): the widget latency benchmark, live (issue 15's goals).
#   bash scripts/gpu-widgets.sh            first visit with an empty cache, then (a new process)
#                                          revisit after restart with the cache the first one filled
#   bash scripts/gpu-widgets.sh pause 3    a learner who pauses 3 s after each change (prefetching)
# Extra args go to scripts/bench_widgets.py. Logs and the latency CSV go to $OUT when set.
set -uo pipefail
source .whl/setup.sh || exit 1
out="${OUT:-/tmp}"
export LABKIT_MODE=live
if [ "${1:-}" = pause ]; then
  pause="${2:-3}"; shift 2 || shift $#
  python3 scripts/bench_widgets.py --pause "$pause" "$@" 2>&1 | tee "$out/widgets-live-pause$pause.log"
else
  cache=$(mktemp -d)
  python3 scripts/bench_widgets.py --cache "$cache" --condition "first visit, empty cache" "$@" 2>&1 | tee "$out/widgets-live-first.log"
  python3 scripts/bench_widgets.py --cache "$cache" --condition "revisit after restart" "$@" 2>&1 | tee "$out/widgets-live-revisit.log"
fi
cp data/bench/widget_latency.csv "$out/" 2>/dev/null || true
