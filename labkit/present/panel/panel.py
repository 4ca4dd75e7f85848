"""A lesson panel, made of parts: `Controls` (the state: which values exist, what a move means),
`PanelView` (the widgets and the figure), `MeasurementJob` (getting a state's table, in the
background when a click asks live, stopped by a newer one) and `GPUPicker` (this GPU or a
recording). The panel only wires them: a control moves -> the state moves -> the job gets the
table (`labkit.session.lessons.data`) -> the view draws it.
"""

from __future__ import annotations

import datetime
import html
import time
from typing import List, Optional, Tuple

import plotly.graph_objects as go

from ... import env, experiments
from ...draw import plots
from ...errors import InvalidSpec, LabkitError
from ...experiments.panel_config import PanelConfig
from ...session import lessons
from ...signals.cancel import Superseded
from ...spec import dtype_name, layout_name
from .controls import Controls
from .gpu_picker import GPUPicker
from .job import MeasurementJob
from .view import FIG_WIDTH, PanelView


def live_note(df, started: float, *, ahead: bool = False) -> str:
    """Where a live result came from, for the status line.

    It was read from this GPU's recording on disk (measured at a given time, by an earlier session,
    another notebook or the background worker), measured ahead of this change in this session, or
    measured by this change (and saved).

    Args:
        df: the result, with its provenance in ``attrs``.
        started: when the change began, in Unix seconds.
        ahead: it was measured ahead by the background worker.

    Returns:
        The note, as HTML.
    """
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
            return (
                f"measured at {stamp} on a GPU of this machine's identity (model, driver, cuDNN), "
                "read from the class's shared recording (<i>measure again</i> to measure it on yours)"
            )
        return f"measured on this GPU at {stamp}, read from its recording (<i>measure again</i> to redo it)"
    if ahead or (when is not None and when.timestamp() < started - 1):
        return f"measured earlier (ahead of this change) at {stamp}{saved}"
    secs = a.get("measure_seconds")
    if isinstance(secs, (int, float)):
        return f"measured now in {secs:.1f} s{saved}"
    return f"measured now{saved}"


def measured_already(controls: Controls) -> bool:
    """Live: whether the request on screen is in this session's results or this GPU's recording.

    Args:
        controls: the panel's state.

    Returns:
        True when it needs no measurement.
    """
    kwargs = controls.kwargs(controls.state)
    try:
        return kwargs is not None and lessons.is_cached(controls.cfg.experiment, **kwargs)
    except (LabkitError, TypeError, ValueError):
        return False


def prefetch_neighbours(controls: Controls) -> int:
    """Queue the requests one control move away for the background worker (`labkit.session.prefetch`).

    Args:
        controls: the panel's state.

    Returns:
        How many were queued; 0 when that failed (prefetching is an optimisation, never a draw's
        failure).
    """
    try:
        kwargs = [
            kw for kw in map(controls.kwargs, controls.neighbours()) if kw is not None
        ]  # None: impossible
        return lessons.prefetch(controls.cfg.experiment, kwargs)
    except Exception:  # noqa: BLE001
        return 0


def draw_partial(view: PanelView, controls: Controls, make_frame) -> None:
    """Draw a live measurement's table so far, marked partial.

    Args:
        view: the panel's view.
        controls: the panel's state.
        make_frame: returns the table so far.
    """
    df = make_frame()
    df.attrs.update(experiments.provenance(live=True))
    df.attrs.update(
        experiment=controls.cfg.experiment, request=controls.request(controls.state), partial=True
    )
    view.draw(controls.cfg.experiment, df)


def placeholder(cfg: PanelConfig):
    """A figure for when even a panel's first request failed.

    Args:
        cfg: the panel's configuration.

    Returns:
        The base's chart if it can be had, else empty traces of the right count.
    """
    try:
        df = experiments.registry()[cfg.experiment](**cfg.kwargs(cfg.base))
        return experiments.CHARTS[cfg.experiment](df)
    except Exception:  # noqa: BLE001
        return go.Figure([go.Scatter() for _ in range(experiments.TRACES[cfg.experiment])])


def settled(panel: "Panel") -> "Panel":
    """A panel, once the measurement it runs in the background has drawn its whole answer.

    That is a first request handed back at its first paint, or a click (`MeasurementJob.wait`).

    Args:
        panel: the panel.

    Returns:
        ``panel``.
    """
    panel.job.wait()
    return panel


def open_at(panel: "Panel", initial: dict) -> None:
    """Set a new panel's controls to where the lesson opens it, which becomes its base: its header
    names it and *reset to base* goes back to it. A request the recording in use does not hold
    (recorded mode) is shown, with why it has no data, but does not become the base: reset goes back
    to the configuration's own.

    Args:
        panel: the panel, not yet drawn.
        initial: control name -> value (empty: the configuration's own base).
    """
    panel._defer += 1
    try:
        panel.set(**initial)
    finally:
        panel._defer -= 1
    if initial and (panel.live or panel.controls_state.recorded(panel.state)):
        panel.controls_state.cfg = panel.cfg.rebased(panel.state)
        panel.view.sync(panel.controls_state)


def first_request(panel: "Panel") -> None:
    """A panel's first answer.

    Live, a request that must be measured runs as a click does (in the background) and the panel is
    handed back once its first part is drawn, so the cell shows it while the rest fills in
    (``panel.wait()`` for the whole answer); else it is answered here.

    Args:
        panel: the panel.
    """
    if panel.background and not measured_already(panel.controls_state):
        panel.job.start(lambda gen: panel.refresh(_generation=gen))
        panel.job.wait_shown()
    else:
        panel.refresh()


def wired_view(
    panel: "Panel",
    cfg: PanelConfig,
    *,
    csv_name: Optional[str],
    fig_width: Optional[int],
    also: Tuple[PanelConfig, ...] = (),
):
    """A panel's view, its controls and buttons wired to the panel.

    Args:
        panel: the panel being made (its ``gpu`` picker set).
        cfg: the experiment's panel configuration.
        csv_name: the file "save CSV" writes; None for the configuration's.
        fig_width: the figure's width, in pixels.
        also: the configurations the panel may switch to (the lab's other charts): their controls
            get widgets too, shown when their chart is.

    Returns:
        The `PanelView`, with a widget for every control the configurations show live or recorded.
    """
    return PanelView(
        panel.live,
        csv_name or cfg.csv_name or f"results_{cfg.experiment}.csv",
        fig_width=fig_width,
        gpu_options=panel.gpu.options(cfg.experiment),
        gpu_value=panel.gpu.value(cfg.experiment),
        on_control=panel._on_control,
        on_button=panel._on_button,
        on_gpu=panel.pick_gpu,
        controls=tuple(name for c in (cfg, *also) for name in (*c.controls, *(c.recorded_controls or ()))),
    )


def answer(panel: "Panel", *, force: bool = False, generation: Optional[int] = None) -> None:
    """Answer the request on screen and update the figure in place: the table (live: measured, or
    read where saved; recorded: looked up), drawn and named on the status line, or why there is
    none. A newer request supersedes it: then nothing of it is kept or shown.

    Args:
        panel: the panel.
        force: measure again and replace the saved result (live).
        generation: the job's generation this answer belongs to (None: a new one).
    """
    gen = panel.job.next_generation() if generation is None else generation
    panel._pending = False
    started = time.time()
    panel.job.begin(gen)
    panel.view.sync(panel.controls_state)
    ahead = panel.live and not force and measured_already(panel.controls_state)
    if panel.live and not ahead:
        panel.view.say("running", "measuring on the GPU ...")
    try:
        with panel.job.measuring():
            df = lessons.data(
                panel.cfg.experiment,
                force=force,
                recording=None if panel.live else panel.controls_state.recording.name,
                **panel.cfg.kwargs(panel.state),
            )
        if not panel.job.current(gen):
            raise Superseded()
        panel.view.show(panel.cfg.experiment, df)
        panel.job.painted()
        how = f"{live_note(df, started, ahead=ahead)} · shown" if panel.live else "looked up"
        elapsed_ms = panel.job.elapsed_ms()
        panel.prefetching = prefetch_neighbours(panel.controls_state) if panel.live else 0
        ahead_note = (
            f" · measuring {panel.prefetching} neighbouring values in the background while you read"
            if panel.prefetching
            else ""
        )
        took = f"{elapsed_ms:.0f}\u00a0ms"  # a wrapped status line keeps the number with its unit
        panel.view.say("ok", f"{plots.provenance_subtitle(df)} · {how} in {took}{ahead_note}")
    except Superseded:  # a newer request: it draws; nothing of this one is kept or shown
        panel.job.stopped += 1
        return
    except LabkitError as exc:
        panel.view.fail(panel.cfg.experiment, exc, lambda: placeholder(panel.cfg))
    except Exception as exc:  # noqa: BLE001 - a panel never lets a traceback escape into the UI
        panel.view.fail(panel.cfg.experiment, exc, lambda: placeholder(panel.cfg), unexpected=True)
    panel.job.done()


class Panel:
    """Controls and one FigureWidget for one experiment's `PanelConfig`.

    ``panel.set(name=value, ...)`` changes controls as a user would and returns when the figure is
    updated; ``panel.fig`` is the FigureWidget, ``panel.df`` the DataFrame on screen (None when the
    request failed), ``panel.error`` the message shown then, ``panel.options(name)`` the values a
    control offers. Display the panel as the last expression of a cell. Live, a first request that
    must be measured fills in after the panel is shown (``panel.wait()`` blocks until it is whole).
    Its parts: ``panel.controls_state``, ``panel.view``, ``panel.job``, ``panel.gpu``.

    Args:
        cfg: the experiment's panel configuration.
        live: measure live; default the mode labkit runs in.
        csv_name: the file "save CSV" writes; default the configuration's.
        fig_width: the figure's width, in pixels.
        gpu: a shipped recording's name to answer from (`GPUPicker`).
        **initial: control name -> its first value.
    """

    #: the experiments a panel may also chart (the lab's): their controls get widgets too
    other_charts: Tuple[str, ...] = ()

    def __init__(
        self,
        cfg: PanelConfig,
        *,
        live: Optional[bool] = None,
        csv_name: Optional[str] = None,
        fig_width: Optional[int] = FIG_WIDTH,
        gpu: Optional[str] = None,
        **initial,
    ):
        self.gpu = GPUPicker(env.mode().live if live is None else bool(live), gpu)
        self.controls_state = Controls(cfg, self.gpu.live, self.gpu.recording(cfg.experiment))
        unknown = set(initial) - set(self.controls)
        if unknown:
            raise InvalidSpec(
                "control", sorted(unknown), f"this panel's controls are {', '.join(self.controls)}"
            )
        self.prefetching = 0  # live: neighbouring requests queued for the background worker
        #: a click measures in a background thread (live), so the kernel hears the next click
        self.background = self.gpu.live
        self._defer, self._pending = 0, False
        if self.live:
            lessons.start_build_workers()  # ready for the runtime-compiled plans of this panel's graphs
        also = tuple(experiments.PANELS[name] for name in self.other_charts)
        self.view = wired_view(self, cfg, csv_name=csv_name, fig_width=fig_width, also=also)
        self.job = MeasurementJob(
            cfg.experiment,
            lambda make_frame: draw_partial(self.view, self.controls_state, make_frame),
            self.view.say,
        )
        self.view.sync(self.controls_state)
        open_at(self, initial)
        first_request(self)

    # ---- what the notebook reads ------------------------------------------------------------------
    cfg = property(lambda self: self.controls_state.cfg, doc="the `PanelConfig` shown")
    live = property(lambda self: self.gpu.live, doc="the panel measures on this GPU now")
    state = property(lambda self: self.controls_state.state, doc="the values on screen")
    df = property(
        lambda self: settled(self).view.df, doc="the whole table on screen (waits for it; None: failed)"
    )
    error = property(lambda self: self.view.error, doc="the message shown when the request failed")
    fig = property(lambda self: self.view.fig, doc="the FigureWidget")
    box = property(lambda self: self.view.box)
    status = property(lambda self: self.view.status)
    message = property(lambda self: self.view.message)
    header = property(lambda self: self.view.header)
    widgets = property(lambda self: self.view.widgets)
    gpu_picker = property(lambda self: self.view.gpu_picker)
    csv_name = property(lambda self: self.view.csv_name)
    controls = property(
        lambda self: list(self.controls_state.shown), doc="names `set` accepts (the controls on screen)"
    )
    updates = property(lambda self: self.job.updates, doc="requests answered (drawn or failed)")
    last_update_ms = property(
        lambda self: self.job.last_update_ms, doc="the last request's time to answer, ms"
    )
    first_paint_ms = property(lambda self: self.job.first_paint_ms, doc="the last request's first paint, ms")
    partial_draws = property(
        lambda self: self.job.partial_draws, doc="partial tables drawn for the last request"
    )
    stopped = property(lambda self: self.job.stopped, doc="measurements stopped because a newer request came")

    def options(self, name: str) -> list:
        """The values a control offers now (`Controls.options`).

        Args:
            name: the control.

        Returns:
            Its values, in the dropdown's order.
        """
        return self.controls_state.options(name)

    def value(self, name: str):
        """A control's value on screen.

        Args:
            name: the control.

        Returns:
            The value.
        """
        return self.controls_state.value(name)

    def request(self) -> Optional[dict]:
        """The request on screen.

        Returns:
            The experiment's arguments as recorded (a dict); None when they are not a valid request.
        """
        return self.controls_state.request(self.state)

    def neighbours(self) -> List[dict]:
        """Live: the states one control move away (`Controls.neighbours`).

        Returns:
            At most `MAX_PREFETCH` states (control name -> value), most likely first.
        """
        return self.controls_state.neighbours()

    def results(self):
        """The DataFrame on screen with its provenance columns (waits while it is measured).

        Returns:
            The table, provenance columns in front (`PanelView.results`); None if there is none.
        """
        return settled(self).view.results()

    def to_csv(self, path=None):
        """Write the numbers on screen and their provenance as CSV (waits while they are measured).

        Args:
            path: the file to write; None for the panel's ``csv_name`` in the current folder.

        Returns:
            The path written.
        """
        return settled(self).view.to_csv(path)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until a measurement started by a click is drawn.

        Args:
            timeout: the most seconds to wait; None for no limit.

        Returns:
            True when none runs any more; False when the timeout came first.
        """
        return self.job.wait(timeout)

    # ---- what the learner does ---------------------------------------------------------------------
    def set(self, **changes) -> None:
        """Change controls as a user would (``panel.set(dtype="bf16", N=8)``) and return when the
        figure shows the result. In recorded mode a value that was not recorded is accepted, and
        the panel then shows why there is no data.

        Args:
            **changes: control name -> its new value; ``gpu=``: answer from another GPU (`pick_gpu`).
        """
        if "gpu" in changes:
            self.pick_gpu(changes.pop("gpu"))
        self.controls_state.check_names(changes)
        changes = {name: _spelled(name, value) for name, value in changes.items()}
        self._defer += 1
        try:
            for name, value in changes.items():
                self.view.offer(name, value)
                w = self.view.widgets[name]
                if w.value == value and self.value(name) != value:
                    self._on_control(name, value)
                else:
                    self.view.click(name, value)
        finally:
            self._defer -= 1
        if self._pending and not self._defer:
            self.refresh()

    def reset(self) -> None:
        """Every control back to the base, and redraw."""
        self.controls_state.state = dict(self.cfg.base)
        self.refresh()

    def pick_gpu(self, recording: Optional[str]) -> None:
        """Answer from another GPU: a shipped recording's name (e.g. ``"h200"``), or None for this
        GPU live (recorded mode: the default recording). Where the convolution on screen was not
        recorded there, the controls go back to the base.

        Args:
            recording: the recording's name; None for this GPU.
        """
        exp = self.cfg.experiment
        if not self.gpu.pick(exp, recording) and self.view.gpu_picker.value == self.gpu.value(exp):
            return
        self.use(
            self.cfg,
            "The convolution on screen was not recorded on that GPU: the controls went back to the base. ",
            rebuild=True,
        )

    def use(self, cfg: PanelConfig, note: str, rebuild: bool = False) -> None:
        """Show ``cfg`` from the GPU picked (keeping the values on screen where recorded, else the
        base, saying ``note``), and redraw.

        Args:
            cfg: the panel configuration to show.
            note: what the status line says when the controls went back to the base.
            rebuild: make the control widgets again (live and recorded ones differ).
        """
        c = self.controls_state
        c.use(cfg, self.live, self.gpu.recording(cfg.experiment))
        moved = not self.live and not c.recorded(c.state)
        if moved:  # the base; the configuration's own where a lesson's opening was not recorded there
            c.state = dict(cfg.base if c.recorded(cfg.base) or cfg.own_base is None else cfg.own_base)
        self.job.name = cfg.experiment
        if rebuild:
            self.background = self.live
            self.view.rebuild(self.live, self.gpu.value(cfg.experiment))
        self.view.sync(c)
        self.refresh()
        if moved:
            self.view.say("ok", html.escape(note) + self.view.status.value)

    def _on_control(self, name: str, value) -> None:
        self.controls_state.state = self.controls_state.moved(self.state, name, value)
        if self._defer:
            self._pending = True
            return
        self._on_button("measure")

    def _on_button(self, which: str) -> None:
        """A control or button moved in the browser: live, measure in a background thread (the
        kernel stays free to hear the next click); recorded, answer at once."""
        if which == "reset":
            self.controls_state.state = dict(self.cfg.base)
        force = which == "rerun"
        if not self.background:
            self.refresh(force)
        else:
            self.job.start(lambda gen: self.refresh(force, _generation=gen))

    # ---- getting and drawing a table ------------------------------------------------------------------
    def refresh(self, force: bool = False, _generation: Optional[int] = None) -> None:
        """Answer the request on screen and update the figure in place (in this thread; a
        measurement a click started in the background stops at its next checkpoint): `answer`.

        Args:
            force: measure again and replace the saved result (live; "measure again").
        """
        answer(self, force=force, generation=_generation)

    def _repr_mimebundle_(self, **kwargs):
        return self.view.box._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        mode = "live" if self.live else "recorded"
        return f"<{type(self).__name__} {self.cfg.experiment} {mode} {self.state}>"


def _spelled(name: str, value):
    """A dtype or layout as labkit spells it (``"FP16"`` is ``"fp16"``, as in `ConvSpec`); any other
    value as given (a value that is no dtype shows the panel's no-data message)."""
    spell = {"dtype": dtype_name, "layout": layout_name}.get(name)
    if spell is None or not isinstance(value, str):
        return value
    try:
        return spell(value)
    except InvalidSpec:
        return value
