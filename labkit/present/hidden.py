"""A prediction's answer (its chart, table or summary), hidden until the learner answers or asks
to see it: what ``check.after_answer(name, chart, summary)`` returns.

Shown in a notebook it is one ipywidgets ``Output``. While exercise ``name`` has no answer it
holds a line saying what to do and a button that shows the answer without predicting. Once the
exercise has an answer (any: right or wrong, in this kernel or an earlier one, as the progress file
`labkit.experiments.exercise` keeps it) or was revealed (``reveal=True``, or the button), the
same output holds the chart and the summary, in place, with no cell run again; ``check.reset()``
hides it again.

It works with only a kernel (nbmake, no browser): the state is kernel-side, in `Hidden.shown` and
the ``Output``'s ``outputs``, which a test reads (`made` lists this kernel's).
"""

from __future__ import annotations

import weakref
from typing import Optional, Sequence

import ipywidgets as W
from IPython.core.formatters import DisplayFormatter
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Markdown

from ..experiments import exercise
from ..experiments.exercise import Exercise

#: the button's words
SHOW = "Show the answer without predicting"
#: the Output's CSS class, and its button's (the browser tests find hidden answers by them)
CSS_CLASS = "labkit-after-answer"
BUTTON_CLASS = "labkit-show-answer"


def note(names: Sequence[str], *, again: bool = False) -> str:
    """The line shown in place of the answer: what to do to see it.

    Args:
        names: the exercises' check names.
        again: a line above says it in full (the same exercises hide more of their answer): say
            it short.

    Returns:
        Markdown.
    """
    calls = " and ".join(f"`check.{n}`" for n in names)
    if again:
        return f"**Hidden until you predict**, as above: an answer to {calls} shows this too. Or:"
    return (
        f"**Hidden until you predict.** Give {calls} above an answer{' each' if len(names) > 1 else ''} "
        "(any answer: put it in place of `None` and run that cell) and the answer shows here. Or, "
        "without predicting:"
    )


def _display_data(item) -> dict:
    """``item`` as an output of the ``Output``: what a cell would show for it, in every format it has.

    An object that displays itself (plotly's ``go.Figure`` has ``_ipython_display_``) would print
    into whichever cell runs now, not into the ``Output``: its formats are asked for instead.
    """
    # the kernel's own formatter; outside one, a formatter of its own (making a shell would make
    # every later get_ipython() answer as if a kernel ran: the prefetch worker would wait for its cells)
    formatter = (
        InteractiveShell.instance().display_formatter
        if InteractiveShell.initialized()
        else DisplayFormatter()
    )
    itself = formatter.ipython_display_formatter
    enabled, itself.enabled = itself.enabled, False
    try:
        data, metadata = formatter.format(item)
    finally:
        itself.enabled = enabled
    return {"output_type": "display_data", "data": data, "metadata": metadata}


#: weak references to every `Hidden` made in this kernel, in order
_MADE: list = []


def made() -> list:
    """Every `Hidden` of this kernel still alive, in the order made (what a test reads).

    Returns:
        The `Hidden` objects.
    """
    return [h for h in (r() for r in _MADE) if h is not None]


class Hidden:
    """What answers exercises ``exercises``, shown once each has an answer or was revealed.

    Args:
        exercises: the exercises (`labkit.experiments.exercise.Exercise`).
        items: what to show, in order (anything a notebook displays: a figure, a DataFrame, a
            Markdown text, a panel).
    """

    def __init__(self, exercises: Sequence[Exercise], items: Sequence):
        self.exercises = tuple(exercises)
        self.items = tuple(items)
        self.names = {ex.name for ex in self.exercises}
        #: the ``Output`` the notebook shows
        self.out = W.Output()
        self.out.add_class(CSS_CLASS)
        self.button = W.Button(description=SHOW, layout=W.Layout(width="auto"))
        self.button.add_class(BUTTON_CLASS)
        self.button.on_click(self.reveal)
        #: whether the answer is shown (None before the first look)
        self.shown: Optional[bool] = None
        #: an earlier `Hidden` of the same exercises says in full what to do: this one says it short
        self.again = any(h.names == self.names for h in made())
        exercise.listen(self._changed)
        _MADE.append(weakref.ref(self))
        self.refresh()

    def refresh(self) -> None:
        """Show the answer if every exercise has an answer (or was revealed), else the note."""
        show = all(exercise.answered(ex) for ex in self.exercises)
        if show == self.shown:
            return
        self.shown = show
        shown = (
            self.items
            if show
            else (Markdown(note([ex.name for ex in self.exercises], again=self.again)), self.button)
        )
        self.out.outputs = tuple(_display_data(item) for item in shown)

    def reveal(self, _button=None) -> None:
        """Show the answer without predicting (the button): each exercise counts as revealed."""
        for ex in self.exercises:
            if not exercise.answered(ex):
                exercise.record(ex, revealed=True)
        self.refresh()

    def _changed(self, names: Optional[set]) -> None:
        if names is None or names & self.names:
            self.refresh()

    def _repr_mimebundle_(self, **kwargs):
        return self.out._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        state = "shown" if self.shown else "hidden"
        return f"<Hidden until {', '.join(sorted(self.names))} answered: {state}>"
