"""Benchmark: the network report of real networks, live on this GPU.

    python scripts/bench_report_models.py [--models resnet18,mobilenet_v3_large,...] [--cache DIR]
        [--dtype fp16] [--layout NHWC] [--train] [--batch 16] [--image 224]

Each network runs in a fresh Python process (``labkit.report`` as a learner calls it: a
torchvision model at batch 16 with ``input_shape``, or the resnet50 preset at batch 32), fp16
NHWC unless told, with a cache folder that holds no result for it (``--cache``: one folder for
every network, kept afterwards so that the gpu tests can read the reports from it). A model is
any torchvision classification or segmentation builder (``models.<name>`` or
``models.segmentation.<name>``, no weights) or one of `SPECIAL`. Prints a table with each
report's seconds against its goal (<= 60 s for a model at batch 16, <= 40 s for the resnet50
preset at batch 32) and what it cut, the sum of cut plans, and writes
data/bench/report_models_<gpu slug>.csv (rows of other GPUs are other files): a row per model,
dtype, layout, training and batch; rows of runs not repeated stay as they were.

Columns: ``hook_convs`` the Conv2d calls a forward hook counts; ``layers`` the report's layers
(equal when every call is listed); ``distinct`` the distinct convolutions measured;
``complete``; ``seconds`` the ``labkit.report`` call; ``process_seconds`` the whole process;
``max_step_seconds`` the longest step against ``step_budget_s`` (its budget; a step is killed
15 s past it); ``cut_plans``, ``cut_layers``, ``cut_strategies`` what a budget stopped;
``slower_plans`` plans left after one eager call over 6x slower than the best; ``n_<status>``
the layers by status; ``checked`` every measured layer matched float64.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = (
    "resnet18",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "regnet_y_400mf",
    "resnext50_32x4d_dilated",
    "resnet50",
)
#: more networks, each with shapes the others lack: inception_v3 (1x7 and 7x1
#: kernels, asymmetric padding), convnext_tiny (7x7 depthwise, a 4x4 stride-4 stem), vit_b_16 (one
#: 16x16 stride-16 convolution to 768 channels), shufflenet_v2_x1_0 (depthwise stride 2), alexnet
#: (11x11 stride 4), densenet121 (121 layers of growing inputs), squeezenet1_1, fcn_resnet50
#: (segmentation: dilated 3x3 at 28x28)
UNNAMED = (
    "inception_v3",
    "convnext_tiny",
    "vit_b_16",
    "shufflenet_v2_x1_0",
    "alexnet",
    "densenet121",
    "squeezenet1_1",
    "fcn_resnet50",
)
#: the key of a row: a repeated run replaces the row with the same key
ROW_KEY = ("model", "dtype", "layout", "training", "batch")
GOALS = {"model": 60.0, "preset": 40.0}
CHILD = r"""
import json, sys, time
name, how = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
import torch, torchvision
import labkit
from labkit import env
from labkit.experiments.your_network import step_budget_s
common = dict(dtype=how["dtype"], layout=how["layout"], training=how["training"])
if name == "resnet50":
    kind, net, kw, hooks = "preset", "resnet50", dict(batch=how["batch"] or 32, **common), 53
else:
    if name == "resnext50_32x4d_dilated":
        model = torchvision.models.resnext50_32x4d(replace_stride_with_dilation=[False, True, True])
    elif hasattr(torchvision.models, name):
        model = getattr(torchvision.models, name)()
    else:
        model = getattr(torchvision.models.segmentation, name)(weights_backbone=None)
    shape = (how["batch"] or 16, 3, how["image"], how["image"])
    kind, net, kw = "model", model, dict(input_shape=shape, **common)
    count = [0]
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    hs = [m.register_forward_hook(lambda *a: count.__setitem__(0, count[0] + 1)) for m in convs]
    with torch.no_grad():
        model.eval()(torch.zeros(shape))
    for h in hs:
        h.remove()
    hooks = count[0]
t1 = time.perf_counter()
rep = labkit.report(net, **kw)
t2 = time.perf_counter()
layers, e = rep.layers, env.environment()
ok = layers[layers.status == "ok"]
steps = list(layers.drop_duplicates("spec_id").get("step_seconds", []))
steps += list(rep.strategies.get("step_seconds", []))
print(json.dumps(dict(
    kind=kind, batch=int(layers.N.iloc[0]), dtype=how["dtype"], layout=how["layout"],
    training=how["training"], image=how["image"], hook_convs=hooks, layers=len(layers),
    distinct=int(layers.spec_id.nunique()), complete=rep.complete, seconds=t2 - t1,
    max_step_seconds=max(steps), step_budget_s=step_budget_s(),
    cut_plans=rep.cut["plans"], cut_layers=rep.cut["layers"], cut_strategies=rep.cut["strategies"],
    slower_plans=rep.cut["slower_plans"],
    **{f"n_{k}": int(v) for k, v in layers.status.value_counts().items()},
    checked=bool(ok.checked.astype(bool).all()), gpu=e.gpu_name, cudnn=e.cudnn_backend,
    frontend=e.cudnn_frontend,
)))
"""


def run(name: str, cache: str, how: dict) -> dict:
    env = dict(
        os.environ,
        LABKIT_CACHE=cache,
        LABKIT_MODE="live",
        LABKIT_PREFETCH="0",
        PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, name, json.dumps(how)], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"{name}: the report process failed:\n{proc.stderr[-3000:]}", file=sys.stderr, flush=True)
        return dict(
            model=name,
            **how,
            complete=False,
            process_seconds=round(wall, 2),
            error=(proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1][:300],
        )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    goal = GOALS[out["kind"]]
    row = dict(
        model=name,
        **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()},
        process_seconds=round(wall, 2),
        goal_seconds=goal,
    )
    row["seconds_vs_goal"] = round(out["seconds"] / goal, 3)
    row["meets_goal"] = bool(out["complete"] and out["seconds"] <= goal)
    print(f"{name}: {row['seconds']:.1f} s, {row['layers']} layers, cut {row['cut_plans']} plans", flush=True)
    return row


def merged(df, path: Path):
    """``df``'s rows, then the rows of ``path`` (if any) whose `ROW_KEY` ``df`` lacks (rows written
    before the key's dtype, layout and training columns existed were fp16 NHWC inference at 224x224)."""
    import pandas as pd

    if not path.exists():
        return df
    old = pd.read_csv(path, dtype={"labkit_commit": str})  # (a sha like 85378e6 is no number)
    for col, default in (("dtype", "fp16"), ("layout", "NHWC"), ("training", False), ("image", 224)):
        old[col] = old[col].fillna(default) if col in old.columns else default
    key = lambda frame: frame[list(ROW_KEY)].astype(str).agg("|".join, axis=1)  # noqa: E731
    out = pd.concat([df, old[~key(old).isin(set(key(df)))]], ignore_index=True)
    return out.astype({"image": "Int64"}) if "image" in out.columns else out


def main(argv=None) -> int:
    import pandas as pd

    from labkit.env import gpu_slug

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument(
        "--unnamed", action="store_true", help=f"the networks nobody named instead: {','.join(UNNAMED)}"
    )
    p.add_argument(
        "--cache",
        help="the cache folder (default: a new temporary one); must hold no report of these networks",
    )
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--layout", default="NHWC")
    p.add_argument("--train", action="store_true", help="training: forward plus backward (dgrad, wgrad)")
    p.add_argument("--batch", type=int, help="default: 16 for a model, 32 for the resnet50 preset")
    p.add_argument("--image", type=int, default=224, help="a model's input height and width (pixels)")
    args = p.parse_args(argv)
    cache = args.cache or tempfile.mkdtemp(prefix="labkit-bench-models-")
    how = dict(dtype=args.dtype, layout=args.layout, training=args.train, batch=args.batch, image=args.image)
    models = UNNAMED if args.unnamed else args.models.split(",")
    rows = [run(name, cache, how) for name in models]
    df = pd.DataFrame(rows)
    df["date"] = datetime.date.today().isoformat()
    df["labkit_commit"] = os.environ.get("LABKIT_GIT_COMMIT", "")
    cols = [
        c
        for c in (
            "model",
            "kind",
            "batch",
            "dtype",
            "layout",
            "training",
            "hook_convs",
            "layers",
            "distinct",
            "complete",
            "seconds",
            "goal_seconds",
            "seconds_vs_goal",
            "meets_goal",
            "max_step_seconds",
            "step_budget_s",
            "cut_plans",
            "cut_layers",
            "slower_plans",
            "n_ok",
            "n_unsupported",
            "checked",
        )
        if c in df.columns
    ]
    print(df[cols].to_string(index=False))
    total = lambda col: int(df[col].fillna(0).sum()) if col in df.columns else 0  # noqa: E731
    print(
        f"sum of plans cut by a budget: {total('cut_plans')}; layers cut: {total('cut_layers')}; "
        f"plans left as over 6x slower after one eager call: {total('slower_plans')}"
    )
    gpu = next((g for g in df.get("gpu", []) if isinstance(g, str)), None)
    if gpu:
        path = ROOT / "data" / "bench" / f"report_models_{gpu_slug(gpu)}.csv"
        merged(df, path).to_csv(path, index=False)
        print(f"wrote {path} (cache {cache})")
    return 0 if df.get("complete", pd.Series([False])).all() else 1


if __name__ == "__main__":
    sys.exit(main())
