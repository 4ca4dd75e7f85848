#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): everything the network report (issue 18) needs on a GPU.
#   bash scripts/gpu-report.sh COMMIT [gputests] [bench] [record] [notebook] [kernels]   (default: all)
#   gputests  tests/test_report_gpu.py and tests/test_localcache_gpu.py                 ~2.5 min
#   bench     scripts/bench_report.py: resnet50 b32 fp16 NHWC, empty cache then cached   ~1.5 min
#   record    `labkit record --only network_report` into this GPU's recording folder   ~4 min (resumable)
#   notebook  lesson 09 live under nbmake, answered from the cache the bench filled
#   kernels   scripts/kernels_per_call.py --dtypes fp16 fp32 (where host dispatch goes) ~1 min
# Step limits: STEP_TIMEOUT (default 170 s) or <STEP>_TIMEOUT. Logs and results go to $OUT.
set -uo pipefail
source .whl/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1 || { cat "${OUT:-/tmp}/setup.log"; exit 1; }
export LABKIT_GIT_COMMIT="${1:?commit sha}"; shift
out="${OUT:-/tmp}"
steps="${*:-gputests bench record notebook kernels}"
slug="$(python3 -c 'from labkit import env; print(env.gpu_slug(env.environment().gpu_name))')"
case "$slug" in h100-80gb-hbm3) folder=h100-sxm ;; *) folder="$slug" ;; esac
rec="data/recordings/$folder"
cache="$(mktemp -d)/cache"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.log"
limit() { local v="${1^^}_TIMEOUT"; echo "${!v:-${STEP_TIMEOUT:-170}}"; }
for step in $steps; do
  echo "== $step ($(date +%T))"
  case "$step" in
    gputests)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit gputests)" python3 -m pytest -m gpu -q -rfEs --tb=short --durations=10 \
        tests/test_report_gpu.py tests/test_localcache_gpu.py > "$out/gpu-tests.log" 2>&1
      tail -n 30 "$out/gpu-tests.log" ;;
    bench)
      timeout -k 20 "$(limit bench)" python3 scripts/bench_report.py --cache "$cache" > "$out/bench-report.log" 2>&1
      tail -n 8 "$out/bench-report.log"; cp data/bench/report_*.csv "$out/" 2>/dev/null ;;
    record)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit record)" python3 -m labkit record --only network_report --out "$rec" > "$out/record.log" 2>&1
      tail -n 4 "$out/record.log"; mkdir -p "$out/rec"; cp "$rec"/network_report.csv "$rec"/metadata.json "$out/rec/" 2>/dev/null ;;
    notebook)
      LABKIT_MODE=live LABKIT_CACHE="$cache" timeout -s INT -k 20 "$(limit notebook)" python3 -m pytest --nbmake \
        notebooks/09_your_network.ipynb -q --durations=3 > "$out/notebook.log" 2>&1
      tail -n 12 "$out/notebook.log" ;;
    kernels)
      timeout -k 20 "$(limit kernels)" python3 scripts/kernels_per_call.py --dtypes fp16 fp32 > "$out/kernels.log" 2>&1
      tail -n 16 "$out/kernels.log"; cp data/bench/kernels_per_call_*.csv "$out/" 2>/dev/null ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
