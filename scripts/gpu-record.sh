#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): the recorder and the benchmarks.
#   bash scripts/gpu-record.sh COMMIT [record args...]   e.g. --only plans --force
# Writes data/recordings/h100-sxm and data/bench/*; packs both into $OUT/data.tgz.
set -uo pipefail
source .whl/setup.sh || exit 1
export LABKIT_GIT_COMMIT="${1:?commit sha}"; shift
out="${OUT:-/tmp}"
if [ "$#" -gt 0 ]; then
  python3 -m labkit record --out data/recordings/h100-sxm "$@" 2>&1 | tail -3 | tee "$out/record.log"
fi
( time python3 -m labkit record --quick --out /tmp/quick ) 2>&1 | tail -5 | tee "$out/record-quick.log"
python3 -m labkit bench strategies > "$out/bench-strategies.log" 2>&1
python3 -m labkit bench vs-torch > "$out/bench-vs-torch.log" 2>&1
tail -25 "$out/bench-vs-torch.log"
tar czf "$out/data.tgz" data/recordings/h100-sxm data/bench
