"""Lesson 11's run function: each PyTorch knob setting measured through PyTorch in a fresh process
(`torch_child`), beside labkit's measurement of what cuDNN runs underneath (live: measured now;
recorded: answered from the recording)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from ...errors import LabkitError, status_row
from ...gpu.timing.kernel_keys import kernel_key
from ...signals.progress import report
from ...spec import ConvSpec
from ..core import as_spec, experiment, result, timed_plan, to_frame
from .settings import check_request, child_config, child_env, counterpart, labkit_name, settings_for

#: the lesson's convolution: a 3x3 of 256 channels at 56x56 (as wide as the outputs of ResNet-50's first
#: stage, whose own 3x3 layers are 64 wide), fp32 NCHW, as PyTorch's defaults run a model
KNOBS_SPEC = ConvSpec(N=32, C=256, H=56, W=56, K=256, R=3, S=3, padding=1, dtype="fp32", layout="NCHW")
#: the most seconds one setting's process may take (a cut one is a row that says so)
CHILD_TIMEOUT_S = 300
#: timed calls and warm-up calls per setting
CALLS, WARMUP = 50, 5
CHILD = Path(__file__).with_name("torch_child.py")
#: the line a child prints its results on (`torch_child.MARKER`)
MARKER = "LABKIT_TORCH_KNOBS "
#: a child's results kept as columns, in this order
MEASURED = (
    "gpu_us",
    "gpu_us_p10",
    "gpu_us_p90",
    "first_call_ms",
    "first_peak_bytes",
    "steady_peak_bytes",
    "reserved_bytes",
    "out_bytes",
    "alternating_us",
    "repeatable",
    "max_rel_error",
    "alloc_retries",
    "out_dtype",
    "import_s",
    "torch",
    "cudnn",
)


def parse_child(
    stdout: str, stderr: str, returncode: Optional[int], timeout_s: Optional[float] = None
) -> dict:
    """One child process's results, or why there are none.

    Args:
        stdout: what it printed.
        stderr: its errors.
        returncode: its exit status; None when it was cut at ``timeout_s``.
        timeout_s: the time it was allowed, in seconds.

    Returns:
        The results (`torch_child.measure`) with ``status`` "ok"; or ``status`` timed_out,
        unsupported (no torch, no torchvision, no CUDA) or error, and ``reason`` (one line).
    """
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARKER):
            try:
                return dict(json.loads(line[len(MARKER) :]), status="ok", reason="")
            except json.JSONDecodeError as exc:
                return dict(status="error", reason=f"unreadable results: {exc}")
    if returncode is None:
        return dict(status="timed_out", reason=f"cut after {timeout_s:g} s")
    last = next((ln.strip() for ln in reversed((stderr or "").splitlines()) if ln.strip()), "")
    missing = ("No module named 'torch'", "No module named 'torchvision'", "Torch not compiled with CUDA")
    kind = "unsupported" if any(m in last for m in missing) else "error"
    return dict(status=kind, reason=(last or f"exit status {returncode}, no results")[:300])


def run_child(config: str, env: dict, timeout_s: float) -> dict:
    """`torch_child` run on one configuration in a fresh process.

    Args:
        config: the JSON configuration (`settings.child_config`).
        env: its environment (`settings.child_env`).
        timeout_s: the most seconds it may take.

    Returns:
        `parse_child`'s result, with ``wall_s`` (the process's whole time, seconds).
    """
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(CHILD), config], env=env, capture_output=True, text=True, timeout=timeout_s
        )
        out = parse_child(done.stdout, done.stderr, done.returncode)
    except subprocess.TimeoutExpired as exc:
        out = parse_child(exc.stdout or "", exc.stderr or "", None, timeout_s)
    out["wall_s"] = time.perf_counter() - t0
    return out


def torch_row(spec: ConvSpec, setting, result: dict) -> dict:
    """A PyTorch setting's row: what was set, what it measured, its labkit counterpart.

    Args:
        spec: the convolution (or the network's batch, dtype and layout).
        setting: the `settings.Setting`.
        result: the child's result (`parse_child`).

    Returns:
        The row.
    """
    flags = result.get("flags") or {}
    twin = counterpart(spec, setting, flags["allow_tf32"]) if "allow_tf32" in flags else None
    row = dict(
        source="pytorch",
        knob=setting.knob,
        setting=setting.name,
        env=json.dumps(setting.env, sort_keys=True),
        flags=json.dumps(flags, sort_keys=True),
        layout=setting.layout or spec.layout,
        autocast=setting.autocast or "",
        runs_as=f"{twin.dtype} {twin.layout}" if twin else "",
        labkit_row=labkit_name(twin, setting.tuned, setting.cap_bytes) if twin else "",
        status=result["status"],
        reason=result.get("reason", ""),
        wall_s=result.get("wall_s", float("nan")),
        kernels=" | ".join(result.get("kernels") or []),
    )
    row.update({k: result[k] for k in MEASURED if k in result})
    return row


def _plan_kernels(cg, plan_index: int) -> str:
    """The kernels one call of a labkit plan launches (CUPTI), joined with `` | ``."""
    from ...gpu.cudnn import operands  # heavy: CuPy and the cuDNN frontend, live only
    from ...gpu.timing import measure, trace  # heavy: CuPy and CUPTI, live only

    ops = operands.Operands(cg.spec)
    stream = measure.timing_stream()
    bound = cg.bind_with_workspace(ops.arrays, plan_index, stream)
    with stream:
        bound.run()
    stream.synchronize()
    with trace.Tracer(f"plan {plan_index}", api=False) as t:
        with stream:
            bound.run()
            stream.synchronize()
            t.keep_from_now()
            bound.run()
        stream.synchronize()
    dev = sorted(
        (r for r in t.rows if r["kind"] in ("kernel", "memset", "memcpy")), key=lambda r: r["start_ns"]
    )
    return " | ".join(trace.demangle(r.get("raw_name", "")) for r in dev)


def labkit_row(spec: ConvSpec, tuned: bool, cap_bytes: Optional[int]) -> dict:
    """labkit's measurement of a PyTorch setting's counterpart: its plan, workspace, time, kernels.

    Args:
        spec: the convolution cuDNN runs (`settings.counterpart`).
        tuned: the autotuned plan (else the heuristic's pick).
        cap_bytes: the workspace cap, in bytes; None for none.

    Returns:
        The row (``status`` and ``reason`` say what went wrong, if anything).
    """
    from ...gpu.cudnn import graph_cache  # heavy: CuPy and the cuDNN frontend, live only
    from ...gpu.timing import autotune, trace  # heavy: CuPy and CUPTI, live only

    row = dict(source="labkit", knob="", setting=labkit_name(spec, tuned, cap_bytes), layout=spec.layout)
    row["runs_as"] = f"{spec.dtype} {spec.layout}"
    try:
        cg = graph_cache.get_graph(spec, workspace_cap=cap_bytes, all_plans=tuned)
        if tuned:
            res = autotune.autotune(cg)
            best = res.table[res.table.plan_index == res.best_index].iloc[0]
            index, us = int(best.plan_index), best.gpu_us
            p10, p90 = best.get("gpu_us_p10", float("nan")), best.get("gpu_us_p90", float("nan"))
        else:
            plan, t = timed_plan(cg)
            index, us, p10, p90 = plan.index, t.median_us, t.p10_us, t.p90_us
        plan = cg.plan(index)
        row.update(plan_name=plan.name, workspace_bytes=plan.workspace_bytes, status="ok", reason="")
        row.update(gpu_us=float(us), gpu_us_p10=float(p10), gpu_us_p90=float(p90))
    except LabkitError as exc:
        return dict(row, **status_row(exc))
    try:
        with trace.session():
            row["kernels"] = _plan_kernels(cg, index)
    except LabkitError as exc:
        row["reason"] = f"kernels not traced: {exc}"[:300]
    return row


def _keys(kernels) -> Optional[tuple]:
    if not isinstance(kernels, str) or not kernels:
        return None
    return tuple(k for k in (kernel_key(n) for n in kernels.split(" | ")) if k not in ("memset", "memcpy"))


def beside(df):
    """Each PyTorch row with its labkit counterpart's plan, workspace, time and whether the kernels match.

    Args:
        df: the experiment's rows (``source`` pytorch and labkit).

    Returns:
        A new frame: ``labkit_plan``, ``labkit_workspace_bytes``, ``labkit_gpu_us`` and
        ``same_kernels`` (True, False, or empty where either side has no kernel names) on the
        PyTorch rows.
    """
    out = df.copy()
    lab = {r.setting: r for r in df[df.source == "labkit"].itertuples()}
    plan, ws, us, same = [], [], [], []
    for r in out.itertuples():
        twin = lab.get(getattr(r, "labkit_row", "")) if r.source == "pytorch" else None
        plan.append(getattr(twin, "plan_name", "") if twin is not None else "")
        ws.append(getattr(twin, "workspace_bytes", float("nan")) if twin is not None else float("nan"))
        us.append(getattr(twin, "gpu_us", float("nan")) if twin is not None else float("nan"))
        a, b = (
            _keys(getattr(r, "kernels", "")),
            _keys(getattr(twin, "kernels", "")) if twin is not None else None,
        )
        same.append(None if a is None or b is None else a == b)
    out["labkit_plan"], out["labkit_workspace_bytes"], out["labkit_gpu_us"] = plan, ws, us
    out["same_kernels"] = same
    return out


@experiment
def torch_knobs(spec: ConvSpec = KNOBS_SPEC, net: Optional[str] = None):
    """Each PyTorch knob setting, measured through PyTorch in a fresh process, beside labkit's
    measurement of what cuDNN runs underneath.

    Each setting (`settings.settings_for`) runs in a process of its own (`torch_child`), its environment
    variables set before torch starts, cut after `CHILD_TIMEOUT_S`. For a convolution, labkit then
    measures each setting's counterpart here: the plan cuDNN's heuristic picks or the autotuned
    one, of the convolution as cuDNN runs it (tf32 where PyTorch allows TF32; autocast's dtype; the
    memory format's layout), under the setting's workspace cap.

    Args:
        spec: the convolution; for a network, its batch, dtype and layout.
        net: a torchvision network (`settings.NETS`), random weights, its forward pass; None for
            the convolution alone.

    Returns:
        One row per setting (``source`` pytorch: ``knob``, ``setting``, ``gpu_us`` median per call
        with p10/p90, ``first_call_ms``, ``first_peak_bytes`` and ``steady_peak_bytes`` above the
        inputs, ``reserved_bytes``, ``out_bytes``, ``alternating_us`` (two batch sizes in turn),
        ``repeatable``, ``max_rel_error`` against float64, ``kernels``, ``labkit_row``, ``status``),
        then one per labkit counterpart (``source`` labkit: ``plan_name``, ``workspace_bytes``,
        ``gpu_us``, ``kernels``); `beside` joins them.
    """
    spec = as_spec(spec)
    check_request(spec, net)
    todo = settings_for(spec, net)
    rows = []
    for s in todo:
        config = child_config(spec, net, s, calls=CALLS, warmup=WARMUP)
        rows.append(torch_row(spec, s, run_child(config, child_env(dict(os.environ), s), CHILD_TIMEOUT_S)))
        report(lambda: to_frame(rows), len(rows), len(todo), "settings measured")
    if net is None:
        wanted = {}
        for s, r in zip(todo, rows):
            if r["labkit_row"]:
                twin = spec.replace(dtype=r["runs_as"].split()[0], layout=r["runs_as"].split()[1])
                wanted.setdefault(r["labkit_row"], (twin, s.tuned, s.cap_bytes))
        for twin, tuned, cap in wanted.values():
            rows.append(labkit_row(twin, tuned, cap))
    df = beside(to_frame(rows))
    df.insert(0, "net", net or "")
    df.insert(1, "spec_label", spec.label)
    return df


def knobs_result(net: Optional[str] = None):
    """`torch_knobs` of the lesson's convolution for a summary or check: the results in use, as the
    lesson draws them.

    Args:
        net: the network, or None for the convolution.

    Returns:
        The DataFrame.
    """
    return result("torch_knobs", spec=KNOBS_SPEC, net=net)
