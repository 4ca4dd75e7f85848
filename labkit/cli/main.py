"""Command line: ``python -m labkit doctor | warm-kernels | fill | record | report NET | bench WHICH |
wrong-plans | class check | start | stop | gpus | server``.

Bad input is one line on stderr and exit code 2, before anything is measured; so is a command
that needs a live GPU on a machine without one.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

from .. import env, networks
from ..env import doctor
from ..errors import InvalidSpec, LabkitError
from ..gpu import kernel_warmup
from ..gpu.cudnn import build_pool
from ..spec import DTYPES, LAYOUTS
from ..store import localcache, plan_store, recordings
from . import class_run, classroom, wrong_plans
from .classroom import main_learner_server

#: the benchmarks that measure on a live GPU (``bench summary`` only reads data/bench)
GPU_BENCHES = ("strategies", "vs-torch")


def parser() -> argparse.ArgumentParser:
    """The ``python -m labkit`` argument parser (every command and option).

    Returns:
        The ``argparse.ArgumentParser``.
    """
    top = argparse.ArgumentParser(prog="python -m labkit", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="what this machine has, the mode and why, what to install to go live")
    sub.add_parser(
        "warm-kernels",
        help="compile the kernels the panels run, CuPy's into its kernel cache and cuDNN's "
        "runtime-compiled plans into labkit's plan store (make setup runs it; a GPU's first visit "
        "then compiles none of the lessons' shapes); nothing without a live GPU",
    )
    fill = sub.add_parser(
        "fill",
        help="GPU: measure every lesson's values on this GPU into its own recording (the cache "
        "live panels read first); resumable, Ctrl-C keeps what was measured",
    )
    fill.add_argument("--quick", action="store_true", help="the lessons' base calls only")
    fill.add_argument(
        "--only", action="append", metavar="EXPERIMENT", help="only this experiment (repeatable)"
    )
    fill.add_argument(
        "--into",
        metavar="DIR",
        help="fill a class's shared recording in DIR instead (learners set "
        "LABKIT_SHARED_CACHE=DIR and read it)",
    )
    klass = sub.add_parser("class", help="a class on JupyterHub (class/jupyterhub_config.py starts it)")
    klass_sub = klass.add_subparsers(dest="class_command", required=True)
    server = klass_sub.add_parser(
        "server",
        help="what JupyterHub starts for each learner: copies the lessons, warms CuPy's kernels "
        "once, then runs jupyterhub-singleuser with the arguments that follow",
    )
    server.add_argument("args", nargs="*", help="jupyterhub-singleuser's arguments")
    gpus = klass_sub.add_parser("gpus", help="who holds which GPU of this host, and since when")
    check = klass_sub.add_parser(
        "check", help="check the settings and everything a learner's server needs; start nothing"
    )
    start = klass_sub.add_parser(
        "start",
        help="check everything, then start the class's JupyterHub in the background and print the "
        "address to hand out (as root: an account per learner; make hub runs it)",
    )
    start.add_argument("--foreground", action="store_true", help="run the hub in this terminal instead")
    stop = klass_sub.add_parser("stop", help="stop the class's hub and every learner's server")
    for each in (gpus, check, start, stop):
        each.add_argument("--dir", help="the class folder (default LABKIT_CLASS_DIR or /srv/labkit-class)")
    rec = sub.add_parser("record", help="GPU: record every experiment's lesson grid on this GPU")
    rec.add_argument("--quick", action="store_true", help="the lessons' base calls only")
    rec.add_argument(
        "--only", action="append", metavar="EXPERIMENT", help="record only this experiment (repeatable)"
    )
    rec.add_argument("--out", help="folder (default data/recordings/<gpu-slug>)")
    rec.add_argument("--force", action="store_true", help="delete an existing recording there first")
    rep = sub.add_parser(
        "report",
        help="a network's workspace report: every conv layer under every strategy, "
        "memory timeline, budget curve; CSV tables and a self-contained HTML",
    )
    rep.add_argument(
        "net",
        help="a preset (resnet50, resnext50_32x4d, mobilenet_v2, convnext_tiny, vgg16, "
        "deeplabv3_aspp) or module:callable returning a torch nn.Module "
        "(e.g. torchvision.models:mobilenet_v3_large, with --input-shape; live only)",
    )
    rep.add_argument(
        "--input-shape", help="a model's example input, e.g. 16,3,224,224 (its batch is the first number)"
    )
    rep.add_argument(
        "--batch",
        type=int,
        default=None,
        help="images per batch (a preset's default: 32; a model's: the first number of --input-shape)",
    )
    rep.add_argument(
        "--dtype", default="fp16", help="fp32, tf32, fp16, bf16 or fp8_e4m3, any case (default fp16)"
    )
    rep.add_argument("--layout", default="NHWC", help="NCHW or NHWC, any case (default NHWC)")
    rep.add_argument("--image", type=int, default=None, help="a preset's image size in pixels (default 224)")
    rep.add_argument(
        "--training",
        "--train",
        dest="training",
        action="store_true",
        help="forward and backward (dgrad, wgrad) of every layer (the API's training=True)",
    )
    rep.add_argument(
        "--force", action="store_true", help="measure again even if this GPU has the report saved"
    )
    rep.add_argument("--out", required=True, help="folder for the CSV tables, report.json and report.html")
    rep.add_argument(
        "--checklist",
        action="store_true",
        help="also the performance checklist: each item measured for this network, its gain and its "
        "cost (checklist.html, checklist.csv)",
    )
    rep.add_argument(
        "--production-batch",
        type=int,
        default=None,
        help="with --checklist: the batch the network will run at in production (default 128)",
    )
    rep.add_argument(
        "--target-gpu",
        default=None,
        help="with --checklist: a shipped recording (h100-sxm, h200) whose GPU's memory the checklist "
        "also compares with (default: another GPU than this one's)",
    )
    bench = sub.add_parser(
        "bench",
        help="benchmarks (strategies, vs-torch: GPU; a table with ratios against a same-run baseline) "
        "and summary (docs/benchmarks.md from data/bench/*.csv)",
    )
    bench.add_argument("which", choices=[*GPU_BENCHES, "sim-fidelity", "summary"])
    bench.add_argument(
        "--name",
        help="strategies, vs-torch: output name under data/bench (default <which>_<gpu slug>, e.g. "
        "vs_torch_h100-80gb-hbm3 on an NVIDIA H100 80GB HBM3)",
    )
    bench.add_argument("--out", help="summary: the file to write (default docs/benchmarks.md)")
    bench.add_argument(
        "--seconds",
        type=float,
        default=520.0,
        help="vs-torch: the run's budget in seconds; convolutions not reached are rows 'cut: ...'",
    )
    bench.add_argument("--only", type=int, help="vs-torch: only the first N convolutions (a quick look)")
    bench.add_argument(
        "--dry-run",
        action="store_true",
        help="sim-fidelity: the simulated half only (no GPU needed), nothing written",
    )
    bench.add_argument(
        "--calibrate",
        action="store_true",
        help="sim-fidelity: first time the device seam's calls on this GPU (data/bench/sim_costs_<gpu>.csv)",
    )
    bench.add_argument(
        "--recording", help="sim-fidelity: the shipped recording to simulate (default this GPU's)"
    )
    bench.add_argument(
        "--passes",
        type=int,
        default=5,
        help="sim-fidelity: timed passes per configuration (the median is kept)",
    )
    bench.add_argument(
        "--resimulate",
        metavar="CSV",
        help="sim-fidelity: run the simulated half of a committed table again beside its live half (no GPU)",
    )

    wrong_plans.add_parser(sub)
    return top


def main(argv=None) -> int:
    """Run one ``python -m labkit`` command.

    Args:
        argv: the command line after ``labkit``; default ``sys.argv[1:]``.

    Returns:
        The exit code: 0, 2 for bad input or a missing GPU (a one-line error), 130 when stopped.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["class", "server"]:  # every later word is jupyterhub-singleuser's, options included
        return main_learner_server(argv[2:])
    args = parser().parse_args(argv)

    try:
        return _run(args)
    except LabkitError as exc:
        for line in getattr(exc, "lines", None) or [str(exc)]:  # BadSettings: one line per mistake
            text = " ".join(str(line).split())
            print(f"labkit: {type(exc).__name__}: {text}", file=sys.stderr)
        return 2


def _run(args) -> int:
    if args.command == "doctor":
        print(doctor())
        print(recordings.describe_available())
        print(localcache.describe())
        print(plan_store.describe())
        return 0
    if args.command == "warm-kernels":
        return main_warm_kernels()
    if args.command == "fill":
        from .record import main_fill  # heavy: plotly, where a chart is drawn

        return main_fill(args)
    if args.command == "report":
        from ..present.netreport import main_report  # heavy: plotly, where a chart is drawn

        return main_report(args)
    if args.command == "record":
        from .record import main_record  # heavy: plotly, where a chart is drawn

        return main_record(args)
    if args.command == "class":
        if args.class_command == "start":
            return class_run.main_start(args.dir, foreground=args.foreground)
        if args.class_command in ("check", "stop"):
            return getattr(class_run, f"main_{args.class_command}")(args.dir)
        return classroom.main_gpus(args.dir)
    if args.command == "wrong-plans":
        return wrong_plans.main(args)
    return main_bench(args)


def main_bench(args) -> int:
    """``bench WHICH``: a GPU benchmark (live mode checked first), or the summary of data/bench.

    Args:
        args: the parsed command line.

    Returns:
        The exit code.
    """
    if args.which == "summary":
        if args.name:
            raise InvalidSpec("--name", args.name, "names a GPU benchmark's output; summary takes --out")
        from . import bench_summary  # heavy: pandas, off the light path

        path = bench_summary.write(args.out)
        print(f"wrote {path}")
        return 0
    if args.out:
        raise InvalidSpec("--out", args.out, f"is for bench summary; bench {args.which} writes data/bench/")
    if args.which != "sim-fidelity" and (args.dry_run or args.calibrate or args.recording or args.resimulate):
        raise InvalidSpec(
            "--dry-run/--calibrate/--recording/--resimulate", args.which, "are options of bench sim-fidelity"
        )
    if args.which == "sim-fidelity":
        from . import sim_fidelity  # heavy: plotly, where a chart is drawn

        if (args.dry_run or args.resimulate) and args.calibrate:
            raise InvalidSpec("--calibrate", True, "measures on a GPU; a dry run measures nothing")
        if args.resimulate:
            if not Path(args.resimulate).is_file():
                raise InvalidSpec("--resimulate", args.resimulate, "must be a sim_fidelity_<gpu>.csv file")
            sim_fidelity.resimulate(args.resimulate)
            return 0
        if not args.dry_run:
            env.require_live("bench sim-fidelity (--dry-run runs the simulated half on any machine)")
        sim_fidelity.run(
            dry_run=args.dry_run,
            recording=args.recording,
            passes=args.passes,
            name=args.name,
            calibrate=args.calibrate,
        )
        return 0
    if args.only is not None and args.only < 1:
        raise InvalidSpec("--only", args.only, "must be an int >= 1")
    if not args.seconds > 0:
        raise InvalidSpec("--seconds", args.seconds, "must be > 0")

    env.require_live(f"bench {args.which}")
    from . import bench as b  # heavy: pandas, off the light path

    if args.which == "strategies":
        b.strategies(name=args.name or b.default_name("strategies"))
    else:
        from . import vs_torch  # heavy: pandas, off the light path

        b.require_torch()
        vs_torch.run(args.name or b.default_name("vs_torch"), seconds=args.seconds, only=args.only)
    return 0


def lesson_shapes():
    """The shapes a first visit reaches with one move of a shape control from the lessons' base.

    Returns:
        `labkit.experiments.core.variants` (each recorded value, C with K and H with W, as recorded
        mode moves them), then each value moving one control alone (N, C, K, H or W), as live mode
        moves them; the base left out.
    """
    from ..experiments.core import BASE, SWEEPS, variants  # heavy: plotly, where a chart is drawn

    out = variants(BASE)[1:]
    for field, values in SWEEPS.items():
        for name in field.split("="):
            for v in values:
                shape = BASE.replace(**{name: v})
                if shape != BASE and shape not in out:
                    out.append(shape)
    return out


def first_visit_graphs():
    """The graphs whose run-time compiled plans ``warm-kernels`` builds: what a first visit builds.

    Returns:
        (label, [(convolution, epilogue), ...]) groups: the lessons' base convolution in each dtype
        (every layout and direction, and the fused epilogues of fprop), then each shape of
        `lesson_shapes` in every dtype, layout and direction (the fused epilogues in the dtypes
        lesson 04 fuses), then lesson 09's reports (`labkit.experiments.network_report`'s defaults,
        and VGG-16, which its panel opens on) in every dtype and both layouts.
    """
    from ..experiments import FUSION_DTYPES, network_report  # heavy: plotly, where a chart is drawn
    from ..experiments.core import BASE  # heavy: plotly, where a chart is drawn

    def every_variant(shape, dtypes=DTYPES, fused=DTYPES):
        graphs = []
        for dtype in dtypes:
            for layout in LAYOUTS:
                for direction in ("fprop", "dgrad", "wgrad"):
                    try:
                        spec = shape.replace(dtype=dtype, layout=layout, direction=direction)
                    except LabkitError:
                        continue
                    graphs.append((spec, "none"))
                if dtype in fused:
                    graphs += [
                        (shape.replace(dtype=dtype, layout=layout), ep)
                        for ep in ("bias_relu", "bias_relu_add")
                    ]
        return graphs

    groups = [(f"cuDNN's compiled plans, {dtype}", every_variant(BASE, (dtype,))) for dtype in DTYPES]
    for shape in lesson_shapes():
        moved = ", ".join(
            f"{f}={getattr(shape, f)}"
            for f in ("N", "C", "K", "H", "W")
            if getattr(shape, f) != getattr(BASE, f)
        )
        groups.append((f"cuDNN's compiled plans, {moved}", every_variant(shape, fused=FUSION_DTYPES)))
    report = {k: p.default for k, p in inspect.signature(network_report).parameters.items()}
    for net in dict.fromkeys((report["net"], "vgg16")):
        graphs = []
        first = (report["dtype"], report["layout"])  # the report a first visit opens on, then its variants
        others = [(d, report["layout"]) for d in DTYPES if d != report["dtype"]] + [(report["dtype"], "NCHW")]
        for dtype, layout in [first] + others:
            layers = networks.layers_of(
                net, batch=report["batch"], dtype=dtype, layout=layout, image=report["image"]
            )
            graphs += [(g.spec, "none") for g in networks.unique(layers)]
        groups.append((f"cuDNN's compiled plans, {net} (lesson 09)", graphs))
    return groups


def _plan_folder() -> str:
    """Where this machine's saved and compiled plans are (`labkit.store.plan_store`), or why none."""
    try:
        store = plan_store.current()
    except LabkitError as exc:
        return f"not kept ({exc})"
    return "not kept (LABKIT_SAVED_PLANS=0)" if store is None else str(store.path)


def main_warm_kernels() -> int:
    """``warm-kernels``: `labkit.gpu.kernel_warmup.compile_ahead` on a live GPU.

    Without one it says why, and exits 0: nothing to do is not an error.

    Returns:
        The exit code.
    """
    m = env.mode()
    if not m.live:
        print(f"labkit warm-kernels: nothing to compile (recorded mode: {m.reason})")
        return 0

    t0 = time.perf_counter()
    in_class = build_pool.in_class()  # a class's panels read its recording: few graphs are built
    done = kernel_warmup.compile_ahead(cudnn_groups=() if in_class else first_visit_graphs())
    failed = {k: v for k, v in done.items() if not isinstance(v, float)}
    cupy_cache = os.environ.get("CUPY_CACHE_DIR") or "~/.cupy/kernel_cache"
    jit_cache = os.environ.get("CUDA_CACHE_PATH") or "~/.nv/ComputeCache"
    plans = (
        "" if in_class else f"; cuDNN's compiled plans: {_plan_folder()} and CUDA's JIT cache, {jit_cache}"
    )
    print(
        f"labkit warm-kernels: {len(done) - len(failed)} of {len(done)} tasks in "
        f"{time.perf_counter() - t0:.1f} s; CuPy's kernel cache: {cupy_cache}{plans}"
    )
    for label, why in failed.items():
        print(f"  {label}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
