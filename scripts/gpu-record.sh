#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): the recorder and the benchmarks.
#   bash scripts/gpu-record.sh COMMIT [record args...]   e.g. --only plans --force
#   BENCH=0 bash scripts/gpu-record.sh COMMIT --quick    the lessons' base calls only, no benchmarks
#                                                        (a first recording of a new GPU in ~1 min)
#   BENCH=0 RECORD_TIMEOUT=520 bash scripts/gpu-record.sh COMMIT --force   a full recording, stopped
#                                                        (and kept) at 520 s; run without --force to resume
# Writes data/recordings/<folder> and data/bench/*_<gpu slug>.csv; packs both into $OUT/data.tgz.
# <folder>: $LABKIT_RECORDING_DIR if set, else h100-sxm (the shipped recording) on an
# NVIDIA H100 80GB HBM3, else the GPU's slug (labkit.env.gpu_slug: NVIDIA H200 -> h200).
set -uo pipefail
source .whl/setup.sh || exit 1
export LABKIT_GIT_COMMIT="${1:?commit sha}"; shift
out="${OUT:-/tmp}"
slug="$(python3 -c 'from labkit import env; print(env.gpu_slug(env.environment().gpu_name))')" || exit 1
case "$slug" in h100-80gb-hbm3) default=h100-sxm ;; *) default="$slug" ;; esac
rec="data/recordings/${LABKIT_RECORDING_DIR:-$default}"
echo "GPU slug: $slug; recording folder: $rec" | tee "$out/gpu.log"
if [ "$#" -gt 0 ]; then
  # RECORD_TIMEOUT (s): interrupt the recorder then (it keeps what it recorded; the same command resumes)
  ( time timeout -s INT -k 30 "${RECORD_TIMEOUT:-100000}" python3 -m labkit record --out "$rec" "$@" ) 2>&1 | tail -6 | tee "$out/record.log"
fi
python3 -m labkit doctor > "$out/doctor.log" 2>&1
if [ "${BENCH:-1}" = 0 ]; then tar czf "$out/data.tgz" "$rec"; exit 0; fi
( time python3 -m labkit record --quick --out /tmp/quick ) 2>&1 | tail -5 | tee "$out/record-quick.log"
python3 -m labkit bench strategies > "$out/bench-strategies.log" 2>&1
python3 -m labkit bench vs-torch > "$out/bench-vs-torch.log" 2>&1
tail -25 "$out/bench-vs-torch.log"
if [ -d "$rec" ]; then tar czf "$out/data.tgz" "$rec" data/bench; else tar czf "$out/data.tgz" data/bench; fi
