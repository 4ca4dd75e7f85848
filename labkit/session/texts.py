"""What a lesson says about where its numbers come from, and its other texts: the mode banner
(the GPU, cuDNN and date of every experiment the lesson draws), the mode note, the lesson list and
the labkit source a lesson shows.
"""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path
from typing import Optional, Sequence

from .. import env
from ..draw.prose import Text
from ..errors import InvalidSpec
from ..gpu.cudnn import build_pool
from ..gpu.host import isolated
from ..gpu.host.spread import given_text as class_gpu_text
from ..store import recordings
from . import handson, warmup

LESSONS = (
    ("00_start_here", "What is on this machine, which mode am I in, how do the panels work?"),
    ("01_what_is_a_workspace", "What is a workspace, who asks for it, how big is it, what does it buy?"),
    ("02_workspace_strategies", "The workspace strategies side by side: time, peak memory, allocations."),
    (
        "03_precision_and_layout",
        "fp32 / tf32 / fp16 / bf16 / fp8 and NCHW / NHWC: error, speed, workspace, roofline.",
    ),
    ("04_fusion", "Convolution + bias + activation as one graph: what fusion saves."),
    (
        "05_plans_autotune_and_caching",
        "Many plans per problem: autotuning them, capping workspace, caching the build.",
    ),
    ("06_streams_and_scratchpads", "Several streams, one workspace: races, and a scratchpad per stream."),
    ("07_lab", "Open lab: your own convolution, every chart, every control, CSV export."),
    (
        "08_same_conv_other_gpu",
        "The same convolutions on another GPU: what changes with more memory bandwidth, and why.",
    ),
    (
        "09_your_network",
        "Your network: every conv layer under every strategy, the memory timeline, a workspace budget.",
    ),
    (
        "10_under_the_hood",
        "Under the hood: the kernels each plan launches, each strategy's GPU timeline, cuDNN's own log.",
    ),
    (
        "11_pytorch_knobs",
        "PyTorch's switches for cuDNN, measured: cudnn.benchmark, TF32, channels_last, autocast, caps.",
    ),
)


#: lesson -> the experiments its charts, panels and checks draw (the banner names where each was
#: measured; tests/test_provenance.py checks every notebook against this table)
DRAWS = {
    "00": ("layout", "kernels", "precision"),
    "01": ("algorithms", "workspace_sizes", "sweep", "kernels"),
    "02": ("strategies", "workspace_sizes"),
    "03": ("precision", "plans", "kernels", "layout", "roofline"),
    "04": ("fusion", "fusion_kernels"),
    "05": ("plans", "caps", "build_cost"),
    "06": ("race",),
    "07": (
        "plans",
        "precision",
        "layout",
        "fusion",
        "caps",
        "algorithms",
        "build_cost",
        "workspace_sizes",
    ),
    "08": ("roofline", "fusion", "sweep", "plans", "precision"),
    "09": ("network_report",),
    "10": ("kernels", "fusion_kernels", "strategy_timeline", "race_timeline", "build_log"),
    "11": ("torch_knobs",),
}


def banner(lesson: Optional[str] = None) -> Text:
    """Which mode labkit is in and where this lesson's numbers come from.

    Args:
        lesson: the lesson's number (``"03"``); recorded, the banner then names the GPU, cuDNN
            and the date of every experiment the lesson draws (`DRAWS`), and any that another
            GPU's recording answers.

    Returns:
        Markdown text, e.g. "Mode: recorded. This lesson's numbers were measured on NVIDIA
        H100 80GB HBM3 with cuDNN 9.19.0 ...: precision on 2026-11-22 ...".
    """
    if lesson is not None and lesson not in DRAWS:
        raise InvalidSpec("lesson", lesson, f"must be one of {', '.join(DRAWS)}")
    m = env.mode()  # (imports CuPy and the cuDNN frontend, initialises CUDA): alone, nothing competes
    handson.register_magic()  # %%handson cells (labkit.session.handson)
    if m.live:
        e = env.environment()
        workers = start_build_workers()
        start_report_worker(lesson)
        helpers = (
            f" {workers} worker processes are starting in the background: they compile the plans cuDNN "
            "builds at run time, in parallel, while this kernel times on the GPU."
            if workers
            else ""
        )
        text = Text(
            f"**Mode: live on {env.gpu_label(e.gpu_name)}** (cuDNN {e.cudnn_backend}, "
            f"frontend {e.cudnn_frontend}, "
            f"CuPy {e.cupy_version}). Every chart is measured on this GPU when it is drawn.{helpers}"
            f"{class_gpu_text()}"
        )
    else:
        text = Text(
            f"**Mode: recorded.** {recorded_sources(lesson)} Why not live: {m.reason}.{class_gpu_text()}"
        )
    # last, so that nothing of it competes with this cell: the first chart's imports while the
    # learner reads; live, the GPU's set-up too
    warmup.start(m.live)
    return text


def recorded_sources(lesson: Optional[str] = None) -> str:
    """Recorded mode: where a lesson's numbers come from, one sentence per recording (GPU, cuDNN,
    the date of each experiment); for no lesson, the recording in use.

    Args:
        lesson: the lesson's number, a key of `DRAWS`, or None.

    Returns:
        Markdown sentences.
    """
    rec = recordings.current()
    if lesson is None:
        md = rec.metadata
        return (
            f"Numbers come from the recording made on **{env.gpu_label(md.get('gpu'))}** with cuDNN "
            f"{md.get('cudnn_backend')} (frontend {md.get('cudnn_frontend')}, CuPy {md.get('cupy')}), last "
            f"updated {md.get('date')}; each chart gives the date it was measured. Controls offer only "
            "recorded values."
        )
    if lesson == "08":
        shipped = recordings.shipped()
        dated = "; ".join(_dated(r, DRAWS[lesson]) for r in shipped)
        return (
            f"This lesson compares {len(shipped)} recordings side by side ({dated}). Controls offer only "
            "recorded values."
        )
    own, other, absent = [], {}, []
    for name in DRAWS[lesson]:
        if name in rec.experiments():
            own.append(name)
        panel = recordings.for_experiment(name)
        if name not in panel.experiments():
            absent.append(name)
        elif panel.path != rec.path or name not in rec.experiments():
            other.setdefault(panel.path, (panel, []))[1].append(name)
    parts = []
    if own:
        parts.append(f"This lesson's numbers were measured on {_dated(rec, own)}.")
    for r, names in other.values():
        missing = [n for n in names if n not in rec.experiments()]
        if missing:
            parts.append(
                f"{_joined(missing)} come{'s' if len(missing) == 1 else ''} from another GPU's recording, "
                f"{_dated(r, names)}: the {_short(rec)} recording has none."
            )
        else:
            parts.append(
                f"The {_joined(names)} panel answers from {_dated(r, names)}, which holds more of its calls; "
                "its GPU list offers both."
            )
    if absent:
        parts.append(f"This recording has no {_joined(absent)}: pick another GPU's recording to see them.")
    return " ".join(parts) + " Controls offer only recorded values."


def _joined(names) -> str:
    """``a``, ``a and b``, ``a, b and c`` (names in code style)."""
    names = [f"`{n}`" for n in names]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _short(rec) -> str:
    return env.gpu_label(rec.metadata.get("gpu"))


def _dated(rec, names) -> str:
    """``**GPU** with cuDNN x (frontend y, CuPy z): a and b on <date>, c on <date>``."""
    md = rec.metadata
    by_date: dict = {}
    for n in names:
        if n in rec.experiments():
            by_date.setdefault(rec.provenance(n)["date"], []).append(n)
    when = ", ".join(f"{_joined(ns)} on {d}" for d, ns in sorted(by_date.items()))
    return (
        f"**{env.gpu_label(md.get('gpu'))}** with cuDNN {md.get('cudnn_backend')} "
        f"(frontend {md.get('cudnn_frontend')}, "
        f"CuPy {md.get('cupy')}): {when}"
    )


def start_build_workers() -> int:
    """Live: start the worker processes that build runtime-compiled plans (`labkit.gpu.cudnn.builds`), at
    once.

    They start in the background, so they are ready when the first chart needs them. In a class the
    class's shared recording answers most panels: the workers start with the first plan a learner's
    own measurement builds (`labkit.gpu.cudnn.build_pool.in_class`).

    Returns:
        How many; 0 in recorded mode, with ``LABKIT_BUILD_WORKERS=0``, or in a class.
    """

    if not env.mode().live:
        return 0

    if build_pool.in_class():
        return 0
    pool = build_pool.start_workers()
    return pool.size if pool is not None else 0


#: the step that warms the network report's worker process, and the module of the steps it runs
#: next (names: importing the report here would import its charts into the first cell)
REPORT_WARM_STEP = "labkit.gpu.worker_warmup:warm"
REPORT_STEPS = "labkit.gpu.report_steps"


def start_report_worker(lesson: Optional[str]) -> bool:
    """Live, in a lesson that draws the network report: start the report's worker process
    (`labkit.gpu.host.isolated`) in the background and warm it (`REPORT_WARM_STEP`: labkit's measuring
    modules, CUDA and cuDNN, and the worker's own build workers), so that the first report does not
    wait for them; at once.

    Not in a class (its shared recording answers the report's defaults) nor with
    ``LABKIT_ISOLATE=0`` (no worker).

    Args:
        lesson: the lesson's number, or None.

    Returns:
        Whether it was started.
    """
    if lesson is None or "network_report" not in DRAWS.get(lesson, ()):
        return False

    if build_pool.in_class() or not isolated.isolation_on():
        return False
    isolated.worker().start_soon(REPORT_WARM_STEP, ((), REPORT_STEPS))
    return True


def warm_report_worker(specs: Sequence = ()) -> bool:
    """Start the report's worker process early for one report call (``labkit.report``): ask
    `labkit.env.mode` (the probe: CuPy, cuDNN, CUDA's driver) here, and, live, start and warm the
    worker in the background as `start_report_worker` does, before the caller loads the report's own
    modules. The probe is asked first, not beside those imports: they would share the interpreter
    with it and hold the worker's start back. A worker already running (lesson 09's banner warmed
    it) gets the same step when there are convolutions to plan: it plans the report's graphs and
    queues their compiles while the caller loads those modules (about 0.6 s for ResNet-50's 23
    distinct convolutions on the H200); what it warmed already is kept.

    Not in a class (its shared recording answers the report's defaults), nor with
    ``LABKIT_ISOLATE=0`` (no worker), nor with ``LABKIT_MODE=recorded``.

    Args:
        specs: the convolutions of the report (`labkit.spec.ConvSpec`), whose plan builds the warm
            step queues at once (`labkit.gpu.worker_warmup.warm`).

    Returns:
        Whether the worker runs or was started: live, and none of the above.
    """
    forced = os.environ.get("LABKIT_MODE", "").strip().lower()
    if build_pool.in_class() or not isolated.isolation_on() or forced == "recorded":
        return False
    try:
        if not env.mode().live:
            return False
        if specs or not isolated.worker().alive:  # a warm worker with nothing to plan has nothing to do
            isolated.worker().start_soon(REPORT_WARM_STEP, (tuple(specs), REPORT_STEPS))
    except Exception:  # noqa: BLE001  (an optimisation: the report asks again and says why)
        return False
    return True


def mode_note(full: bool = False) -> Text:
    """What recorded and live mode mean for the panels below.

    Args:
        full: the whole note (lesson 00, where a learner meets the panels); otherwise one line
            that points there.

    Returns:
        Markdown text.
    """
    if not full:
        return Text(
            "> **Panels**: recorded, a control offers only the values measured around the lesson's base, one "
            "factor at a time (*reset to base* to move another); live, every change measures on your GPU. "
            "[Lesson 00](00_start_here.ipynb) says more."
        )
    return Text(
        "> **Recorded or live?** The banner above says which. **Recorded**: every number comes from a real "
        "run on the GPU it names, and a control offers only the values recorded around the lesson's base "
        "(one factor at a time; *reset to base* to move another). **Live**: every chart is measured on your "
        "GPU when you move a control and saved in this GPU's own recording, so a value measured once (here, "
        "in another notebook or before a kernel restart) comes back at once, marked with when it was "
        "measured (*measure again* redoes it). A chart that needs many measurements fills in as they arrive, "
        "and moving a control again stops the one running. While you read, the panel measures the values one "
        "step away in the background (`LABKIT_PREFETCH=0` turns that off); `python -m labkit fill` measures "
        "every lesson's values ahead. The **GPU** picker of every panel switches to another GPU's recording "
        "(and back to this GPU, live)."
    )


def contents() -> Text:
    """The lesson list, with links.

    Returns:
        A Markdown table, as a `Text`.
    """
    rows = ["| notebook | question |", "| --- | --- |"]
    rows += [f"| [{n}]({n}.ipynb) | {q} |" for n, q in LESSONS]
    return Text("\n".join(rows))


def show_source(module: str, *names: str) -> Text:
    """The source of functions, classes or methods in a labkit module, read from its file (the
    module is not imported, so this works without CuPy), folded: a line naming the file, the
    definitions and their length, which a click opens onto the highlighted code. The learner's
    own code is what a lesson shows open.

    Args:
        module: the module, e.g. ``"gpu.cudnn.frontend"`` or ``"keys"`` (a file in labkit/, its
            dotted path below labkit/, or a file in one of labkit's folders).
        names: top-level names (``"time_plan"``) or ``"Class.method"``.

    Returns:
        Markdown text: an HTML ``<details>`` whose ``<summary>`` is that line and whose body is
        one Python code block holding each definition, in the order asked (static renderers that
        ignore ``<details>`` show the code open).
    """
    here = Path(__file__).resolve().parents[1]  # labkit/
    rel = module.replace(".", "/")
    path = next((p for p in [here / f"{rel}.py", *sorted(here.glob(f"*/{rel}.py"))] if p.is_file()), None)
    if path is None:
        raise InvalidSpec(
            "module",
            module,
            "must name a file in labkit/ or one of its folders (e.g. 'keys', 'gpu.workspaces.workspace')",
        )
    src = path.read_text()
    tree = ast.parse(src)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    found = {}
    for node in tree.body:
        if isinstance(node, defs):
            found[node.name] = ast.get_source_segment(src, node, padded=True)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, defs):
                        found[f"{node.name}.{sub.name}"] = textwrap.dedent(
                            ast.get_source_segment(src, sub, padded=True)
                        )
    missing = [n for n in names if n not in found]
    if missing:
        raise InvalidSpec("names", missing, f"not defined in {path.relative_to(here.parent)}")
    code = "\n\n".join(found[n].rstrip() for n in names)
    rel_path = path.relative_to(here.parent).as_posix()
    what = ", ".join(f"<code>{n}</code>" for n in names)
    lines = len(code.splitlines())
    return Text(
        f"<details><summary>{what} in <code>{rel_path}</code>, {lines} lines</summary>\n"
        f"\n```python\n{code}\n```\n\n</details>"
    )
