"""A panel's plotly ``FigureWidget``, with plotly's front end sent to the browser once per kernel.

From plotly 6 on, ``FigureWidget`` is an anywidget: its JavaScript (plotly.js and the widget, about
5 MB) is the ``_esm`` trait of **every** figure. Each figure's comm sends it, the browser
imports it as a new module for each figure (anywidget caches nothing), and a saved notebook
keeps one copy per figure (plotly/plotly.py#5143: 10 s per figure on a JupyterHub far away).

Here one figure of a kernel carries the bundle, inside a small loader module: the first, and
again the next one made after it was closed. Every other figure carries only the loader (about
2 KB). In the page, the loaders share one import of the bundle (`REGISTRY` on ``globalThis``,
keyed by plotly's version and the bundle's size), and each figure still gets its own plotly front
end (plotly's default export is a factory, called once per figure, as anywidget calls it). A page
opened again later restores every live widget of the kernel, the one with the bundle among them.
`send_front_end` (the warm-up's last step, while the learner reads) makes an empty figure carry
it before any panel, so that a lesson's first panel costs what the others do.
A loader that gets no bundle within `GIVE_UP_MS` fails with an error saying so (drawn by
anywidget in the output), never a blank chart without a word.

``LABKIT_PLOTLY_ONCE=0`` gives plotly's own ``FigureWidget`` (the bundle in every figure), for
comparison (scripts/bench_browser_figures.py).
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import weakref
from typing import Optional

from .. import env

#: the page-wide name under which the loaders share the bundle's import
REGISTRY = "__labkit_plotly_widget__"
#: how long a loader without the bundle waits for the figure that carries it (milliseconds)
GIVE_UP_MS = 60_000

#: the loader; ``@KEY@`` and ``@EMBEDDED@`` (a JavaScript string, or null) are filled in
LOADER_JS = """// labkit: plotly's FigureWidget front end, imported once per page
// (labkit/draw/figure_widget.py)
const KEY = @KEY@;
const EMBEDDED = @EMBEDDED@;
function registry() {
  let r = globalThis[KEY];
  if (!r) {
    let resolve;
    r = globalThis[KEY] = { factory: new Promise((ok) => { resolve = ok; }), resolve, started: false };
  }
  return r;
}
function provide(r, source) {
  if (r.started) return;
  r.started = true;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  r.resolve(import(/* webpackIgnore: true */ url).then((mod) => {
    URL.revokeObjectURL(url);
    return mod.default !== undefined ? mod.default : () => ({ render: mod.render });
  }));
}
function late() {
  return new Promise((_, fail) => setTimeout(() => fail(new Error(
    "labkit: plotly's front end did not reach this page (the figure that carries it is gone): " +
    "run the cell again")),
    @GIVE_UP_MS@));
}
export default () => {
  let inner = null;
  const widget = () => {
    if (inner === null) {
      const r = registry();
      if (EMBEDDED !== null) provide(r, EMBEDDED);
      inner = Promise.race([r.factory, late()]).then((f) => (typeof f === "function" ? f() : f));
    }
    return inner;
  };
  return {
    async initialize(ctx) {
      const w = await widget();
      return w.initialize ? w.initialize(ctx) : undefined;
    },
    async render(ctx) {
      const w = await widget();
      return w.render(ctx);
    },
  };
};
"""

_lock = threading.RLock()
_classes: dict = {}
#: the live figure that carries the bundle (a weak reference; None before the first)
_carrier: Optional[weakref.ref] = None
#: the empty figure `send_front_end` made (kept: it carries the bundle for the figures to come)
_kept = None


def bundle() -> str:
    """plotly's FigureWidget front end (the ``_esm`` of plotly's own class).

    Returns:
        The JavaScript, as text.
    """
    from plotly.basewidget import BaseFigureWidget  # heavy: plotly, where a chart is drawn

    return str(BaseFigureWidget._esm)


def registry_key() -> str:
    """The page-wide name of this plotly's bundle.

    Returns:
        `REGISTRY`, plotly's version and the bundle's size, as one string.
    """
    import plotly  # heavy: plotly, where a chart is drawn

    return f"{REGISTRY}{plotly.__version__}_{len(bundle())}"


def loader(embedded: bool) -> str:
    """The loader module's JavaScript, with or without the bundle inside.

    Args:
        embedded: whether the module carries the bundle itself.

    Returns:
        `LOADER_JS` with its placeholders filled in.
    """
    return (
        LOADER_JS.replace("@KEY@", json.dumps(registry_key()))
        .replace("@GIVE_UP_MS@", str(GIVE_UP_MS))
        .replace("@EMBEDDED@", json.dumps(bundle()) if embedded else "null")
    )


def figure_class(embedded: bool):
    """The FigureWidget class whose ``_esm`` is the loader, with or without the bundle.

    Args:
        embedded: whether its figures carry the bundle.

    Returns:
        A subclass of ``go.FigureWidget``, made once per value of ``embedded``.
    """
    with _lock:
        cls = _classes.get(embedded)
        if cls is None:
            import plotly.graph_objects as go  # heavy: plotly, where a chart is drawn

            name = "PlotlyOnceFullFigureWidget" if embedded else "PlotlyOnceFigureWidget"
            cls = _classes[embedded] = type(
                name, (go.FigureWidget,), {"_esm": loader(embedded), "__module__": __name__}
            )
        return cls


def carrier():
    """The live figure of this kernel that carries plotly's bundle.

    Returns:
        The figure; None when there is none (a closed one no longer counts).
    """
    w = _carrier() if _carrier is not None else None
    return w if w is not None and getattr(w, "comm", None) is not None else None


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (widgets there have comms to a page).

    Returns:
        True in a kernel.
    """
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    return getattr(shell, "kernel", None) is not None


def send_front_end() -> bool:
    """Send plotly's bundle to the page now, in an empty figure, when no live figure carries it.

    It runs only in a Jupyter kernel; the figure is kept, so a lesson's first panel need not carry
    the bundle.

    Returns:
        True when it made the figure.
    """
    global _kept

    if not in_kernel() or not env.switched_on("LABKIT_PLOTLY_ONCE"):
        return False
    with _lock:
        if carrier() is not None:
            return False
        _kept = new_figure_widget()  # no live carrier: this one carries the bundle
        return True


def new_figure_widget(*args, **kwargs):
    """A ``FigureWidget`` whose front end comes to the page once per kernel.

    It carries plotly's bundle when no live figure of this kernel does (the first, or the next after
    that one was closed), else only the loader. ``LABKIT_PLOTLY_ONCE=0`` gives plotly's own class.

    Args:
        *args: ``go.FigureWidget``'s positional arguments.
        **kwargs: ``go.FigureWidget``'s keyword arguments.

    Returns:
        The figure widget.
    """
    global _carrier

    if not env.switched_on("LABKIT_PLOTLY_ONCE"):
        import plotly.graph_objects as go  # heavy: plotly, where a chart is drawn

        return go.FigureWidget(*args, **kwargs)
    with _lock:
        embedded = carrier() is None
        w = figure_class(embedded)(*args, **kwargs)
        if embedded:
            _carrier = weakref.ref(w)
    return w


def keep_drawn_state(fig) -> None:
    """Store what a FigureWidget shows now as its widget state, for a view drawn again later.

    plotly sends a figure's later changes to the page as one-off messages (restyle, relayout) and
    stores its traces and layout as widget state (``_widget_data``, ``_widget_layout``) only when the
    figure is first displayed. A view drawn again from that state (the page reloaded, the notebook
    opened again, a new view of the output) then showed the figure as first built: a panel's first
    request, or bare axes where a request had no data. This stores the state as plotly's own
    ``_repr_mimebundle_`` does; the page's views already drawn do nothing with it (plotly's front
    end draws from the messages).

    Args:
        fig: a ``go.FigureWidget``; anything else is left as it is.
    """
    if hasattr(fig, "_widget_data") and hasattr(fig, "_layout_obj"):
        fig._widget_layout = copy.deepcopy(fig._layout_obj._props)
        fig._widget_data = copy.deepcopy(fig._data)
