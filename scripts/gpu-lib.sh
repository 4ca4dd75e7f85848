# Sourced by the scripts/gpu-*.sh step runners on the GPU host (device tool, carry .whl):
# installs the wheel kit, sets $out (the device's $OUT, else /tmp), $log, $slug (the GPU's slug)
# and limit STEP (STEP_TIMEOUT, default 300 s, or <STEP>_TIMEOUT).
source .whl/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1 || { cat "${OUT:-/tmp}/setup.log"; exit 1; }
out="${OUT:-/tmp}"
log="$out/$(basename "$0" .sh).log"
slug=$(python3 -c "from labkit import env; print(env.gpu_slug(env.environment().gpu_name))")
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"
limit() { local v="${1^^}_TIMEOUT"; echo "${!v:-${STEP_TIMEOUT:-300}}"; }
