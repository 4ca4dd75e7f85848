#!/usr/bin/env bash
# What we run on the GPU host (the `device` tool), from the repo root, with .whl carried:
#   ../shared/gpu-host/fetch-wheels.sh   (here, once: fills .whl/)
#   device run, carry [".whl"]:  bash scripts/gpu-check.sh [pytest args...]
# It installs the wheel kit, prints the environment, runs `python -m labkit doctor` and the
# gpu-marked tests (plus whatever pytest args are given), logging to $OUT when set.
set -uo pipefail
source .whl/setup.sh || exit 1
log="${OUT:-/tmp}/gpu-check.log"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -m labkit doctor
  python3 -m pytest -m gpu -q -rs "$@" tests/
} 2>&1 | tee "$log"
