"""What a panel looks like: the ipywidgets (header, controls, buttons, status line, message
line) and one plotly ``FigureWidget`` updated in place; the table on screen (`df`) and its CSV.

It draws what it is given and tells its owner when a control or a button moves (the callbacks
passed in); it never measures.
"""

from __future__ import annotations

import copy
import html
import json
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import ipywidgets as W
from ipywidgets.widgets.widget_button import ButtonStyle
from ipywidgets.widgets.widget_description import DescriptionStyle
from ipywidgets.widgets.widget_string import HTMLStyle
from traitlets import TraitError

from ... import env, experiments
from ...draw import plots
from ...draw.figure_widget import new_figure_widget
from ...draw.plain_figure import validating
from ...errors import InvalidSpec, LabkitError, RecordedDataError
from .controls import CONTROLS, ControlDef, Controls, label

#: width of a panel's chart in pixels. A FigureWidget is drawn before it is in the page (plotly/
#: plotly.py#5208), so it cannot size itself to the output and would fall back to 700 px.
FIG_WIDTH = 900
#: a control's description column, and what a dropdown needs besides its text (padding, arrow)
DESCRIPTION_PX = 110
SELECT_CHROME_PX = 40
#: the grid's narrowest column (``minmax(190px, 1fr)``)
COLUMN_PX = 190


def fit(labels) -> dict:
    """The room a dropdown needs for its longest option, as layout properties.

    An option takes about 8 px a character at the widgets' 13 px font. A dropdown that does not fit a
    grid column spans two, so "resnet50_fp16_nhwc" is not cut to "resnet50_fp1".

    Args:
        labels: the options' texts.

    Returns:
        ``grid_column`` and ``min_width`` (None for a dropdown that fits one column).
    """
    need = DESCRIPTION_PX + SELECT_CHROME_PX + 8 * max((len(t) for t in labels), default=0)
    wide = need > COLUMN_PX
    return {"grid_column": "span 2" if wide else None, "min_width": f"{need}px" if wide else None}


def fit_options(w, labels) -> None:
    """Give a dropdown with a layout of its own room for its longest option (`fit`).

    Args:
        w: the dropdown.
        labels: its options' labels.
    """
    for k, v in fit(labels).items():
        setattr(w.layout, k, v)


class Message(str):
    """A panel's error text: a plain string that a notebook shows as text, not as a quoted repr."""

    def _repr_markdown_(self) -> str:
        return html.escape(str(self))


def status_html(kind: str, text: str) -> str:
    """The status line.

    Args:
        kind: "ok", "running" or "error".
        text: the message, as HTML.

    Returns:
        The line, as HTML.
    """
    color = {"ok": "#3c4043", "running": "#1a73e8", "error": "#b00020"}[kind]
    icon = {"ok": "&#10003;", "running": "&#8987;", "error": "&#9888;"}[kind]
    return f"<span style='font-size:12px;color:{color}'>{icon} {text}</span>"


def update_in_place(fig, new) -> None:
    """Copy a figure's traces and layout into a FigureWidget, inside one batch_update.

    With the same number and types of traces (the builders guarantee it) each trace is updated in
    place; otherwise (a different chart) the traces are replaced, still in the same widget.

    Args:
        fig: the FigureWidget on screen.
        new: the new ``go.Figure``.
    """
    same = len(fig.data) == len(new.data) and all(a.type == b.type for a, b in zip(fig.data, new.data))
    layout = new.layout.to_plotly_json()
    layout.pop("template", None)
    with plots.batch(fig):  # kept as the widget's state too: a reloaded page draws the same
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


def figure_widget(fig, width: Optional[int]):
    """A figure as a FigureWidget, whose front end comes to the page once per kernel.

    ``fig`` was validated as it was built, so the widget is made from a copy of its properties
    without validating them a second time (3.4 ms for the network report's chart on a 2-core CPU
    machine, 14 ms validated). It then validates again, so every later update (`update_in_place`) is
    checked and sent to the page as plotly's own widget is (tests/test_panel_parts.py: the same
    widget state, chart by chart, update by update). ``_data``, ``_layout`` and ``_validate`` are
    plotly's own (plotly 6 and 7).

    Args:
        fig: a ``go.Figure``.
        width: the widget's width in pixels; None leaves it.

    Returns:
        The widget (`labkit.draw.figure_widget.new_figure_widget`).
    """
    # the validated properties as they are (``to_dict`` would turn numpy arrays into base64 specs)
    w = validating(
        new_figure_widget(copy.deepcopy(dict(data=fig._data, layout=fig._layout)), _validate=False)
    )
    if width:
        w.layout.width = width
    return w


def header_html(controls: Controls) -> str:
    """The panel's title and what answers it: live on this GPU, or which recording.

    Args:
        controls: the panel's `Controls`.

    Returns:
        HTML.
    """
    cfg = controls.cfg
    if controls.live:
        e = env.environment()
        note = (
            f"<b>Live</b> on {html.escape(env.gpu_label(e.gpu_name))} (cuDNN {e.cudnn_backend}): "
            "every change measures now; building a cuDNN graph can take 0.5-10 s, "
            "the status line says when it runs."
        )
    else:
        prov = controls.recording.provenance(cfg.experiment)
        fixed = ", ".join(f"{CONTROLS[k].label.split(' (')[0]}={label(v)}" for k, v in controls.fixed.items())
        moves = ""  # a panel of one control has nothing to grey and no other factor to move
        if len(controls.shown) > 1:
            moves = (
                "The controls offer only recorded values, <b>one factor at a time</b> from the request "
                "on screen; a greyed control has one recorded value from here: "
                f"<i>reset to base</i> ({html.escape(cfg.base_text)}) to move another."
            )
        elif controls.shown:
            moves = (
                "The control offers only recorded values; <i>reset to base</i> "
                f"({html.escape(cfg.base_text)}) goes back to where the panel opened."
            )
        recorded = (
            f"<b>Recorded</b> on {html.escape(env.gpu_label(prov['gpu']))} with cuDNN "
            f"{prov['cudnn_backend']} on {prov['date']}."
        )
        fixed_text = f"Fixed in this recording: {html.escape(fixed)}." if fixed else ""
        note = " ".join(t for t in (recorded, moves, fixed_text) if t)
    return (
        f"<div style='font-size:15px;font-weight:600'>{html.escape(cfg.title)}</div>"
        f"<div style='font-size:12px;color:#3c4043;line-height:1.4'>{note}</div>"
    )


class ControlLook:
    """How a panel's controls look: one style object for all of them and one layout object per
    kind (shown or not, one or two grid columns wide), shared by the controls of that kind. Each
    style or layout object is a widget of its own, a comm the kernel opens and sends to the page;
    a control that changes kind gets another object (`relayout`), none is changed in place."""

    def __init__(self):
        self.style = DescriptionStyle(description_width=f"{DESCRIPTION_PX}px")
        self.layouts: Dict[tuple, W.Layout] = {}  # (display, grid_column, min_width) -> the one shared

    def layout(self, display=None, grid_column=None, min_width=None) -> W.Layout:
        """The layout of a control, shared by every control that looks the same.

        Args:
            display: None to show it, "none" to hide it.
            grid_column: its column in the grid of controls.
            min_width: its least width (CSS), as `fit` says.

        Returns:
            The ``ipywidgets.Layout``.
        """
        key = (display, grid_column, min_width)
        lay = self.layouts.get(key)
        if lay is None:
            lay = self.layouts[key] = W.Layout(
                width="auto", display=display, grid_column=grid_column, min_width=min_width
            )
        return lay

    def relayout(self, w, **changes) -> None:
        """Give a control the shared layout with some properties changed.

        Args:
            w: the control's widget.
            **changes: ``display``, ``grid_column`` or ``min_width``.
        """
        now = {k: getattr(w.layout, k) for k in ("display", "grid_column", "min_width")}
        lay = self.layout(**{**now, **changes})
        if lay is not w.layout:
            w.layout = lay

    def give_options(self, w, labelled) -> None:
        """Give a dropdown its (label, value) options, and the room its longest label needs (`fit`).

        Args:
            w: the dropdown.
            labelled: the options (`dropdown_options`).
        """
        w.options = labelled
        self.relayout(w, **fit([t for t, _ in labelled]))

    def make(self, c: ControlDef, live: bool) -> W.Widget:
        """A control's widget.

        Args:
            c: the control.
            live: live, an int control is a text box; else a dropdown (recorded: its options come with
                the state, `PanelView.sync`).

        Returns:
            The widget.
        """
        desc = (c.recorded_label or c.label) if not live else c.label
        if live and c.kind == "int":
            return W.BoundedIntText(
                value=1,
                min=c.lo,
                max=c.hi,
                description=desc,
                continuous_update=False,
                style=self.style,
                layout=self.layout(),
            )
        opts = [(label(v), v) for v in c.live_options] if live else []
        return W.Dropdown(
            options=opts, description=desc, style=self.style, layout=self.layout(**fit([t for t, _ in opts]))
        )


def buttons(live: bool, csv_name: str) -> Tuple[W.Button, W.Button, W.Button]:
    """A panel's three buttons, sharing one style object (a comm of its own).

    Args:
        live: the panel measures live ("measure again" is shown only then).
        csv_name: the file "save CSV" writes, named on its button.

    Returns:
        The "reset to base", "measure again" and "save <csv_name>" buttons, not yet wired.
    """
    style, auto = ButtonStyle(), W.Layout(width="auto")
    reset = W.Button(
        description="reset to base",
        icon="undo",
        layout=auto,
        style=style,
        tooltip="every control back to the lesson's base",
    )
    rerun = W.Button(
        description="measure again",
        icon="refresh",
        tooltip="measure now on the GPU and replace the saved result",
        layout=W.Layout(width="auto", display=None if live else "none"),
        style=style,
    )
    csv = W.Button(
        description=f"save {csv_name}",
        icon="download",
        layout=auto,
        style=style,
        tooltip="write the numbers on screen, with their provenance, as CSV",
    )
    return reset, rerun, csv


def gpu_dropdown(options, value: str) -> W.Dropdown:
    """The GPU dropdown, wide enough for its longest option, hidden when it offers one GPU only.

    Args:
        options: its (label, value) pairs (`GPUPicker.options`).
        value: its value.

    Returns:
        The dropdown, not yet observed.
    """
    w = W.Dropdown(
        options=options,
        value=value,
        description="GPU",
        style={"description_width": "36px"},
        layout=W.Layout(width="auto"),
    )
    fit_options(w, [t for t, _ in w.options])
    w.layout.display = None if len(w.options) > 1 else "none"
    return w


def dropdown_options(options, value, *, live: bool) -> List[tuple]:
    """A dropdown's (label, value) pairs, the value on screen added where it is not an option.

    Args:
        options: the values the control offers now (`Controls.options`).
        value: the value on screen.
        live: the panel measures live (else an added value reads "(not recorded)").

    Returns:
        The pairs, in the options' order, the added value last.
    """
    labelled = [(label(v), v) for v in options]
    if value not in options:
        labelled.append((f"{label(value)} (not recorded)" if not live else label(value), value))
    return labelled


def failure_text(exc: Exception, *, unexpected: bool = False) -> str:
    """Why a request has no table, for the learner: the error's kind and message, and for a value
    that was not recorded the nearest values that were, keeping the most other controls as they
    are (not the recording's file path).

    Args:
        exc: the error.
        unexpected: it is a bug, not the learner's request (the text asks to report it).

    Returns:
        The text, plain.
    """
    kind = type(exc).__name__
    if isinstance(exc, RecordedDataError) and exc.nearest:
        near = "; ".join(
            f"{str(k).split('.')[-1]} = "
            + (", ".join(label(x) for x in v) if isinstance(v, (list, tuple)) else label(v))
            for k, v in exc.nearest.items()
        )
        text = f"{kind}: {exc.message}; nearest recorded values, changing the fewest controls: {near}"
    else:
        text = f"{kind}: {exc}"
    return f"unexpected error (please report it): {text}" if unexpected else text


def failure_html(text: str, exc: Exception) -> str:
    """The message line under a chart that has no table: the text, and what to do about it.

    Args:
        text: `failure_text`.
        exc: the error, which says what advice fits.

    Returns:
        The line, HTML.
    """
    if isinstance(exc, RecordedDataError):
        advice = "Pick a recorded value from the controls, or reset to base."
    elif isinstance(exc, InvalidSpec):
        advice = "That combination is not a valid convolution; change a control."
    else:
        advice = ""
    return (
        f"<div style='color:#b00020;background:#fdecea;padding:6px 8px;border-radius:4px;"
        f"font-size:13px'>{html.escape(text)}" + (f"<br><i>{advice}</i>" if advice else "") + "</div>"
    )


def with_provenance(df):
    """A table with its provenance as columns in front, as "save CSV" writes it.

    Args:
        df: a result, its provenance in ``attrs``.

    Returns:
        A copy with ``mode``, ``gpu``, ``cudnn_backend``, ``cudnn_frontend``, ``date``, ``experiment``
        and ``request`` (JSON) first.
    """
    out = df.copy()
    a = df.attrs
    for i, col in enumerate(("mode", "gpu", "cudnn_backend", "cudnn_frontend", "date", "experiment")):
        out.insert(i, col, a.get(col))
    out.insert(6, "request", json.dumps(a.get("request"), sort_keys=True))
    return out


class PanelView:
    """The widgets of one panel.

    The callbacks are called when the learner moves something, never while the view itself syncs
    the widgets to the state.

    Args:
        live: the panel measures live.
        csv_name: the file "save CSV" writes.
        fig_width: the figure's width, in pixels; None leaves plotly's.
        gpu_options: the GPU dropdown's (label, value) pairs (`GPUPicker.options`).
        gpu_value: its value.
        on_control: ``on_control(name, value)``.
        on_button: ``on_button(name)``, for "reset" and "rerun".
        on_gpu: ``on_gpu(value)``.
        controls: the controls this panel can show; default every one in `CONTROLS` (a widget is
            made for each).
    """

    def __init__(
        self,
        live: bool,
        csv_name: str,
        *,
        fig_width: Optional[int],
        gpu_options,
        gpu_value: str,
        on_control: Callable,
        on_button: Callable,
        on_gpu: Callable,
        controls: Optional[Iterable[str]] = None,
    ):
        self.live, self.csv_name, self.fig_width = live, csv_name, fig_width
        #: the controls this panel can show (default: every one in CONTROLS); a widget is made for each
        wanted = None if controls is None else set(controls)
        self.names = [n for n in CONTROLS if wanted is None or n in wanted]
        self.on_control, self.on_gpu = on_control, on_gpu
        self.syncing = False
        self.df = None
        self.error: Optional[str] = None
        self.fig = None
        # shared style and layout objects (`ControlLook`, the text lines', the buttons'): each is a comm
        # of its own, and sharing them keeps a panel at 25-38 comms (31-67 with one per widget)
        self.look = ControlLook()
        text_style, text_layout = HTMLStyle(), W.Layout()
        self.widgets: Dict[str, W.Widget] = {n: self.make_widget(CONTROLS[n]) for n in self.names}
        self.header = W.HTML(style=text_style, layout=text_layout)
        self.controls_box = W.GridBox(
            list(self.widgets.values()),
            layout=W.Layout(grid_template_columns="repeat(4, minmax(190px, 1fr))", grid_gap="4px 12px"),
        )
        self.reset_button, self.rerun_button, self.csv_button = buttons(live, csv_name)
        self.reset_button.on_click(lambda _b: on_button("reset"))
        self.rerun_button.on_click(lambda _b: on_button("rerun"))
        self.csv_button.on_click(lambda _b: self.save_clicked())
        self.status = W.HTML(style=text_style, layout=text_layout)
        self.message = W.HTML(style=text_style, layout=text_layout)
        self.gpu_picker = gpu_dropdown(gpu_options, gpu_value)
        self.gpu_picker.observe(lambda change: self.syncing or on_gpu(change["new"] or None), names="value")
        # wrapped, not shrunk (live, beside the GPU picker, their labels were cut: "reset to b...")
        self.buttons = W.HBox(
            [self.gpu_picker, self.reset_button, self.rerun_button, self.csv_button],
            layout=W.Layout(flex_flow="row wrap"),
        )
        self.box = W.VBox([self.header, self.controls_box, self.buttons, self.status, self.message])

    # ---- controls -------------------------------------------------------------------------------
    def make_widget(self, c: ControlDef) -> W.Widget:
        """The widget of one control, wired to ``on_control``.

        Args:
            c: the control.

        Returns:
            The widget (`ControlLook.make`).
        """
        w = self.look.make(c, self.live)
        w.observe(
            lambda change, name=c.name: self.syncing or self.on_control(name, change["new"]), names="value"
        )
        return w

    def rebuild(self, live: bool, gpu_value: str) -> None:
        """New control widgets for live or recorded mode (another GPU was picked).

        Args:
            live: the panel now measures live.
            gpu_value: the GPU dropdown's value (`GPUPicker.value`).
        """
        self.live = live
        self.syncing = True
        try:
            self.gpu_picker.value = gpu_value
            old = self.widgets
            self.widgets = {n: self.make_widget(CONTROLS[n]) for n in self.names}
            for w in old.values():
                w.close()
            self.controls_box.children = list(self.widgets.values())
            self.rerun_button.layout.display = None if live else "none"
        finally:
            self.syncing = False

    def offer(self, name: str, value) -> None:
        """Add a value to a dropdown that lacks it (a value set from code).

        Args:
            name: the control.
            value: the value (labelled "(not recorded)" in recorded mode).
        """
        w = self.widgets[name]
        if isinstance(w, W.Dropdown) and value not in [v for _, v in w.options]:
            self.syncing = True
            try:
                self.look.give_options(w, dropdown_options([v for _, v in w.options], value, live=self.live))
            finally:
                self.syncing = False

    def click(self, name: str, value) -> None:
        """Set a control as a learner's click would (its observer runs).

        Args:
            name: the control.
            value: its new value; `labkit.InvalidSpec` for one its widget does not take.
        """
        try:
            self.widgets[name].value = value
        except TraitError as exc:
            raise InvalidSpec(name, value, f"not a value this control takes ({exc})") from None

    def sync(self, controls: Controls) -> None:
        """Widget values, options, visibility from the state (no callback fires).

        Args:
            controls: the panel's state.
        """
        self.syncing = True
        try:
            self.header.value = header_html(controls)
            for name, w in self.widgets.items():
                shown = name in controls.shown
                self.look.relayout(w, display=None if shown else "none")
                if not shown:
                    continue
                value = controls.value(name)
                if isinstance(w, W.Dropdown):
                    labelled = dropdown_options(controls.options(name), value, live=self.live)
                    if list(w.options) != labelled:
                        self.look.give_options(w, labelled)
                    w.value = value
                    w.disabled = (not self.live) and len(labelled) <= 1
                else:
                    w.value = value
        finally:
            self.syncing = False

    # ---- the chart and the lines under it ----------------------------------------------------------
    def say(self, kind: str, text: str) -> None:
        """Set the status line.

        Args:
            kind: "ok", "running" or "error" (`status_html`).
            text: the line, HTML.
        """
        self.status.value = status_html(kind, text)

    def draw(self, experiment: str, df) -> None:
        """A table's chart into the panel's figure (made on first use).

        Args:
            experiment: the experiment, whose chart (`labkit.experiments.CHARTS`) draws it.
            df: its table (complete, or partial while measured).
        """
        new = experiments.CHARTS[experiment](df)
        if self.fig is None:
            self.show_figure(experiment, figure_widget(new, self.fig_width))
            return
        update_in_place(self.fig, new)

    def show(self, experiment: str, df) -> None:
        """A complete table: drawn, and kept as the one on screen.

        Args:
            experiment: the experiment.
            df: its table.
        """
        self.draw(experiment, df)
        self.df, self.error = df, None
        self.message.value = ""

    def show_figure(self, experiment: str, fig) -> None:
        """Show ``fig`` as the panel's chart for ``experiment`` (None: none until the next draw). The
        one it replaces is closed: a FigureWidget put back in the panel no longer follows its updates
        in the page, so a chart shown again is a new widget.

        Args:
            experiment: the experiment.
            fig: the FigureWidget, or None.
        """
        old = self.fig
        self.box.children = tuple(c for c in self.box.children if c is not old) + (
            (fig,) if fig is not None else ()
        )
        self.fig = fig
        if old is not None and old is not fig:
            old.close()

    def fail(
        self, experiment: str, exc: Exception, placeholder: Callable, *, unexpected: bool = False
    ) -> None:
        """No table for this request: say why, under the chart and on it.

        Args:
            experiment: the experiment.
            exc: why there is none.
            placeholder: makes the empty figure shown when the panel has none yet.
            unexpected: the error is a bug, not the learner's request (the text asks to report it).
        """
        self.df = None
        text = failure_text(exc, unexpected=unexpected)
        self.error = Message(text)
        self.message.value = failure_html(text, exc)
        self.say("error", "no data for this request (see below)")
        if self.fig is None:
            self.show_figure(experiment, figure_widget(placeholder(), self.fig_width))
        plots.no_data(self.fig, text)

    # ---- what is on screen, as a file ----------------------------------------------------------------
    def results(self):
        """The DataFrame on screen, with provenance columns in front.

        Returns:
            `with_provenance` of the table on screen; None if there is none.
        """
        return None if self.df is None else with_provenance(self.df)

    def to_csv(self, path=None) -> Path:
        """Write the numbers on screen and their provenance (`results`) as CSV.

        Args:
            path: the file; None for the panel's ``csv_name`` in the current folder.

        Returns:
            The path written; `labkit.LabkitError` when nothing is on screen.
        """
        df = self.results()
        if df is None:
            raise LabkitError(f"nothing to save: {self.error or 'no result yet'}")
        p = Path(path or self.csv_name)
        df.to_csv(p, index=False)
        return p

    def save_clicked(self) -> None:
        """Write the CSV (`to_csv`) and say where, or why it could not be written, on the status line."""
        try:
            p = self.to_csv()
            self.say("ok", f"wrote {html.escape(str(p.resolve()))} ({len(self.df)} rows)")
        except (LabkitError, OSError) as exc:
            self.say("error", html.escape(f"could not save: {exc}"))
