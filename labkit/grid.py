"""The lessons' recorded grid: every (experiment, arguments) call the lessons and their panels
use, recorded by ``python -m labkit record`` and measured ahead by ``python -m labkit fill``.

The grid: each lesson's base call plus one-factor-at-a-time sweeps around it, and small full
grids where a lesson compares categories (dtype x layout).
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

from .errors import InvalidSpec
from .experiments import BASE

Call = Tuple[str, dict]

SWEEPS = {  # one factor at a time around BASE (N=32, C=K=64, 56x56, 3x3)
    "N": [1, 8, 32, 64],
    "C=K": [32, 64, 128, 256],
    "H=W": [14, 28, 56, 112],
}


def _variants(base=BASE):
    """BASE and its one-factor variants (each once)."""
    out = [base]
    for field, values in SWEEPS.items():
        for v in values:
            change = {"N": dict(N=v), "C=K": dict(C=v, K=v), "H=W": dict(H=v, W=v)}[field]
            s = base.replace(**change)
            if s not in out:
                out.append(s)
    return out


def grid(quick: bool = False) -> List[Call]:
    """Every (experiment, kwargs) the lessons need. ``quick``: the base calls only."""
    nchw = BASE.replace(layout="NCHW")
    calls: List[Call] = [
        ("build_cost", dict(spec=BASE)),  # first, while this process has built nothing
        ("precision", dict(spec=BASE)),
        ("precision", dict(spec=nchw)),
        ("layout", dict(spec=BASE)),
        ("fusion", dict(spec=BASE)),
        ("plans", dict(spec=BASE)),
        ("plans", dict(spec=nchw)),
        ("caps", dict(spec=nchw)),
        ("algorithms", dict(spec=nchw)),
        ("roofline", dict(dtype="fp16", layout="NHWC")),
        ("sweep", dict(field="N", values=SWEEP_VALUES["N"])),
        ("workspace_sizes", dict(spec=BASE)),
        ("strategies", dict(workload="one_conv", repeats=strategies_repeats("one_conv"))),
        ("race", dict(launch="graph", streams=2, min_runs=1024)),
        ("race", dict(launch="python", streams=2, min_runs=1024)),
    ]
    if quick:
        return calls
    for s in _variants()[1:]:
        calls.append(("precision", dict(spec=s)))
        calls.append(("layout", dict(spec=s)))
        if s.N <= 64 and s.H <= 56:
            calls.append(("fusion", dict(spec=s)))
    calls.append(("fusion", dict(spec=BASE.replace(dtype="fp32"))))
    calls.append(("layout", dict(spec=BASE.replace(dtype="fp32"))))
    for d in ("fp32", "tf32", "bf16", "fp8_e4m3"):
        for lay in ("NHWC", "NCHW"):
            calls.append(("plans", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for direction in ("dgrad", "wgrad"):
        calls.append(("plans", dict(spec=BASE.replace(direction=direction))))
    for d in ("fp16", "fp32"):
        for lay in ("NHWC", "NCHW"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("caps", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for d in ("fp16", "fp32", "tf32", "bf16"):
        for lay in ("NCHW", "NHWC"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("algorithms", dict(spec=BASE.replace(dtype=d, layout=lay))))
    calls.append(("build_cost", dict(spec=BASE.replace(dtype="fp32", layout="NCHW"))))
    for d, lay in (("bf16", "NHWC"), ("fp16", "NCHW"), ("fp32", "NCHW"), ("tf32", "NHWC"), ("fp8_e4m3", "NHWC")):
        calls.append(("roofline", dict(dtype=d, layout=lay)))
    for field in ("C=K", "H=W", "R=S"):
        calls.append(("sweep", dict(field=field, values=SWEEP_VALUES[field])))
    for field in ("N", "C=K"):
        calls.append(("sweep", dict(field=field, values=SWEEP_VALUES[field], base=BASE.replace(dtype="fp32", layout="NCHW"))))
    for w in ("resnet50_fp16_nhwc", "resnet50_fp32_nchw", "random_shapes", "growing_batch", "pressure"):
        calls.append(("strategies", dict(workload=w, repeats=strategies_repeats(w))))
    calls.append(("race", dict(launch="graph", streams=4, min_runs=1024)))
    return calls


#: the values each ``sweep`` field is recorded at (widgets offer exactly these)
SWEEP_VALUES = {"N": [1, 2, 4, 8, 16, 32, 64], "C=K": [16, 32, 64, 128, 256, 512], "H=W": [7, 14, 28, 56, 112],
                "R=S": [1, 3, 5, 7]}


def calls(quick: bool = False, only: Optional[Iterable[str]] = None) -> List[Call]:
    """The grid's calls, of the experiments in ``only`` when given (`InvalidSpec` for a name
    that is not an experiment)."""
    from . import experiments

    out = grid(quick)
    if only:
        unknown = [o for o in only if o not in experiments.registry()]
        if unknown:
            raise InvalidSpec("only", unknown, f"must name experiments: {', '.join(sorted(experiments.registry()))}")
        out = [c for c in out if c[0] in only]
    return out


def strategies_repeats(workload: str) -> int:
    """Passes a ``strategies`` call records for a workload (ResNet-50 passes are long: 3)."""
    return 3 if workload.startswith("resnet") else 20
