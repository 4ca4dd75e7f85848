"""``labkit.report(net, batch=..., dtype=..., layout=..., training=False)``: a workspace report for
a whole network (lesson 09, ``python -m labkit report``).

``net``: a preset name (`labkit.networks.PRESETS`), a list of `ConvSpec` (or `Layer`), or a
PyTorch ``nn.Module`` with ``input_shape=`` (its Conv2d calls read with forward hooks; Conv1d,
Conv3d and transposed convolutions are listed in ``Report.skipped`` with the reason). The
measuring is `labkit.experiments.network_report`; like every experiment it is answered from this
GPU's own recording when it was measured before (also after a kernel restart), and in recorded
mode from the shipped recordings (presets at batch 32, fp16, NHWC). Bytes; microseconds.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Tuple

from tqdm.auto import tqdm

from .. import env, experiments, networks
from ..draw.plots import fmt_bytes
from ..draw.prose import counted
from ..env import gpu_label
from ..errors import InvalidSpec, RecordedDataError
from ..experiments.your_network import (
    REPORT_STRATEGIES,
    TABLES,
    check_production_batch,
    cut_counts,
    network_report_chart,
    network_report_summary,
    over_cap_rows,
    table_of,
    whole_numbers,
)
from ..gpu.timing.stops import eager_stop_text
from ..session import lessons
from ..signals import progress
from ..spec import dtype_name, layout_name
from ..store import recordings
from .checklist import checklist_of


@dataclass
class Report:
    """A network's workspace report.

    Its DataFrames: ``layers`` (one row per convolution call, in order: ResNet-50 inference has 53),
    ``strategies`` (one row per strategy), ``timeline`` (workspace held during each call, per
    strategy), ``budget`` (pass time per workspace cap), ``plans`` (every plan timed, per distinct
    spec). ``provenance``: where the numbers come from. ``complete``: every call measured.

    Attributes:
        frame: `network_report`'s long DataFrame.
        network: the network's name.
        skipped: convolution modules left out, with the reason.
    """

    frame: object = field(repr=False)
    network: str = ""
    skipped: Tuple[networks.Skipped, ...] = ()

    def _table(self, name: str):
        return whole_numbers(table_of(self.frame, name))

    def show(self, name: str, columns: Optional[Sequence[str]] = None, head: Optional[int] = None):
        """One table made for reading: bytes as B/KiB/MiB, times to 0.1 us, ratios to 3 digits,
        no index, headers that may break after an underscore (so it fits the notebook). The numbers
        stay exact in the DataFrame (``rep.layers`` etc.).

        Args:
            name: one of ``layers``, ``strategies``, ``timeline``, ``budget``, ``plans``.
            columns: the columns to show (default: `SHOWN`'s for the table).
            head: show only the first ``head`` rows.

        Returns:
            A pandas ``Styler`` (its DataFrame is ``.data``).
        """
        table = self._table(name)
        columns = list(columns or SHOWN.get(name) or table.columns)
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise InvalidSpec(
                "columns", missing, f"must be columns of rep.{name}: {', '.join(table.columns)}"
            )
        return readable(table[columns].head(head) if head else table[columns])

    def over_cap(self, cap: int):
        """The calls whose fastest plan needs more workspace than a cap, each with its fastest plan
        that fits: what the budget curve counts for that call at that cap. Made for reading, as `show`.

        Args:
            cap: the workspace cap, in bytes (``4 * 2**20`` for 4 MiB).

        Returns:
            A pandas ``Styler`` (its DataFrame, every number exact, is ``.data``): one row per such
            call, in the pass's order (none when every fastest plan fits).
        """
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise InvalidSpec("cap", cap, "must be a whole number of bytes, 0 or more (4 * 2**20 for 4 MiB)")
        return readable(whole_numbers(over_cap_rows(self.layers, self.plans, cap)))

    layers = property(lambda self: self._table("layers"), doc="one row per convolution call, in order")
    strategies = property(lambda self: self._table("strategies"), doc="one row per workspace strategy")
    timeline = property(
        lambda self: self._table("timeline"), doc="workspace held during each call, per strategy"
    )
    budget = property(lambda self: self._table("budget"), doc="pass time per workspace cap")
    plans = property(lambda self: self._table("plans"), doc="every plan timed, per distinct spec")

    @property
    def provenance(self) -> dict:
        keys = (
            "mode",
            "gpu",
            "compute_capability",
            "cudnn_backend",
            "cudnn_frontend",
            "cupy",
            "date",
            "source",
            "measured_at",
            "saved_in",
            "recording",
        )
        return {k: self.frame.attrs[k] for k in keys if k in self.frame.attrs}

    @property
    def cut(self) -> dict:
        """What the report did not measure to the end (`labkit.experiments.your_network.cut_counts`):
        ``plans`` a budget cut or timed out, ``slower_plans`` left as far slower than the best
        after one eager call, distinct ``layers`` whose step timed out, ``strategies`` that did
        not finish."""
        return cut_counts(self.frame)

    @property
    def complete(self) -> bool:
        """Every call measured, every strategy run and the budget curve made (an interrupted
        report is never complete)."""
        layers = self.layers
        return (
            bool(len(layers))
            and "pending" not in set(layers.get("status", []))
            and len(self.strategies) == len(REPORT_STRATEGIES)
            and len(self.budget) > 0
        )

    def figure(self):
        """The report's chart: per-call GPU time, the memory timeline per strategy, the budget curve.

        Returns:
            The ``go.Figure``.
        """
        return network_report_chart(self.frame)

    def summary(self):
        """What the report says, in a few sentences.

        Returns:
            Markdown, as a `Text`.
        """
        return network_report_summary(self.frame)

    def checklist(self, *, production_batch: Optional[int] = None, target_gpu: Optional[str] = None):
        """The performance checklist for this network: each item measured on this GPU (or read from
        the recording this report came from), with its gain and its cost.

        Args:
            production_batch: the batch the network will run at in production, in images (None:
                128, the one the recordings hold).
            target_gpu: a shipped recording (``"h200"``) whose GPU's memory the memory item also
                compares with (None: another GPU than this one's).

        Returns:
            A `labkit.present.checklist.Checklist`: ``.table``, ``.chart()``, ``.sentences()``.
        """
        return checklist_of(self.frame, production_batch, target_gpu)

    def _repr_markdown_(self) -> str:
        return (
            f"**Workspace report: {self.network}** ({'complete' if self.complete else 'incomplete'})\n\n"
            + self.summary()
        )

    def write(self, out) -> Path:
        """Write the report into a folder: its tables as CSV, ``report.json`` and ``report.html``.

        ``report.json`` holds the provenance, request, skipped modules and completeness; ``report.html``
        is self-contained (the chart and the tables).

        Args:
            out: the folder (made if needed; checked first, `check_out`).

        Returns:
            The folder, as a Path.
        """
        out = check_out(out)
        out.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            self._table(name).to_csv(out / f"{name}.csv", index=False)  # whole numbers as integers
        meta = {
            "network": self.network,
            "complete": self.complete,
            "cut": self.cut,
            "request": self.frame.attrs.get("request"),
            "provenance": self.provenance,
            "skipped": [s.__dict__ for s in self.skipped],
        }
        (out / "report.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        fig = self.figure()
        tables = "".join(
            f"<h2>{name}</h2>" + self._table(name).to_html(index=False, float_format=lambda v: f"{v:.4g}")
            for name in ("strategies", "budget", "layers")
        )
        text = str(self.summary())
        chart = fig.to_html(full_html=False, include_plotlyjs=True)
        body = (
            f"<h1>Workspace report: {self.network}</h1>"
            f"<pre style='white-space:pre-wrap'>{html.escape(text, quote=False)}</pre>{chart}{tables}"
        )
        (out / "report.html").write_text(PAGE.format(title=f"Workspace report: {self.network}", body=body))
        return out


#: the HTML page a report or a checklist is written as: its ``title`` and its ``body`` (HTML)
PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body style='font-family:sans-serif;max-width:1200px;margin:auto'>{body}</body></html>"
)


def shape_cell(spec) -> str:
    """A spec's shape as a table cell: its tensors, then its filter (``32x3x224x224 -> 64 7x7 s2 p3``),
    the cell breaking only between the two (nothing else may wrap, not even after the arrow's hyphen).

    Args:
        spec: a `ConvSpec` label (``fp16 NHWC fprop 32x3x224x224 -> 64 7x7 s2 p3``).

    Returns:
        The shape, its unbreakable parts joined by a plain space.
    """
    shape = str(spec).split(" ", 3)[-1]
    tensors, arrow, rest = shape.partition(" -> ")
    if not arrow:
        return shape.replace(" ", "\u00a0")
    k, _, filt = rest.partition(" ")
    whole = f"{tensors}\u00a0-\u2060>\u00a0{k}"  # the word joiner: no break between - and >
    return f"{whole} {filt.replace(' ', chr(0xA0))}" if filt else whole


def readable(table):
    """A report table made for reading: bytes as B/KiB/MiB, times to 0.1 us, ratios to 3 digits,
    no index, headers that may break after an underscore (so it fits the notebook).

    Args:
        table: a table of the report (its columns named with their units).

    Returns:
        A pandas ``Styler`` (its DataFrame is ``.data``, unchanged).
    """
    columns = list(table.columns)
    formats = {}
    for c in columns:
        if c.endswith("_bytes"):
            formats[c] = lambda v: "" if v is None or v != v else fmt_bytes(v)
        elif c.endswith("_us"):
            formats[c] = "{:.1f}"
        elif c in ("slowdown", "max_rel_error"):
            formats[c] = "{:.3g}"
        elif c == "spec":
            formats[c] = shape_cell
    return (
        table.style.format(formats, na_rep="")
        .hide(axis="index")
        .relabel_index([c.replace("_", "_<wbr>") for c in columns], axis="columns")
    )


#: the columns `Report.show` gives a table by default
SHOWN = {
    "layers": (
        "layer",
        "spec",
        "count",
        "heuristic_gpu_us",
        "fastest_gpu_us",
        "fastest_workspace_bytes",
        "smallest_gpu_us",
        "smallest_workspace_bytes",
        "checked",
    ),
    "strategies": (
        "strategy",
        "pass_gpu_us",
        "pass_host_us",
        "peak_workspace_bytes",
        "held_after_bytes",
        "alloc_calls_first_pass",
        "alloc_calls_per_pass",
        "fallbacks_per_pass",
    ),
    "budget": (
        "cap_label",
        "pass_gpu_us",
        "slowdown",
        "calls_changing_plan",
        "calls_without_plan",
        "peak_workspace_bytes",
    ),
}
#: a preset's batch when none is given
PRESET_BATCH = 32
#: a preset's image size when none is given (pixels)
PRESET_IMAGE = 224


def check_out(out) -> Path:
    """The folder a report is written to, checked before anything is measured (nothing is left
    behind: the check writes and removes a temporary file or folder).

    Args:
        out: a folder that exists and is writable, or one that can be made there.

    Returns:
        ``out`` as a Path; `InvalidSpec` naming ``out`` when it is a file or cannot be written.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidSpec("out", str(out), "must be a folder (it is a file)")
    where = out if out.exists() else out.absolute().parent
    while not where.exists():
        where = where.parent
    if not where.is_dir():
        raise InvalidSpec("out", str(out), f"cannot be made: {where} is a file")
    try:
        probe = tempfile.mkdtemp(prefix=".labkit-write-check-", dir=where)
    except OSError as err:
        verb = "is a folder this user cannot write to" if out.exists() else f"cannot be made in {where}"
        raise InvalidSpec("out", str(out), f"{verb} ({err.strerror or err})") from None
    shutil.rmtree(probe, ignore_errors=True)
    return out


def recorded_settings(net: Optional[str] = None) -> str:
    """The network reports the shipped recordings hold, in words (what recorded mode answers).

    Args:
        net: only this preset's settings (None: every preset recorded).

    Returns:
        One line per setting, e.g. ``resnet50 batch 32, fp16, NHWC, inference, 224 px (h100-sxm, h200)``.
    """
    held: dict = {}
    for rec in recordings.shipped():
        if "network_report" not in rec.experiments():
            continue
        for r in rec.requests("network_report"):
            if not isinstance(r.get("net"), str) or (net is not None and r["net"] != net):
                continue
            words = (
                f"{r['net']} batch {r['batch']}, {r['dtype']}, {r['layout']}, "
                f"{'training' if r['training'] else 'inference'}, {r['image']} px"
            )
            held.setdefault(words, []).append(rec.name)
    return "; ".join(f"{w} ({', '.join(names)})" for w, names in held.items()) or "none"


def request_for(
    net,
    batch: Optional[int] = None,
    dtype: Optional[str] = "fp16",
    layout: Optional[str] = "NHWC",
    training: bool = False,
    image=None,
    input_shape=None,
) -> Tuple[dict, str, tuple]:
    """The `network_report` arguments for a network, checked before anything is measured.

    Args:
        net: a preset name, ``"module:callable"``, a torch ``nn.Module`` or a list of `ConvSpec`.
        batch: images per batch; None: `PRESET_BATCH` for a preset, the example input's first
            dimension for a model, each spec's own for a list.
        dtype: any case (``"FP16"`` is ``"fp16"``).
        layout: any case.
        training: forward plus backward (dgrad, wgrad).
        image: a preset's image size in pixels (None: `PRESET_IMAGE`); a model's size is its input.
        input_shape: a model's example input (N, C, H, W); only for a model.

    Returns:
        (the arguments, the network's name, its skipped modules); `InvalidSpec` for bad input.
    """
    if not isinstance(training, bool):
        raise InvalidSpec("training", training, "must be True or False")
    dtype = None if dtype is None else dtype_name(dtype)
    layout = None if layout is None else layout_name(layout)
    if isinstance(net, str) and networks.is_model_path(net):
        if image is not None:
            raise InvalidSpec("image", image, "is a preset's image size; a model's is its input_shape")
        net = networks.model_from_path(net)
    if isinstance(net, str):
        if input_shape is not None:
            raise InvalidSpec(
                "input_shape", input_shape, "is a model's example input; a preset takes batch and image"
            )
        batch = PRESET_BATCH if batch is None else batch
        image = PRESET_IMAGE if image is None else image
        network = networks.layers_of(net, batch=batch, dtype=dtype, layout=layout, image=image)  # validates
        return (
            dict(net=network.name, batch=batch, dtype=dtype, layout=layout, training=training, image=image),
            network.name,
            (),
        )
    if image is not None:
        raise InvalidSpec("image", image, "is a preset's image size; a model's is its input_shape")
    network = networks.layers_of(net, batch=batch, dtype=dtype, layout=layout, input_shape=input_shape)
    if not len(network):
        why = "; ".join(f"{s.name} ({s.kind}): {s.reason}" for s in network.skipped[:5]) or "it has no Conv2d"
        raise InvalidSpec("net", network.name, f"has no Conv2d call to report on: {why}")
    pairs = [[lay.name, lay.spec] for lay in network.layers]  # batch, dtype and layout are in each spec now
    return (
        dict(net=pairs, batch=None, dtype=None, layout=None, training=training, image=PRESET_IMAGE),
        network.name,
        network.skipped,
    )


def check_recorded(kwargs: dict, recording: Optional[str] = None) -> None:
    """In recorded mode (or with ``recording`` named), a `RecordedDataError` naming the settings
    that exist when no shipped recording holds this report; nothing otherwise.

    Args:
        kwargs: the `network_report` arguments (`request_for`).
        recording: the shipped recording asked for, if any.
    """
    if recording is None and env.mode().live:
        return
    request = experiments.request_of("network_report", **kwargs)
    recs = [recordings.named(recording)] if recording else recordings.shipped()
    if any(r.has("network_report", request) for r in recs):
        return
    net = kwargs["net"] if isinstance(kwargs["net"], str) else None
    if net is None:
        what = "a model's report is measured live, on a GPU"
    elif recording:
        what = f"this setting is not recorded in {recording}"
    else:
        what = "this setting is not recorded"
    raise RecordedDataError(f"network_report: {what}; recorded: {recorded_settings(net) or 'none'}")


def report(
    net,
    *,
    batch: Optional[int] = None,
    dtype: Optional[str] = "fp16",
    layout: Optional[str] = "NHWC",
    training: bool = False,
    image=None,
    input_shape=None,
    force: bool = False,
    recording: Optional[str] = None,
    train=None,
) -> Report:
    """The workspace report of a network: every convolution layer under every strategy.

    Args:
        net: a preset name, a list of ConvSpec, a torch ``nn.Module`` with ``input_shape``, or
            ``"module:callable"`` naming a function that returns one (e.g.
            ``"torchvision.models:mobilenet_v3_large"``).
        batch: a preset's is 32 unless given; a model's is ``input_shape[0]``; a list keeps its own.
        dtype: any case.
        layout: any case.
        training: forward plus backward (dgrad, wgrad).
        image: a preset's image size in pixels (default 224).
        input_shape: a model's example input (N, C, H, W).
        force: measure again.
        recording: answer from that shipped recording (e.g. ``"h200"``).
        train: not an option here (`InvalidSpec` pointing at ``training``).

    Returns:
        A `Report`. Every step is bounded (`Report.cut` says what was left out).
    """
    if train is not None:
        raise InvalidSpec(
            "train", train, "the option is called training= here (--training on the command line)"
        )
    kwargs, name, skipped = request_for(net, batch, dtype, layout, training, image, input_shape)
    check_recorded(kwargs, recording)
    df = lessons.data("network_report", force=force, recording=recording, **kwargs)
    return Report(df, name, tuple(skipped))


def parse_shape(text: str) -> Tuple[int, ...]:
    """An input shape as the CLI's ``--input-shape`` gives it.

    Args:
        text: ``"16,3,224,224"`` (or ``16x3x224x224``).

    Returns:
        (16, 3, 224, 224); `InvalidSpec` for anything but whole numbers.
    """
    try:
        return tuple(int(part) for part in str(text).replace("x", ",").split(",") if part.strip())
    except ValueError:
        raise InvalidSpec(
            "input_shape", text, "must be whole numbers separated by commas, e.g. 16,3,224,224"
        ) from None


def main_report(args) -> int:
    """``python -m labkit report NET [--input-shape N,C,H,W] [--batch B] [--image PX] ... --out DIR``.

    Every argument and ``--out`` are checked first, then the report is measured (live, with one
    progress bar) or looked up (recorded) and written into DIR. Ctrl-C writes what was measured so
    far, marked incomplete, and exits with 130.

    Args:
        args: the parsed command line (also ``--dtype``, ``--layout``, ``--training``).

    Returns:
        The exit status.
    """
    shape = None if args.input_shape is None else parse_shape(args.input_shape)
    if getattr(args, "checklist", False) and args.production_batch is not None:
        check_production_batch(args.production_batch)
    kwargs, name, skipped = request_for(
        args.net, args.batch, args.dtype, args.layout, args.training, args.image, shape
    )
    check_recorded(kwargs)
    out = check_out(args.out)
    bars, latest = [], {}

    def bar():
        if not bars:
            bars.append(tqdm(desc=f"report {name}", unit="step", file=sys.stderr))
        return bars[0]

    def listen(make_frame, done, total, unit):
        b = bar()
        b.total, b.n = total, done
        b.refresh()
        latest["frame"] = make_frame

    def phase(text):
        bar().set_postfix_str(text[:70])

    try:
        with progress.listening(listen), progress.announcing(phase):
            df = lessons.data("network_report", force=args.force, **kwargs)
    except KeyboardInterrupt:
        for b in bars:
            b.close()
        if "frame" not in latest:
            print("interrupted before anything was measured; nothing written", file=sys.stderr)
            return 130
        df = latest["frame"]()
        df.attrs.update(
            experiments.provenance(live=True), request=experiments.request_of("network_report", **kwargs)
        )
        out = Report(df, name, tuple(skipped)).write(out)
        print(f"interrupted: wrote what was measured to {out}, marked incomplete", file=sys.stderr)
        return 130
    finally:
        for b in bars:
            b.close()
    rep = Report(df, name, tuple(skipped))
    out = rep.write(out)
    prov, cut = rep.provenance, rep.cut
    print(
        f"{name}: {counted(len(rep.layers), 'convolution call')}, "
        f"{counted(len(rep.strategies), 'strategy', 'strategies')}, "
        f"{prov.get('mode')} on {gpu_label(prov.get('gpu'))} (cuDNN {prov.get('cudnn_backend')}, "
        f"{prov.get('date')})"
    )
    print(cut_line(cut))
    for s in skipped:
        print(f"  skipped {s.name} ({s.kind}): {s.reason}")
    print(f"wrote {out}/report.html and {', '.join(f'{t}.csv' for t in TABLES)}")
    if getattr(args, "checklist", False):
        write_checklist(
            rep.checklist(production_batch=args.production_batch, target_gpu=args.target_gpu), out
        )
    return 0


def cut_line(cut: dict) -> str:
    """The command line's account of what a time budget cut, each count in words that agree.

    Args:
        cut: `Report.cut`'s counts.

    Returns:
        The line: ``cut by a time budget: 1 plan, 2 distinct layers, ...``.
    """
    return (
        f"cut by a time budget: {counted(cut['plans'], 'plan')}, {counted(cut['layers'], 'distinct layer')}, "
        f"{counted(cut['strategies'], 'strategy', 'strategies')}; {counted(cut['slower_plans'], 'plan')} "
        f"left as over {eager_stop_text()} slower than the best after one eager call (report.html and the "
        "CSVs say which and why)"
    )


def write_checklist(checklist, out: Path) -> None:
    """Print a checklist's sentences and write ``checklist.csv`` and ``checklist.html`` (its chart,
    its sentences and its table) into a report's folder.

    Args:
        checklist: a `labkit.present.checklist.Checklist`.
        out: the folder.
    """
    sentences = checklist.sentences()
    checklist.table.to_csv(out / "checklist.csv", index=False)
    items = "".join(f"<li>{html.escape(s, quote=False)}</li>" for s in sentences)
    chart = checklist.chart().to_html(full_html=False, include_plotlyjs=True)
    table = checklist.table.to_html(index=False, float_format=lambda v: f"{v:.4g}")
    (out / "checklist.html").write_text(
        PAGE.format(title="Performance checklist", body=f"{chart}<ul>{items}</ul>{table}")
    )
    for s in sentences:
        print(f"  {s}")
    print(f"wrote {out}/checklist.html and checklist.csv")
