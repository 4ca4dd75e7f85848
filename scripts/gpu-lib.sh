# Sourced by the scripts/gpu-*.sh step runners on the GPU host (device tool, carry .whl):
# installs the wheel kit, sets $out (the device's $OUT, else /tmp), $log, $slug (the GPU's slug),
# limit STEP (STEP_TIMEOUT, default 300 s, or <STEP>_TIMEOUT), live_pytest STEP LOG [ARGS...] and
# run_steps DEFAULT_STEPS [STEP...].
source .whl/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1 || { cat "${OUT:-/tmp}/setup.log"; exit 1; }
# the kit installs with --no-compile; pip compiles bytecode by default, so a learner's install has
# it: without it every first import compiles sources (0.75 s of plotly's alone), 2 s for the kit;
# labkit's own bytecode as `make setup` compiles it (0.5 s of a first cell's import otherwise)
python3 -m compileall -q -j 0 .whl/site labkit > /dev/null 2>&1 || true
out="${OUT:-/tmp}"
log="$out/$(basename "$0" .sh).log"
# a learner's environment has rfc3987-syntax (JupyterLab -> jupyter-events -> jsonschema[format-nongpl]),
# whose import costs plotly's first import seconds (labkit.session.warmup): a bench without it is not theirs
python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('rfc3987_syntax') is None)" ||
  echo "WARNING: the wheel kit lacks rfc3987-syntax, which every JupyterLab install has: ../shared/gpu-host/fetch-wheels.sh rfc3987-syntax" | tee -a "$log"
slug=$(python3 -c "from labkit import env; print(env.gpu_slug(env.environment().gpu_name))")
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"
limit() { local v="${1^^}_TIMEOUT"; echo "${!v:-${STEP_TIMEOUT:-300}}"; }
# live_pytest STEP LOG [PYTEST ARGS... FILES...]: pytest in live mode under STEP's limit (-q -rfE
# --tb=short --durations=5; ARGS may override them), the whole output in $out/LOG; its failures,
# skips, slowest calls and summary line in $log.
live_pytest() {
  local step="$1" file="$out/$2"
  shift 2
  LABKIT_MODE=live timeout -k 10 "$(limit "$step")" python3 -m pytest -q -rfE --tb=short -p no:cacheprovider --durations=5 \
    "$@" > "$file" 2>&1
  grep -E "^E |passed|failed|Error|SKIP|^[0-9.]+s call" "$file" | tail -n 40 | tee -a "$log"
}
# run_steps DEFAULT_STEPS [STEP...]: run each STEP named (none named: the space-separated
# DEFAULT_STEPS) as the caller's shell function step_<STEP>, in order, each under a "== STEP (time)"
# line in $log, then "== done (time)". A step with no such function only gets its line.
run_steps() {
  local defaults="$1" steps step
  shift
  steps="${*:-$defaults}"
  for step in $steps; do  # split on spaces: "tests bench" is two steps
    echo "== $step ($(date +%T))" | tee -a "$log"
    if declare -F "step_$step" > /dev/null; then "step_$step"; fi
  done
  echo "== done ($(date +%T))" | tee -a "$log"
}
