"""Hands-on cells: code the learner writes against labkit's API, run on this GPU or, in recorded mode,
on a GPU simulated from the recording in use.

A lesson marks such a cell with the cell magic ``%%handson <name>`` (registered by the lesson's
banner). The cell runs in the notebook's namespace with the hands-on GPU current
(`labkit.practice`: ``lessons.device()``): live, this machine's GPU; recorded, a `labkit.simgpu`
GPU replaying the recording, so the same code runs and its check judges it, every number it gives
said to be simulated. A cell that starts a task gets a fresh GPU; one that goes on from the cell
above keeps its GPU. With ``LABKIT_HANDSON=reference`` (the notebook tests) the hands-on's reference
solution runs in the cell's place, so every later cell finds what a learner who solved it would
have made. A stub the learner has not filled yet (``raise NotImplementedError``) and a labkit error
say so in one line; the notebook goes on.

Reference solutions are registered with `reference`; a lesson's topic module holds its own as data
(``HANDS_ON = {name: (source, fresh)}`` beside its experiments), registered by `register_topics`.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Dict

from ..errors import InvalidSpec, LabkitError
from ..gpu import device as devices
from ..gpu.workspaces.runner import WorkspaceTooSmall


@dataclass(frozen=True)
class HandsOn:
    """A hands-on cell's reference solution.

    Attributes:
        name: the cell's name (``%%handson <name>``).
        lesson: its lesson's number, e.g. ``"02"``.
        source: the reference solution's source.
        fresh: it starts on a fresh GPU (else it goes on with the cell above's).
        every_gpu: it runs on every GPU of its lesson (`labkit.practice.gpus`), not on one.
    """

    name: str
    lesson: str
    source: str
    fresh: bool = True
    every_gpu: bool = False


#: name -> its hands-on (see `reference`)
HANDS_ON: Dict[str, HandsOn] = {}


def reference(name: str, lesson: str, source: str, *, fresh: bool = True, every_gpu: bool = False) -> HandsOn:
    """Register the reference solution of hands-on cell ``name``.

    Args:
        name: what the cell's magic line names (``%%handson name``).
        lesson: the lesson's number.
        source: Python source that does what the cell asks.
        fresh: the cell starts on a fresh GPU (False: it goes on with the cell above's).
        every_gpu: the cell runs on every GPU of its lesson (its header names them all).

    Returns:
        The registered `HandsOn`.
    """
    h = HANDS_ON[name] = HandsOn(name, lesson, source, fresh=bool(fresh), every_gpu=bool(every_gpu))
    return h


def register_topics() -> int:
    """Register the reference solution of every topic's hands-on cells (`labkit.experiments.hands_on`).

    Returns:
        How many were registered.
    """
    from .. import experiments  # heavy: plotly, where a chart is drawn

    found = experiments.hands_on()
    for name, (lesson, source, fresh, every_gpu) in found.items():
        reference(name, lesson, source, fresh=fresh, every_gpu=every_gpu)
    return len(found)


def using_reference() -> bool:
    """Whether hands-on cells run their reference solution (``LABKIT_HANDSON=reference``).

    Returns:
        True when they do.
    """
    return os.environ.get("LABKIT_HANDSON", "").strip().lower() == "reference"


def run(name: str, cell: str, namespace: dict) -> bool:
    """Run a hands-on cell: ``cell`` (or the reference with ``LABKIT_HANDSON=reference``) in
    ``namespace``, with the hands-on GPU current (`labkit.practice.current`; a fresh one for a
    cell that starts a task).

    Args:
        name: the hands-on's name.
        cell: the cell's source, after its magic line.
        namespace: the notebook's namespace.

    Returns:
        Whether the cell ran to its end (False: it stopped at a stub or a labkit error, said in one line).
    """
    from .. import practice  # heavy: pandas, the simulator and the experiments: not for the first cell
    from ..experiments.checking import wrapped  # heavy: plotly, where a chart is drawn
    from ..experiments.handson_check import hint  # heavy: plotly, where a chart is drawn

    if name not in HANDS_ON:
        register_topics()
    if name not in HANDS_ON:
        raise InvalidSpec(
            "hands-on", name, f"must be one of {', '.join(sorted(HANDS_ON)) or '(none registered)'}"
        )
    h = HANDS_ON[name]
    gpu = practice.new() if h.fresh else practice.current()
    header = _header(h, gpu, practice.gpu_labels() if h.every_gpu else {gpu.gpu: gpu.label})
    if header:
        print(wrapped(header))
    gpu.begin_cell()
    source = h.source if using_reference() else cell
    with devices.use(gpu.device):
        try:
            exec(compile(source, f"<hands-on {name}>", "exec"), namespace)  # noqa: S102 - the learner's cell
        except NotImplementedError as exc:
            print(wrapped(f"not yet: {exc or 'a stub is still empty'} (write your code where the cell says)"))
            return False
        except WorkspaceTooSmall as exc:  # the Runner refused a call: the learner's to fix, with a hint
            print(wrapped(f"not yet ({gpu.label}): {exc}\nHint: {hint(name, 'too_small')}"))
            return False
        except LabkitError as exc:
            print(wrapped(f"stopped ({gpu.label}): {exc}"))
            return False
        except (ValueError, TypeError, ArithmeticError) as exc:  # int(NaN) and the like, from a time
            untimed = _untimed(gpu)
            if not untimed:
                raise
            print(
                wrapped(
                    f"stopped ({gpu.label}): {exc}, from a time that is NaN: {untimed}.\nHint: {NAN_HINT}"
                )
            )
            return False
    return True


def _header(h: HandsOn, gpu, labels: Dict[str, str]) -> str:
    """What a cell's output opens with: the GPUs it runs on where one is simulated, else ""."""
    simulated = [n for n, where in labels.items() if where.startswith("simulated")]
    if not simulated or not (h.fresh or h.every_gpu):
        return ""
    how = "(labkit.simgpu: the recorded times replayed under CUDA's stream and memory rules; no measurement)"
    if not h.every_gpu:
        return f"Running on a GPU {gpu.label} {how}."
    gpus = "; ".join(f"the {n} {where}" for n, where in labels.items())
    return f"Running on {len(labels)} GPUs: {gpus} {how}."


#: what a cell stopped by arithmetic on a NaN time is told
NAN_HINT = (
    "NaN is the simulated GPU's 'no time'. Let it reach the check as it is (math.isnan(t) tells it; "
    "int() and round() refuse it): the check says what your events timed and what to change."
)


def _untimed(gpu) -> str:
    """Why a time of this cell is NaN on a simulated GPU, or "" when every time it read is a number."""
    from ..experiments.handson_check import took  # heavy: plotly, where a chart is drawn

    timings = gpu.timings[gpu.cell_mark.timings :]
    if not gpu.simulated or not any(math.isnan(t.us) for t in timings):
        return ""
    return took(math.nan, gpu, "gpu.elapsed_us")


def register_magic() -> bool:
    """Make ``%%handson`` available in this IPython kernel (no-op outside IPython).

    Returns:
        Whether it is registered.
    """
    if "IPython" not in sys.modules:  # not in IPython: no kernel or shell has imported it
        return False
    from IPython import get_ipython  # heavy: IPython, in a kernel

    ip = get_ipython()
    if ip is None:
        return False

    def handson(line: str, cell: str) -> None:
        run(line.strip(), cell, ip.user_ns)

    ip.register_magic_function(handson, magic_kind="cell", magic_name="handson")
    return True
