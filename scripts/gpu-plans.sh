#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): saved plans (issue 15) and the report presets (18).
#   bash scripts/gpu-plans.sh COMMIT [gputests] [buildcost] [notebook] [report]   (default: all)
#   gputests   saved plans, this GPU's recording, the engine, the report (GPU_TESTS overrides)  ~4 min
#   buildcost  `labkit record --only build_cost --force`: lesson 05's cold build vs load       ~20 s
#   notebook   lesson 05 live under nbmake                                                      ~1 min
#   report     `labkit record --only network_report` (resumable: the presets not yet recorded)
# Step limits: STEP_TIMEOUT (default 200 s) or <STEP>_TIMEOUT. Logs and $OUT/data.tgz (the
# recording folder) go to $OUT.
set -uo pipefail
source .whl/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1 || { cat "${OUT:-/tmp}/setup.log"; exit 1; }
export LABKIT_GIT_COMMIT="${1:?commit sha}"; shift
out="${OUT:-/tmp}"
steps="${*:-gputests buildcost notebook report}"
slug="$(python3 -c 'from labkit import env; print(env.gpu_slug(env.environment().gpu_name))')"
case "$slug" in h100-80gb-hbm3) folder=h100-sxm ;; *) folder="$slug" ;; esac
rec="data/recordings/$folder"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.log"
limit() { local v="${1^^}_TIMEOUT"; echo "${!v:-${STEP_TIMEOUT:-200}}"; }
for step in $steps; do
  echo "== $step ($(date +%T))"
  case "$step" in
    gputests)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit gputests)" python3 -m pytest -m gpu -q -rfEs --tb=short --durations=10 \
        ${GPU_TESTS:-tests/test_saved_plans_gpu.py tests/test_localcache_gpu.py tests/test_engine_gpu.py tests/test_report_gpu.py} \
        > "$out/gpu-tests.log" 2>&1
      tail -n 30 "$out/gpu-tests.log" ;;
    buildcost)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit buildcost)" python3 -m labkit record --only build_cost --force --out "$rec" \
        > "$out/record-build-cost.log" 2>&1
      tail -n 4 "$out/record-build-cost.log"
      python3 -c "import pandas as pd; print(pd.read_csv('$rec/build_cost.csv')[['stage','seconds','serialized_bytes']].to_string())" ;;
    notebook)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit notebook)" python3 -m pytest --nbmake \
        notebooks/05_plans_autotune_and_caching.ipynb -q --durations=3 > "$out/notebook.log" 2>&1
      tail -n 8 "$out/notebook.log" ;;
    report)
      LABKIT_MODE=live timeout -s INT -k 20 "$(limit report)" python3 -m labkit record --only network_report --out "$rec" \
        > "$out/record-report.log" 2>&1
      tail -n 6 "$out/record-report.log" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
tar czf "$out/data.tgz" "$rec"
