#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl, and .old for the `before` step): what issue 25 (any
# network, bounded measurements) needs on a GPU.
#   bash scripts/gpu-bounded.sh COMMIT [before] [stall] [reports] [bench] [models]   (default: all)
#   before   the stall test against the labkit of .old/ (the code before the fix: `git archive
#            <commit> labkit | tar -x -C .old`): it must fail (did not finish in its limit)
#   stall    the stall test and the budget/worker tests against this tree
#   reports  tests/test_report_gpu.py (the report's own GPU tests, now through the worker)
#   bench    scripts/bench_report_models.py: torchvision models at batch 16 and resnet50 b32, empty cache
#   models   tests/test_report_models_gpu.py, reading the reports the bench left in its cache
#   unnamed  the same bench on networks no issue named (bench_report_models.py --unnamed), then some of them in
#            training, bf16, fp32 NCHW, tf32 at batch 1 and 199x199 (not in the default steps: about 6 minutes)
# Step limits: STEP_TIMEOUT (default 300 s) or <STEP>_TIMEOUT. Logs go to $OUT.
set -uo pipefail
export LABKIT_GIT_COMMIT="${1:?commit sha}"; shift
source scripts/gpu-lib.sh
steps="${*:-before stall reports bench models}"
cache="$(mktemp -d)/bench-cache"
mkdir -p "$cache"
for step in $steps; do
  echo "== $step ($(date +%T))" | tee -a "$log"
  case "$step" in
    before)
      rm -rf .old/tests && cp -r tests .old/tests && (cd .old && python3 -c "import labkit, os; print('labkit from', os.path.dirname(labkit.__file__))" \
        && LABKIT_MODE=live timeout -k 10 "$(limit before)" python3 -m pytest -q -rfE --tb=line -p no:cacheprovider \
        "tests/test_report_models_gpu.py::test_the_mobilenet_v3_stall_is_gone") 2>&1 | tail -n 6 | tee -a "$log" ;;
    stall)
      LABKIT_MODE=live timeout -k 10 "$(limit stall)" python3 -m pytest -q -rfE --tb=short -p no:cacheprovider --durations=5 \
        "tests/test_report_models_gpu.py::test_the_mobilenet_v3_stall_is_gone" tests/test_budget.py tests/test_isolated.py 2>&1 \
        | tail -n 25 | tee -a "$log" ;;
    reports)
      LABKIT_MODE=live timeout -k 10 "$(limit reports)" python3 -m pytest -m gpu -q -rfE --tb=short -p no:cacheprovider \
        --durations=5 tests/test_report_gpu.py 2>&1 | tail -n 30 | tee -a "$log" ;;
    bench)
      timeout -k 10 "$(limit bench)" python3 scripts/bench_report_models.py --cache "$cache" 2>&1 | tail -n 20 | tee -a "$log"
      cp data/bench/report_models_*.csv "$out/" 2>/dev/null ;;
    unnamed)
      b=(timeout -k 10 "$(limit unnamed)" python3 scripts/bench_report_models.py --cache "$cache")
      { "${b[@]}" --unnamed; "${b[@]}" --models mobilenet_v3_large,inception_v3 --train --dtype bf16
        "${b[@]}" --models convnext_tiny,shufflenet_v2_x1_0 --dtype fp32 --layout NCHW
        "${b[@]}" --models inception_v3 --batch 1 --image 199 --dtype tf32; } 2>&1 | grep -v "^ " | tee -a "$log"
      cp data/bench/report_models_*.csv "$out/" 2>/dev/null ;;
    models)
      LABKIT_CACHE="$cache" LABKIT_MODE=live timeout -k 10 "$(limit models)" python3 -m pytest -m gpu -q -rfE --tb=short \
        -p no:cacheprovider --durations=8 tests/test_report_models_gpu.py -k "not stall" 2>&1 | tail -n 30 | tee -a "$log" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
