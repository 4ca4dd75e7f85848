"""Interactive panels: ipywidgets controls that call an experiment and update a plotly
``FigureWidget`` in place (no flicker, no new figure per change).

Every panel is a ``VBox`` of a header, the controls, a status line, a message line and one
``FigureWidget``. Move a control and the panel calls its experiment (`labkit.experiments`) with
the values on screen, builds the chart with `labkit.draw.plots` and copies the new traces into the
existing figure inside ``batch_update()``.

* **Recorded mode** (no GPU): every control offers only the values recorded for the request on
  screen (``recordings.current().values(...)``), so controls move one factor at a time around the
  lesson's base; a control with one recorded value is greyed; "reset to base" brings all back. A
  request that was not recorded (possible from code, e.g. ``panel.set(N=7)``) shows the
  `RecordedDataError` text with the nearest recorded values and empties the chart.
* **Live mode** (a GPU): controls move freely and every change measures; the status line says
  "measuring ..." while it runs, and any `LabkitError` (unsupported, out of memory, invalid spec)
  is shown in the panel: the kernel goes on.

Panels work with no browser attached: ``panel.set(dtype="bf16")`` sets the widget's value (the
same observer a click triggers runs) and returns once the figure holds the new data. That is what
the notebooks (under nbmake) and ``scripts/bench_widgets.py`` use. ``panel.to_csv(path)`` writes
the numbers on screen with their provenance.
"""
from __future__ import annotations

import html
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import ipywidgets as W
from traitlets import TraitError

from ..draw import plots
from ..errors import InvalidSpec, LabkitError, RecordedDataError
from .. import experiments
from ..experiments import BASE, FUSION_DTYPES  # the lessons' base convolution (one definition)
from ..gpu.legacy import DTYPE_PLAN as _LEGACY_DTYPE_PLAN
from ..experiments.grid import SWEEP_VALUES, strategies_repeats
from ..store.recordings import flatten  # noqa: F401  (widgets.flatten: tests and panels use it)
from ..networks import PRESETS
from ..spec import DIRECTIONS, DTYPES, LAYOUTS, ConvSpec

SPEC_FIELDS = ("N", "C", "K", "H", "W", "R", "S", "stride", "padding", "dilation", "groups", "dtype", "layout", "direction")
LEGACY_DTYPES = tuple(_LEGACY_DTYPE_PLAN)  # the classic API has no fp8 convolution
SHAPE = ("N", "C", "K", "H", "W", "R", "stride", "padding", "dilation", "groups")
#: width of a panel's chart in pixels. A FigureWidget is drawn before it is in the page (plotly/
#: plotly.py#5208), so it cannot size itself to the output and would fall back to 700 px.
FIG_WIDTH = 900
#: live mode: the values an int control's neighbours are taken from (the nearest below and above)
LADDERS = {"N": (1, 2, 4, 8, 16, 32, 64, 128, 256), "C": (3, 16, 32, 64, 128, 256, 512, 1024),
           "H": (7, 14, 28, 56, 112, 224)}
LADDERS.update(K=LADDERS["C"], W=LADDERS["H"])
#: live mode: the order in which neighbouring values are prefetched, and how many at most
PREFETCH_ORDER = ("dtype", "layout", "direction", "N", "C", "H", "workload", "launch", "streams", "field", "R",
                  "stride", "padding", "dilation", "K", "W")
MAX_PREFETCH = 24
WORKLOADS = ("one_conv", "resnet50_fp16_nhwc", "resnet50_fp32_nchw", "random_shapes", "growing_batch", "pressure")


# ---- controls ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ControlDef:
    """One control. ``field``: the request field it sets (dotted after the config's prefix);
    ``links``: state keys that take the same value in recorded mode (K follows C there, as
    recorded); ``always_links``: the same in both modes (S follows R: square filters);
    ``derived``: request fields computed from it (excluded when asking which values exist)."""

    name: str
    label: str
    kind: str = "choice"            # "int" (free integer live) or "choice"
    live_options: Tuple = ()
    lo: int = 1
    hi: int = 4096
    links: Tuple[str, ...] = ()
    always_links: Tuple[str, ...] = ()
    derived: Tuple[str, ...] = ()
    recorded_label: str = ""
    parts: Tuple[str, ...] = ()     # a compound control: its value is these state keys joined by " "


CONTROLS: Dict[str, ControlDef] = {c.name: c for c in (
    ControlDef("N", "N (batch)", "int", hi=4096),
    ControlDef("C", "C (channels in)", "int", hi=8192, links=("K",), recorded_label="C = K (channels)"),
    ControlDef("K", "K (channels out)", "int", hi=8192),
    ControlDef("H", "H (height)", "int", hi=4096, links=("W",), recorded_label="H = W (pixels)"),
    ControlDef("W", "W (width)", "int", hi=4096),
    ControlDef("R", "R = S (filter)", "choice", (1, 3, 5, 7), always_links=("S",)),
    ControlDef("stride", "stride", "choice", (1, 2, 3, 4)),
    ControlDef("padding", "padding", "choice", (0, 1, 2, 3)),
    ControlDef("dilation", "dilation", "choice", (1, 2, 3)),
    ControlDef("groups", "groups", "int", hi=8192),
    ControlDef("dtype", "dtype", "choice", DTYPES),
    ControlDef("layout", "layout", "choice", LAYOUTS),
    ControlDef("direction", "direction", "choice", DIRECTIONS),
    ControlDef("workload", "workload", "choice", WORKLOADS, derived=("repeats",)),
    ControlDef("launch", "launch", "choice", ("graph", "python")),
    ControlDef("streams", "streams", "choice", (2, 3, 4, 8)),
    ControlDef("field", "swept field", "choice", tuple(SWEEP_VALUES), derived=("values",)),
    ControlDef("dtype_layout", "dtype · layout", "choice", parts=("dtype", "layout")),
    ControlDef("net", "network", "choice", tuple(PRESETS)),
    ControlDef("batch", "batch", "int", hi=4096),
)}


#: a control's description column, and what a dropdown needs besides its text (padding, arrow)
DESCRIPTION_PX = 110
SELECT_CHROME_PX = 40
#: the grid's narrowest column (``minmax(190px, 1fr)``)
COLUMN_PX = 190


def _fit_options(w, labels) -> None:
    """Give a dropdown room for its longest option (about 8 px a character at the widgets'
    13 px font): one that does not fit a grid column spans two, so "resnet50_fp16_nhwc" is not
    cut to "resnet50_fp1"."""
    need = DESCRIPTION_PX + SELECT_CHROME_PX + 8 * max((len(t) for t in labels), default=0)
    wide = need > COLUMN_PX
    w.layout.grid_column = "span 2" if wide else None
    w.layout.min_width = f"{need}px" if wide else None


class Message(str):
    """A panel's error text: a plain string that a notebook shows as text, not as a quoted repr."""

    def _repr_markdown_(self) -> str:
        return html.escape(str(self))


def _label(v) -> str:
    if isinstance(v, (tuple, list)):
        return str(v[0]) if len(set(v)) == 1 else ",".join(map(str, v))
    return "unlimited" if v is None else str(v)


def _unpack(v):
    """A recorded field value as a control value: a square pair (1, 1) -> 1."""
    if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == v[1]:
        return v[0]
    return tuple(v) if isinstance(v, list) else v




# ---- what each panel shows ---------------------------------------------------------------------
def _spec_of(s: dict) -> ConvSpec:
    return ConvSpec(**{k: s[k] for k in SPEC_FIELDS})


def _state_of(spec: ConvSpec, **extra) -> dict:
    d = {k: _unpack(v) if isinstance(v, tuple) else v for k, v in
         ((f, getattr(spec, f)) for f in SPEC_FIELDS)}
    d.update(extra)
    return d


@dataclass
class Config:
    """What a panel runs: an experiment, the controls it shows, its base state, how the state
    becomes the experiment's arguments, and where control fields live in the request."""

    experiment: str
    title: str
    controls: Tuple[str, ...]
    base: dict
    kwargs: Callable[[dict], dict]
    prefix: str = "spec."
    csv_name: str = ""
    base_text: str = ""
    #: controls in recorded mode where they differ (e.g. dtype and layout as one, when the
    #: recording varied them together)
    recorded_controls: Optional[Tuple[str, ...]] = None
    #: live: the values a choice control offers where the experiment takes fewer than the control's
    live_options: Optional[Dict[str, Tuple]] = None

    def field(self, name: str) -> str:
        return self.prefix + name if name in SPEC_FIELDS else name


def _spec_config(experiment, title, controls, base_spec=BASE, recorded_controls=None, live_options=None):
    return Config(experiment, title, tuple(controls), _state_of(base_spec), lambda s: dict(spec=_spec_of(s)), "spec.",
                  base_text=f"{base_spec.dtype} {base_spec.layout} {base_spec.direction} {plots.shape_label(base_spec)}",
                  recorded_controls=recorded_controls, live_options=live_options)


CONFIGS: Dict[str, Callable[[], Config]] = {
    "precision": lambda: _spec_config("precision", "Precision: error vs speed", SHAPE + ("layout", "direction")),
    "layout": lambda: _spec_config("layout", "NCHW vs NHWC", SHAPE + ("dtype", "direction")),
    "fusion": lambda: _spec_config("fusion", "Fusion", SHAPE + ("dtype", "layout"),
                                   live_options=dict(dtype=FUSION_DTYPES)),
    "plans": lambda: _spec_config("plans", "Every plan", SHAPE + ("dtype", "layout", "direction")),
    "caps": lambda: _spec_config("caps", "Workspace cap", SHAPE + ("dtype", "layout", "direction"),
                                 BASE.replace(layout="NCHW")),
    "algorithms": lambda: _spec_config("algorithms", "Classic algorithm table", SHAPE + ("dtype", "layout"),
                                       BASE.replace(layout="NCHW"), live_options=dict(dtype=LEGACY_DTYPES)),
    "build_cost": lambda: _spec_config("build_cost", "Build cost", SHAPE + ("dtype", "layout", "direction"),
                                       recorded_controls=("dtype_layout",)),
    "workspace_sizes": lambda: _spec_config("workspace_sizes", "Workspace by dtype/layout/direction", SHAPE),
    "sweep": lambda: Config(
        "sweep", "Sweep one dimension", ("field", "dtype", "layout", "direction"), _state_of(BASE, field="N"),
        lambda s: dict(field=s["field"], values=SWEEP_VALUES[s["field"]], base=_spec_of(s)), "base.",
        base_text="swept field N, fp16 NHWC fprop " + plots.shape_label(BASE), recorded_controls=("field", "dtype_layout")),
    "roofline": lambda: Config(
        "roofline", "Roofline", ("dtype", "layout", "N"), dict(dtype="fp16", layout="NHWC", N=32),
        lambda s: dict(dtype=s["dtype"], layout=s["layout"], N=s["N"]), "", base_text="fp16 NHWC, batch 32"),
    "strategies": lambda: Config(
        "strategies", "Workspace strategies", ("workload",), dict(workload="one_conv"),
        lambda s: dict(workload=s["workload"], repeats=strategies_repeats(s["workload"])), "", base_text="workload one_conv"),
    "network_report": lambda: Config(
        "network_report", "Your network: every conv layer, every strategy", ("net", "batch", "dtype", "layout"),
        dict(net="resnet50", batch=32, dtype="fp16", layout="NHWC"),
        lambda s: dict(net=s["net"], batch=s["batch"], dtype=s["dtype"], layout=s["layout"]), "",
        base_text="resnet50, batch 32, fp16 NHWC, inference"),
    "race": lambda: Config(
        "race", "Scratchpad race", ("launch", "streams"), dict(launch="graph", streams=2),
        lambda s: dict(launch=s["launch"], streams=s["streams"], min_runs=1024), "", base_text="graph launch, 2 streams"),
    "race_timeline": lambda: Config(
        "race_timeline", "The race, traced", ("launch",), dict(launch="graph"),
        lambda s: dict(launch=s["launch"], streams=2), "", base_text="graph launch, 2 streams"),
}
SPEC_EXPERIMENTS = ("precision", "layout", "fusion", "plans", "caps", "algorithms", "build_cost", "workspace_sizes")


# ---- the panel --------------------------------------------------------------------------------
class _PanelView:
    """A panel's widgets and figure: building them, showing the state, drawing a table or an
    error, saving what is shown (part of `Panel`)."""

    # ---- UI ---------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        self.widgets: Dict[str, W.Widget] = {}
        for name in CONTROLS:
            self.widgets[name] = self._make_widget(CONTROLS[name])
        self.header = W.HTML()
        self.controls_box = W.GridBox(list(self.widgets.values()),
                                      layout=W.Layout(grid_template_columns="repeat(4, minmax(190px, 1fr))",
                                                      grid_gap="4px 12px"))
        self.reset_button = W.Button(description="reset to base", icon="undo", layout=W.Layout(width="auto"),
                                     tooltip="every control back to the lesson's base")
        self.reset_button.on_click(lambda _b: self._clicked(reset=True))
        self.rerun_button = W.Button(description="measure again", icon="refresh", tooltip="measure now on the GPU and replace the saved result",
                                     layout=W.Layout(width="auto", display=None if self.live else "none"))
        self.rerun_button.on_click(lambda _b: self._clicked(force=True))
        self.csv_button = W.Button(description=f"save {self.csv_name}", icon="download", layout=W.Layout(width="auto"),
                                   tooltip="write the numbers on screen, with their provenance, as CSV")
        self.csv_button.on_click(lambda _b: self._save_clicked())
        self.status = W.HTML()
        self.message = W.HTML()
        self.gpu_picker = W.Dropdown(options=self._gpu_options(), value=self.recording_name or self._default_gpu(),
                                     description="GPU", style={"description_width": "36px"},
                                     layout=W.Layout(width="auto"))
        _fit_options(self.gpu_picker, [t for t, _ in self.gpu_picker.options])
        self.gpu_picker.layout.display = None if len(self.gpu_picker.options) > 1 else "none"
        self.gpu_picker.observe(lambda change: self._syncing or self.pick_gpu(change["new"] or None), names="value")
        self.buttons = W.HBox([self.gpu_picker, self.reset_button, self.rerun_button, self.csv_button])
        self._sync_widgets()
        self.fig = None
        self.box = W.VBox([self.header, self.controls_box, self.buttons, self.status, self.message])

    def _make_widget(self, c: ControlDef) -> W.Widget:
        style = {"description_width": f"{DESCRIPTION_PX}px"}
        lay = W.Layout(width="auto")
        desc = (c.recorded_label or c.label) if not self.live else c.label
        if self.live and c.kind == "int":
            w = W.BoundedIntText(value=1, min=c.lo, max=c.hi, description=desc, continuous_update=False, style=style, layout=lay)
        else:
            opts = [(_label(v), v) for v in c.live_options] if self.live else []
            w = W.Dropdown(options=opts, description=desc, style=style, layout=lay)
            _fit_options(w, [t for t, _ in opts])
        w.observe(self._on_widget, names="value")
        return w

    def _header_html(self) -> str:
        cfg = self.cfg
        from .. import env

        if self.live:
            e = env.environment()
            note = (f"<b>Live</b> on {html.escape(str(e.gpu_name))} (cuDNN {e.cudnn_backend}): every change measures now; "
                    "building a cuDNN graph can take 0.5-10 s, the status line says when it runs.")
        else:
            m = self._recording().metadata
            fixed = ", ".join(f"{CONTROLS[k].label.split(' (')[0]}={_label(v)}" for k, v in self._fixed.items())
            note = (f"<b>Recorded</b> on {html.escape(str(m.get('gpu')))} with cuDNN {m.get('cudnn_backend')} on "
                    f"{m.get('date')}. The controls offer only recorded values, <b>one factor at a time</b> around the "
                    f"base ({html.escape(cfg.base_text)}); a greyed control has one recorded value from here: "
                    "<i>reset to base</i> to move another."
                    + (f" Fixed in this recording: {html.escape(fixed)}." if fixed else ""))
        return (f"<div style='font-size:15px;font-weight:600'>{html.escape(cfg.title)}</div>"
                f"<div style='font-size:12px;color:#3c4043;line-height:1.4'>{note}</div>")

    def _sync_widgets(self) -> None:
        """Widget values, options, visibility from the state (no observers fire)."""
        self._syncing = True
        try:
            self.header.value = self._header_html()
            for name, w in self.widgets.items():
                shown = name in self._shown
                w.layout.display = None if shown else "none"
                if not shown:
                    continue
                value = self._value(name)
                if isinstance(w, W.Dropdown):
                    opts = self.options(name)
                    labelled = [(_label(v), v) for v in opts]
                    if value not in opts:
                        labelled.append((f"{_label(value)} (not recorded)" if not self.live else _label(value), value))
                    if list(w.options) != labelled:
                        w.options = labelled
                        _fit_options(w, [t for t, _ in labelled])
                    w.value = value
                    w.disabled = (not self.live) and len(labelled) <= 1
                else:
                    w.value = value
        finally:
            self._syncing = False

    def _draw(self, df) -> None:
        new = experiments.CHARTS[self.cfg.experiment](df)
        if self.fig is None:
            self.fig = _figure_widget(new, self.fig_width)
            self._figs[self.cfg.experiment] = self.fig
            self.box.children = tuple(self.box.children) + (self.fig,)
            return
        update_in_place(self.fig, new)

    def _fail(self, exc: Exception, unexpected: bool = False) -> None:
        self.df = None
        kind = type(exc).__name__
        if isinstance(exc, RecordedDataError) and exc.nearest:
            # for the learner: what was asked and what exists, not the recording's file path
            near = "; ".join(f"{str(k).split('.')[-1]} = {', '.join(_label(x) for x in v) if isinstance(v, (list, tuple)) else _label(v)}"
                             for k, v in exc.nearest.items())
            text = f"{kind}: {exc.message}; nearest recorded values: {near}"
        else:
            text = f"{kind}: {exc}"
        if unexpected:
            text = f"unexpected error (please report it): {text}"
        self.error = Message(text)
        if isinstance(exc, RecordedDataError):
            advice = "Pick a recorded value from the controls, or reset to base."
        elif isinstance(exc, InvalidSpec):
            advice = "That combination is not a valid convolution; change a control."
        else:
            advice = ""
        self.message.value = (f"<div style='color:#b00020;background:#fdecea;padding:6px 8px;border-radius:4px;"
                              f"font-size:13px'>{html.escape(text)}" + (f"<br><i>{advice}</i>" if advice else "") + "</div>")
        self.status.value = _status("error", "no data for this request (see below)")
        if self.fig is None:
            self._placeholder()
        plots.no_data(self.fig, text)

    def _placeholder(self) -> None:
        """A figure to show when even the first request failed: the base's chart if it can be
        had, else empty traces of the right count."""
        import plotly.graph_objects as go

        try:
            from .. import experiments

            df = experiments.registry()[self.cfg.experiment](**self.cfg.kwargs(self.cfg.base))
            fig = experiments.CHARTS[self.cfg.experiment](df)
        except Exception:  # noqa: BLE001
            fig = go.Figure([go.Scatter() for _ in range(experiments.TRACES[self.cfg.experiment])])
        self.fig = _figure_widget(fig, self.fig_width)
        self._figs[self.cfg.experiment] = self.fig
        self.box.children = tuple(self.box.children) + (self.fig,)

    # ---- results ----------------------------------------------------------------------------
    def results(self):
        """The DataFrame on screen, with provenance columns in front (None if there is none)."""
        if self.df is None:
            return None
        df = self.df.copy()
        a = self.df.attrs
        for i, col in enumerate(("mode", "gpu", "cudnn_backend", "cudnn_frontend", "date", "experiment")):
            df.insert(i, col, a.get(col))
        df.insert(6, "request", json.dumps(a.get("request"), sort_keys=True))
        return df

    def to_csv(self, path=None) -> Path:
        """Write the numbers on screen (and their provenance) to ``path`` (default: the panel's
        csv_name in the current folder). Returns the path written."""
        df = self.results()
        if df is None:
            raise LabkitError(f"nothing to save: {self.error or 'no result yet'}")
        p = Path(path or self.csv_name)
        df.to_csv(p, index=False)
        return p

    def _save_clicked(self) -> None:
        try:
            p = self.to_csv()
            self.status.value = _status("ok", f"wrote {html.escape(str(p.resolve()))} ({len(self.df)} rows)")
        except (LabkitError, OSError) as exc:
            self.status.value = _status("error", html.escape(f"could not save: {exc}"))

    # ---- display ----------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.cfg.experiment} {'live' if self.live else 'recorded'} {self.state}>"


class _PanelValues:
    """What the controls offer and what a state asks for (part of `Panel`)."""

    def options(self, name: str) -> list:
        """The values control ``name`` offers now: live, its free choices; recorded, exactly the
        values recorded for the request on screen with that control changed."""
        c = CONTROLS[name]
        if self.live:
            return list(self._live_options(name))
        cfg = self.cfg
        flat = flatten(self._request(self.state) or {})
        moved = {cfg.field(n) for n in (c.parts or (name,)) + c.links + c.always_links} | set(c.derived)
        where = {k: v for k, v in flat.items() if k not in moved}
        return [v for v in self._candidates(name, where) if self._recorded(self._moved(self.state, name, v))]

    def _live_options(self, name: str) -> Tuple:
        """Live: the values choice control ``name`` offers for this panel's experiment."""
        return (self.cfg.live_options or {}).get(name, CONTROLS[name].live_options)

    def _candidates(self, name: str, where: dict) -> list:
        """Distinct recorded values of a control among the recorded requests matching ``where``."""
        c, cfg, rec = CONTROLS[name], self.cfg, self._recording()
        if c.parts:
            keys = [cfg.field(p) for p in c.parts]
            seen = []
            for req in rec.requests(cfg.experiment):
                f = flatten(req)
                if all(f.get(k) == v for k, v in where.items()):
                    v = " ".join(str(f.get(k)) for k in keys)
                    if v not in seen:
                        seen.append(v)
            return sorted(seen)
        out = []
        for v in rec.values(cfg.experiment, cfg.field(name), where=where):
            v = _unpack(v)
            if v not in out:
                out.append(v)
        order = list(c.live_options)
        return sorted(out, key=lambda v: (order.index(v) if v in order else len(order), out.index(v)))

    def _value(self, name: str, state: Optional[dict] = None):
        """A control's value in ``state`` (compound controls join their parts)."""
        state = self.state if state is None else state
        c = CONTROLS[name]
        return " ".join(str(state[p]) for p in c.parts) if c.parts else state[name]

    def _moved(self, state: dict, name: str, value) -> dict:
        c = CONTROLS[name]
        s = dict(state)
        if c.parts:
            vals = str(value).split(" ")
            if len(vals) != len(c.parts):
                raise InvalidSpec(name, value, f"must be {len(c.parts)} words: {' '.join(c.parts)}, e.g. 'fp16 NHWC'")
            s.update(zip(c.parts, vals))
            return s
        s[name] = value
        for k in c.always_links + (() if self.live else c.links):
            s[k] = value
        return s

    def _kwargs(self, state: dict) -> Optional[dict]:
        """The experiment's arguments for ``state``; None when it is not a valid request."""
        try:
            return self.cfg.kwargs(state)
        except (LabkitError, TypeError, ValueError, KeyError):
            return None

    def _request(self, state: dict) -> Optional[dict]:
        from ..experiments import request_of

        try:
            return request_of(self.cfg.experiment, **self.cfg.kwargs(state))
        except (LabkitError, TypeError, ValueError, KeyError):
            return None

    def _recorded(self, state: dict) -> bool:
        from ..experiments import request_key

        req = self._request(state)
        return req is not None and request_key(req) in self._recorded_keys


class _PanelMeasuring:
    """Getting a state's table: in this thread or, for a click in live mode, in a background
    thread that a newer click stops; partial tables drawn as they arrive; neighbours measured
    ahead (part of `Panel`)."""

    def _clicked(self, force: bool = False, reset: bool = False) -> None:
        """A control or button moved in the browser: live, measure in a background thread (the
        kernel stays free to hear the next click, which stops this measurement at its next
        checkpoint); recorded, answer at once."""
        if reset:
            self.state = dict(self.cfg.base)
        if not self.background:
            self.refresh(force)
            return
        with self._bg_lock:
            self._generation += 1
            gen, prev = self._generation, self._bg_thread
            t = threading.Thread(target=self._background, args=(gen, prev, force), daemon=True,
                                 name=f"labkit-panel-{self.cfg.experiment}")
            self._bg_thread = t
        if prev is not None and prev.is_alive():
            self.status.value = _status("running", "stopping the previous measurement ...")
        t.start()

    def _background(self, gen: int, prev: Optional[threading.Thread], force: bool) -> None:
        if prev is not None:
            prev.join()  # it stops at its next checkpoint: our generation made it stale
        if gen != self._generation:
            return  # a newer click came while we waited
        from ..signals.cancel import cancellable

        with cancellable(lambda: gen != self._generation):
            self.refresh(force, _generation=gen)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until a measurement started by a click is drawn (at most ``timeout`` seconds);
        True when none is running any more."""
        t = self._bg_thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def refresh(self, force: bool = False, _generation: Optional[int] = None) -> None:
        """Run the request on screen and update the figure in place (in this thread; a
        measurement a click started in the background stops at its next checkpoint)."""
        from ..signals.cancel import Superseded

        if _generation is None:
            with self._bg_lock:
                self._generation += 1
                _generation = self._generation
        self._pending = False
        t0 = time.perf_counter()
        started = time.time()
        self._sync_widgets()
        ahead = False
        if self.live:
            ahead = not force and self._measured_already()
            if not ahead:
                self.status.value = _status("running", "measuring on the GPU ...")
        self._t0, self._last_partial, self.partial_draws, self.first_paint_ms = t0, 0.0, 0, None
        self._drawing = _generation
        try:
            from ..signals.progress import announcing, listening

            with listening(self._on_partial), announcing(self._on_phase):
                df = self._result(force)
            if _generation != self._generation:
                raise Superseded()
            self._draw(df)
            if self.first_paint_ms is None:
                self.first_paint_ms = (time.perf_counter() - t0) * 1000
            self.df, self.error = df, None
            self.message.value = ""
            took = (time.perf_counter() - t0) * 1000
            if self.live:
                text = f"{plots.provenance_subtitle(df)} · {live_note(df, started, ahead)} · shown in {took:.0f} ms"
            else:
                text = f"{plots.provenance_subtitle(df)} · looked up in {took:.0f} ms"
            if self.live:
                try:
                    self.prefetching = self._prefetch()
                except Exception:  # noqa: BLE001 - prefetching is an optimisation; never fail a draw for it
                    self.prefetching = 0
                if self.prefetching:
                    text += f" · measuring {self.prefetching} neighbouring values in the background while you read"
            self.status.value = _status("ok", text)
        except Superseded:  # a newer request: it draws; nothing of this one is kept or shown
            self.stopped += 1
            return
        except LabkitError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - a panel never lets a traceback escape into the UI
            self._fail(exc, unexpected=True)
        self.last_update_ms = (time.perf_counter() - t0) * 1000
        self.updates += 1

    #: live: seconds between two partial draws of a chart that fills in (the last part always draws)
    PARTIAL_EVERY_S = 0.25

    def _on_partial(self, make_frame, done: int, total: int, unit: str) -> None:
        """A measurement in progress reports its table so far (`labkit.signals.progress`): draw it into
        the same figure (at most every `PARTIAL_EVERY_S`) and say how far it is."""
        now = time.perf_counter()
        if now - self._last_partial < self.PARTIAL_EVERY_S or done >= total or self._drawing != self._generation:
            return  # the finished table is drawn by refresh; a stale request draws nothing
        from .. import experiments

        df = make_frame()
        df.attrs.update(experiments.provenance(live=True))
        df.attrs.update(experiment=self.cfg.experiment, request=self._request(self.state), partial=True)
        self._draw(df)
        self._last_partial = time.perf_counter()
        self.partial_draws += 1
        if self.first_paint_ms is None:
            self.first_paint_ms = (self._last_partial - self._t0) * 1000
        self.status.value = _status("running", f"{done} of {total} {html.escape(unit)}, {now - self._t0:.1f} s; "
                                               "the chart fills in as the rest is measured ...")

    def _on_phase(self, phase: str) -> None:
        """A measurement says where it is (`labkit.signals.progress.announce`): the panel shows a wait for
        the GPU (another notebook's turn, `labkit.gpu.lock`) and its end; other phases are the
        progress bar's."""
        if self._drawing != self._generation:
            return
        if phase.startswith("waiting for the GPU"):
            self.waits += 1
            self.status.value = _status("running", html.escape(phase) + ": another notebook is measuring on it; "
                                        "this one starts when its turn comes (the chart shows what was there)")
        elif phase == "got the GPU":
            self.status.value = _status("running", "measuring on the GPU ...")

    def _measured_already(self) -> bool:
        from ..session import lessons

        kwargs = self._kwargs(self.state)
        try:
            return kwargs is not None and lessons.is_cached(self.cfg.experiment, **kwargs)
        except (LabkitError, TypeError, ValueError):
            return False

    def neighbours(self) -> List[dict]:
        """Live: the states one control move away from the one on screen, most likely first
        (every other option of a choice control; the nearest `LADDERS` values below and above an
        int control's value), at most `MAX_PREFETCH`."""
        out = []
        for name in PREFETCH_ORDER:
            if name not in self._shown:
                continue
            now = self._value(name)
            if name in LADDERS:
                ladder = LADDERS[name]
                vals = [max((v for v in ladder if v < now), default=None), min((v for v in ladder if v > now), default=None)]
            else:
                vals = list(self._live_options(name))
            out += [self._moved(self.state, name, v) for v in vals if v is not None and v != now]
        return out[:MAX_PREFETCH]

    def _prefetch(self) -> int:
        """Queue the neighbours' requests for the background worker (`labkit.session.prefetch`)."""
        from ..session import lessons

        requests = [kw for kw in map(self._kwargs, self.neighbours()) if kw is not None]  # None: impossible
        return lessons.prefetch(self.cfg.experiment, requests)

    def _result(self, force: bool):
        from ..session import lessons

        kwargs = self.cfg.kwargs(self.state)  # InvalidSpec for an impossible spec
        recording = None if self.live else self._recording().name
        return lessons.data(self.cfg.experiment, force=force, recording=recording, **kwargs)


def _short_gpu(name) -> str:
    """A GPU's name without the vendor: "NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3"."""
    return str(name).replace("NVIDIA ", "", 1)


class _PanelGPU:
    """Which GPU answers a panel: this GPU live, or a shipped recording (the GPU picker)."""

    def _gpu_options(self) -> list:
        """(label, value) for the GPU picker: live, "this GPU" first (value ""); then every shipped
        recording, the default one first."""
        from .. import env
        from ..store import recordings

        opts = []
        if self.can_measure:
            opts.append((f"this GPU, live ({_short_gpu(env.environment().gpu_name)})", ""))
        for r in recordings.shipped():
            m = r.metadata
            if self.cfg.experiment not in (m.get("experiments") or {}):
                continue  # nothing to draw from that GPU for this panel
            quick = "" if m.get("complete", True) else ", quick: base calls"
            opts.append((f"{_short_gpu(m.get('gpu'))} (recorded {m.get('date')}{quick})", r.name))
        return opts

    def _default_gpu(self) -> str:
        return "" if self.can_measure else self._recording().name

    def pick_gpu(self, recording: Optional[str]) -> None:
        """Answer from another GPU: a shipped recording's name (e.g. ``"h200"``), or None for this
        GPU live (recorded mode: the default recording). The controls become that recording's
        values; where the convolution on screen was not recorded there, they go back to the base."""
        from ..store import recordings

        picked = recordings.named(recording) if recording else None
        name = picked.name if picked else None
        if picked is not None and self.cfg.experiment not in (picked.metadata.get("experiments") or {}):
            raise InvalidSpec("gpu", recording, f"that recording has no {self.cfg.experiment!r}; this panel offers "
                              + ", ".join(v or "this GPU" for _, v in self._gpu_options()))
        if not self.can_measure and name is None:
            name = recordings.for_experiment(self.cfg.experiment).name
        if name == self.recording_name and self.gpu_picker.value == (name or ""):
            return
        self.recording_name = name
        self.live = self.can_measure and name is None
        self.background = self.live
        self._use(self.cfg)
        note = ""
        if not self.live and not self._recorded(self.state):
            self.state = dict(self.cfg.base)
            note = "The convolution on screen was not recorded on that GPU: the controls went back to the base. "
        self._syncing = True
        try:
            self.gpu_picker.value = name or ""
            old = self.widgets
            self.widgets = {n: self._make_widget(CONTROLS[n]) for n in CONTROLS}
            for w in old.values():
                w.close()
            self.controls_box.children = list(self.widgets.values())
            self.rerun_button.layout.display = None if self.live else "none"
        finally:
            self._syncing = False
        self._sync_widgets()
        self.refresh()
        if note:
            self.status.value = _status("ok", html.escape(note) + self.status.value)

    def _recording(self):
        """The recording the panel answers from: the one picked, else recorded mode's default for
        this experiment (`labkit.store.recordings.for_experiment`)."""
        from ..store import recordings

        return recordings.named(self.recording_name) if self.recording_name else recordings.for_experiment(self.cfg.experiment)


class Panel(_PanelGPU, _PanelView, _PanelValues, _PanelMeasuring):
    """Controls + one FigureWidget for one experiment (see the module docstring).

    ``panel.set(name=value, ...)`` changes controls as a user would and returns when the figure
    is updated; ``panel.fig`` is the FigureWidget, ``panel.df`` the DataFrame on screen (None
    when the request failed), ``panel.error`` the message shown then, ``panel.options(name)`` the
    values a control offers. Display the panel as the last expression of a cell.
    """

    experiment: str = ""

    def __init__(self, experiment: Optional[str] = None, *, live: Optional[bool] = None, csv_name: Optional[str] = None,
                 fig_width: Optional[int] = FIG_WIDTH, gpu: Optional[str] = None, **initial):
        from .. import env

        name = experiment or self.experiment
        if name not in CONFIGS:
            raise InvalidSpec("experiment", name, f"must be one of {', '.join(CONFIGS)}")
        #: live: this GPU can measure; the panel is live while the GPU picker shows "this GPU"
        self.can_measure = env.mode().live if live is None else bool(live)
        #: the shipped recording the panel answers from (None: this GPU live, or recorded mode's default)
        self.recording_name: Optional[str] = None
        if gpu is not None:
            from ..store import recordings

            self.recording_name = recordings.named(gpu).name  # InvalidSpec names the available ones
        self.live = self.can_measure and self.recording_name is None
        self.fig_width = fig_width
        self._defer = 0
        self._pending = False
        self._syncing = False
        self.df = None
        self.error: Optional[str] = None
        self.updates = 0
        self.last_update_ms: Optional[float] = None
        self.prefetching = 0  # live: neighbouring requests queued for the background worker
        #: live: a click measures in a thread, so the kernel hears the next click and stops this one
        self.background = self.live
        self.stopped = 0  # measurements stopped because a newer request came
        self.waits = 0  # times a measurement of this panel waited for another process's turn on the GPU
        self._generation = 0  # bumped by every new request; an older measurement stops at its next checkpoint
        self._bg_thread: Optional[threading.Thread] = None
        self._bg_lock = threading.Lock()
        self._figs: Dict[str, object] = {}
        self._use(CONFIGS[name](), csv_name)
        unknown = set(initial) - set(self._shown)
        if unknown:
            raise InvalidSpec("control", sorted(unknown), f"this panel's controls are {', '.join(self._shown)}")
        if self.live:
            from ..session import lessons

            lessons.start_build_workers()  # ready for the runtime-compiled plans of this panel's graphs
        self._build_ui()
        self._defer += 1
        try:
            self.set(**initial)
        finally:
            self._defer -= 1
        self.refresh()

    # ---- configuration ------------------------------------------------------------------------
    def _use(self, cfg: Config, csv_name: Optional[str] = None) -> None:
        self.cfg = cfg
        self.state = dict(cfg.base) if not hasattr(self, "state") else {**cfg.base, **self.state}
        self.csv_name = csv_name or getattr(self, "csv_name", None) or cfg.csv_name or f"results_{cfg.experiment}.csv"
        self._shown = [c for c in cfg.controls if self.live or c not in ("K", "W")]
        self._fixed: Dict[str, object] = {}
        if not self.live:
            rec = self._recording()
            self._recorded_keys = {json.dumps(r, sort_keys=True, separators=(",", ":"))
                                   for r in rec.requests(cfg.experiment)}
            self._shown = [c for c in (cfg.recorded_controls or self._shown) if c not in ("K", "W")]
            keep = []
            for c in self._shown:
                vals = self._candidates(c, {})
                if len(vals) <= 1:
                    self._fixed[c] = vals[0] if vals else self._value(c, cfg.base)
                else:
                    keep.append(c)
            self._shown = keep

    # ---- driving ----------------------------------------------------------------------------
    def _on_widget(self, change) -> None:
        if self._syncing:
            return
        name = next(n for n, w in self.widgets.items() if w is change["owner"])
        self.state = self._moved(self.state, name, change["new"])
        self._changed()

    def _changed(self) -> None:
        if self._defer:
            self._pending = True
            return
        self._clicked()

    def set(self, **changes) -> None:
        """Change controls as a user would (``panel.set(dtype="bf16", N=8)``) and return when the
        figure shows the result. Names are the panel's controls (`controls`); in recorded mode a
        value that was not recorded is accepted, and the panel then shows why there is no data.
        ``gpu=``: answer from another GPU's recording (`pick_gpu`)."""
        if "gpu" in changes:
            self.pick_gpu(changes.pop("gpu"))
        for name in changes:
            if name not in self._shown:
                hint = ""
                if not self.live and any(name in CONTROLS[c].links for c in self._shown):
                    owner = next(c for c in self._shown if name in CONTROLS[c].links)
                    hint = f"; in recorded mode {name} moves with {owner} (as recorded): set {owner}"
                elif not self.live and any(name in CONTROLS[c].parts for c in self._shown):
                    owner = next(c for c in self._shown if name in CONTROLS[c].parts)
                    hint = (f"; in recorded mode {name} is part of {owner} (recorded together): "
                            f"set {owner}='{self._value(owner)}' with another value from options('{owner}')")
                elif name in self._fixed:
                    hint = f"; the recording has only {name}={_label(self._fixed[name])}"
                raise InvalidSpec("control", name, f"this panel's controls are {', '.join(self._shown)}{hint}")
        if not changes:
            return
        self._defer += 1
        try:
            for name, value in changes.items():
                w = self.widgets[name]
                if isinstance(w, W.Dropdown) and value not in [v for _, v in w.options]:
                    label = _label(value) if self.live else f"{_label(value)} (not recorded)"
                    self._syncing = True
                    try:
                        w.options = list(w.options) + [(label, value)]
                    finally:
                        self._syncing = False
                if w.value == value and self._value(name) != value:
                    self.state = self._moved(self.state, name, value)
                    self._pending = True
                else:
                    try:
                        w.value = value  # the observer a user's click triggers
                    except TraitError as exc:
                        raise InvalidSpec(name, value, f"not a value this control takes ({exc})") from None
        finally:
            self._defer -= 1
        if self._pending and not self._defer:
            self.refresh()

    def reset(self) -> None:
        """Every control back to the base, and redraw."""
        self.state = dict(self.cfg.base)
        self.refresh()

    @property
    def controls(self) -> List[str]:
        """Names `set` accepts (the controls on screen)."""
        return list(self._shown)


def _figure_widget(fig, width: Optional[int]):
    import plotly.graph_objects as go

    w = go.FigureWidget(fig)
    if width:
        w.layout.width = width
    return w


def live_note(df, started: float, ahead: bool = False) -> str:
    """Where a live result came from, for the status line: read from this GPU's recording on
    disk (measured at a given time, by an earlier session, another notebook or the background
    worker), measured ahead of this change in this session, or measured by this change (and
    saved); ``started``: when the change began (Unix seconds)."""
    import datetime

    a = df.attrs
    saved = " and saved in this GPU's recording" if a.get("saved_in") else ""
    try:
        when = datetime.datetime.fromisoformat(str(a.get("measured_at")))
        today = datetime.datetime.now(when.tzinfo).date() == when.date()
        stamp = when.strftime("%H:%M:%S today" if today else "%Y-%m-%d %H:%M")
    except ValueError:
        when, stamp = None, "an earlier time"
    if a.get("loaded_from_disk"):
        if a.get("from_shared"):
            return (f"measured at {stamp} on a GPU of this machine's identity (model, driver, cuDNN), read from the "
                    "class's shared recording (<i>measure again</i> to measure it on yours)")
        return f"measured on this GPU at {stamp}, read from its recording (<i>measure again</i> to redo it)"
    if ahead or (when is not None and when.timestamp() < started - 1):
        return f"measured earlier (ahead of this change) at {stamp}{saved}"
    secs = a.get("measure_seconds")
    return (f"measured now in {secs:.1f} s" if isinstance(secs, (int, float)) else "measured now") + saved


def _status(kind: str, text: str) -> str:
    color = {"ok": "#3c4043", "running": "#1a73e8", "error": "#b00020"}[kind]
    icon = {"ok": "&#10003;", "running": "&#8987;", "error": "&#9888;"}[kind]
    return f"<span style='font-size:12px;color:{color}'>{icon} {text}</span>"


def update_in_place(fig, new) -> None:
    """Copy ``new``'s traces and layout into the FigureWidget ``fig`` inside one batch_update.

    Same number and types of traces (the builders guarantee it): each trace is updated in place.
    Otherwise (a different chart) the traces are replaced, still in the same widget."""
    same = len(fig.data) == len(new.data) and all(a.type == b.type for a, b in zip(fig.data, new.data))
    layout = new.layout.to_plotly_json()
    layout.pop("template", None)
    with fig.batch_update():
        if same:
            for old, nt in zip(fig.data, new.data):
                props = nt.to_plotly_json()
                props.pop("type", None)
                props.pop("uid", None)
                props.setdefault("visible", True)
                old.update(props, overwrite=True)
        else:
            fig.data = ()
            fig.add_traces(list(new.data))
        stale = set(fig.layout.to_plotly_json()) - set(layout) - {"template", "width"}
        for k in stale:
            layout[k] = None
        fig.layout.update(layout, overwrite=True)


# ---- the lessons' panels ---------------------------------------------------------------------
class AlgorithmsPanel(Panel):
    """Lesson 01: the classic algorithm table (dtype, layout; the shape live)."""
    experiment = "algorithms"


class WorkspaceSizesPanel(Panel):
    """Lesson 01: workspace per dtype x layout x direction of one shape."""
    experiment = "workspace_sizes"


class SweepPanel(Panel):
    """Lesson 01: time and workspace as N, C=K, H=W or R=S varies."""
    experiment = "sweep"


class StrategiesPanel(Panel):
    """Lesson 02: every workspace strategy on a workload."""
    experiment = "strategies"


class PrecisionPanel(Panel):
    """Lesson 03: error vs speed per dtype."""
    experiment = "precision"


class LayoutPanel(Panel):
    """Lesson 03: NCHW vs NHWC, conversion included."""
    experiment = "layout"


class RooflinePanel(Panel):
    """Lesson 03: the roofline per dtype and layout."""
    experiment = "roofline"


class FusionPanel(Panel):
    """Lesson 04: fused vs unfused."""
    experiment = "fusion"


class PlansPanel(Panel):
    """Lesson 05: every plan's workspace and time."""
    experiment = "plans"


class CapsPanel(Panel):
    """Lesson 05: what a workspace cap costs."""
    experiment = "caps"


class BuildCostPanel(Panel):
    """Lesson 05: what a build costs."""
    experiment = "build_cost"


class RacePanel(Panel):
    """Lesson 06: shared vs per-stream scratchpad."""
    experiment = "race"


class RaceTimelinePanel(Panel):
    """Lesson 10: the race's traced round, graph or Python launches."""
    experiment = "race_timeline"


class LabPanel(Panel):
    """Lesson 07: one convolution, every spec control, any of the spec experiments as the chart
    (``chart`` control), CSV export to ``results.csv``.

    Switching the chart keeps the convolution on screen when it can; in recorded mode, when the
    new chart was not recorded for it, the controls go back to that chart's base, and the status
    line says so."""

    def __init__(self, chart: str = "plans", *, live: Optional[bool] = None, fig_width: Optional[int] = FIG_WIDTH,
                 **initial):
        if chart not in SPEC_EXPERIMENTS:
            raise InvalidSpec("chart", chart, f"must be one of {', '.join(SPEC_EXPERIMENTS)}")
        self.chart = W.Dropdown(options=list(SPEC_EXPERIMENTS), value=chart, description="chart",
                                style={"description_width": "110px"})
        self.chart.observe(self._on_chart, names="value")
        super().__init__(chart, live=live, csv_name="results.csv", fig_width=fig_width, **initial)
        self.box.children = (self.box.children[0], self.chart) + tuple(self.box.children[1:])

    def _on_chart(self, change) -> None:
        self.switch(change["new"])

    def switch(self, chart: str) -> None:
        """Show another experiment's chart for the convolution on screen."""
        if chart not in SPEC_EXPERIMENTS:
            raise InvalidSpec("chart", chart, f"must be one of {', '.join(SPEC_EXPERIMENTS)}")
        if self.chart.value != chart:
            self.chart.value = chart  # comes back here through the observer
            return
        if chart == self.cfg.experiment:
            return
        old = dict(self.state)
        cfg = CONFIGS[chart]()
        keep = {k: v for k, v in old.items() if k in cfg.controls}
        self.state = {**cfg.base, **keep}
        self._use(cfg)
        note = ""
        if not self.live and not self._recorded(self.state):
            self.state = dict(cfg.base)
            note = f"'{chart}' was not recorded for the convolution on screen: controls went back to its base. "
        # one FigureWidget per chart, made once; switching swaps which one the panel shows
        fig = self._figs.get(chart)
        children = [c for c in self.box.children if c is not self.fig]
        self.fig = fig
        if fig is not None:
            children.append(fig)
        self.box.children = tuple(children)
        self.refresh()
        if note:
            self.status.value = _status("ok", html.escape(note) + self.status.value)

    def set(self, **changes) -> None:
        chart = changes.pop("chart", None)
        if chart is not None:
            self.switch(chart)
        super().set(**changes)


class ReportPanel(Panel):
    """A network's workspace report (`labkit.report`): pick a preset, batch, dtype and layout."""
    experiment = "network_report"


PANELS = {cls.experiment: cls for cls in (AlgorithmsPanel, WorkspaceSizesPanel, SweepPanel, StrategiesPanel,
                                          PrecisionPanel, LayoutPanel, RooflinePanel, FusionPanel, PlansPanel,
                                          CapsPanel, BuildCostPanel, RacePanel, ReportPanel)}


def panel(experiment: str, **initial) -> Panel:
    """The panel for an experiment by name, e.g. ``widgets.panel("plans", dtype="fp32")``."""
    if experiment not in PANELS:
        raise InvalidSpec("experiment", experiment, f"must be one of {', '.join(PANELS)}")
    return PANELS[experiment](**initial)
