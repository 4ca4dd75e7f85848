#!/usr/bin/env bash
# On the GPU host (device tool, carry .whl): the report CLI on a model of one's own, Ctrl-C in the
# middle of one (what was measured is written, marked incomplete; exit 130; no worker left behind),
# and the bad-model tests. Logs and the reports go to $OUT.
set -uo pipefail
source .whl/setup.sh > /dev/null 2>&1 || exit 1
out="${OUT:-/tmp}"
export LABKIT_MODE=live LABKIT_CACHE="$(mktemp -d)"
echo "== CLI: torchvision.models:mobilenet_v3_large --input-shape 16,3,224,224"
( time python3 -m labkit report torchvision.models:mobilenet_v3_large --input-shape 16,3,224,224 --out "$out/mnv3" ) > "$out/cli.log" 2>&1
echo "rc=$?"; tr '\r' '\n' < "$out/cli.log" | grep -v '^$' | tail -n 9
echo "== Ctrl-C after 12 s: torchvision.models:efficientnet_b0"
python3 - "$out" <<'PY'
import os, signal, subprocess, sys, time
out = sys.argv[1]
cmd = [sys.executable, "-c", "import signal, runpy, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
       "sys.argv = ['labkit', 'report', 'torchvision.models:efficientnet_b0', '--input-shape', '16,3,224,224', '--out', sys.argv[1]]; "
       "runpy.run_module('labkit', run_name='__main__')", f"{out}/eff-interrupted"]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
time.sleep(12)
t0 = time.time(); p.send_signal(signal.SIGINT)
text, _ = p.communicate(timeout=60)
print(f"exit {p.returncode} {time.time() - t0:.1f} s after SIGINT:", [l for l in text.replace('\r', '\n').splitlines() if l.strip()][-2:])
import json
meta = json.load(open(f"{out}/eff-interrupted/report.json"))
print("written:", sorted(os.listdir(f"{out}/eff-interrupted")), "complete:", meta["complete"], "cut:", meta["cut"])
time.sleep(1)
left = subprocess.run(["ps", "-eo", "pid,ppid,stat,args"], capture_output=True, text=True).stdout
print("processes left from multiprocessing:", [l for l in left.splitlines() if "multiprocessing" in l])
PY
echo "== bad models"
timeout 120 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_report_bad_models.py 2>&1 | tail -n 5
