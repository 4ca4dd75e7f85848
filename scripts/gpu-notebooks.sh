#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): run every lesson notebook LIVE with nbmake, then the
# widget latency benchmark in live mode. Logs (and the latency CSV) go to $OUT when set.
set -uo pipefail
source .whl/setup.sh || exit 1
out="${OUT:-/tmp}"
export LABKIT_MODE=live
python3 -m pytest --nbmake notebooks/ -q -p no:cacheprovider --durations=0 2>&1 | tee "$out/notebooks-live.log"
if [ -f scripts/bench_widgets.py ]; then
  python3 scripts/bench_widgets.py 2>&1 | tee "$out/widgets-live.log"
  cp data/bench/widget_latency.csv "$out/" 2>/dev/null || true
fi
