"""The run function of lesson 09, `network_report`: a network's convolution calls measured step by
step in the worker process (`labkit.gpu.report_steps`: each distinct convolution once, then the pass under
each strategy), gathered into one long DataFrame with a ``table`` column (`tables`). Each step has
`step_budget_s` seconds; a step that has not answered `KILL_GRACE_S` seconds after its budget is
killed with its worker and its rows say so.
"""

from __future__ import annotations

import collections
import time
from typing import Dict, List, Optional

import pandas as pd

from ... import networks
from ...draw.prose import counted
from ...errors import InvalidSpec, LabkitError, status_row
from ...gpu import report_steps
from ...gpu.host import isolated
from ...signals.cancel import checkpoint
from ...signals.progress import announce
from ...signals.progress import report as report_progress
from ..core import experiment, to_frame
from .request import KILL_GRACE_S, REPORT_STRATEGIES, network_of, pass_steps, step_budget_s, strategy_options
from .tables import budget_rows, layer_rows


@experiment
def network_report(
    net="resnet50",
    batch: Optional[int] = 32,
    dtype: Optional[str] = "fp16",
    layout: Optional[str] = "NHWC",
    training: bool = False,
    image=224,
):
    """Every convolution of a network under every workspace strategy.

    Per layer: the heuristic, fastest and smallest-workspace plans (checked against float64); then
    every strategy over one pass, the memory timeline and the budget curve. Each step runs in the
    worker process within `step_budget_s` (see the package docstring).

    Args:
        net: a preset name, or [name, ConvSpec] pairs.
        batch: images per batch; None: a preset's default, or each spec's own.
        dtype: the dtype; None: a preset's default, or each spec's own.
        layout: the layout; None: a preset's default, or each spec's own.
        training: forward plus backward (dgrad, wgrad).
        image: a preset's image size in pixels.

    Returns:
        One long DataFrame; its ``table`` column names the table of each row (see the package
        docstring, `labkit.experiments.your_network`).
    """
    if not isinstance(training, bool):
        raise InvalidSpec("training", training, "must be True or False")
    network = network_of(net, batch, dtype, layout, image)
    steps = pass_steps(network.layers, training)
    groups = networks.unique([networks.Layer(n, s) for n, s in steps])
    return _report(network, steps, groups, step_budget_s())


def _in_worker(step: str, args: tuple, budget_s: float, what: str, meanwhile=None):
    """``step(*args)`` of `labkit.gpu.report_steps` in the worker process (`labkit.gpu.host.isolated`), killed
    `KILL_GRACE_S` after ``budget_s``; the phases it announces are announced here too (its first at once,
    then the newest at most once every `labkit.gpu.host.isolated.PHASE_SEND_S`). The step
    takes its own turn on the GPU there (`labkit.gpu.host.lock`); this process lets its turn go meanwhile,
    and calls ``meanwhile()`` once the step is sent."""
    return isolated.run_step(
        f"{report_steps.__name__}:{step}",
        args,
        budget_s + KILL_GRACE_S,
        what,
        announce,
        hold_gpu=True,
        meanwhile=meanwhile,
    )


def report_table(steps, groups, measured: Dict[int, dict], rows: List[dict]):
    """The report's long table so far: one row per call of the pass (a call not measured yet says
    ``pending``), then ``rows`` (plans, strategies, timelines).

    Args:
        steps: (layer name, spec) per call of the pass (`pass_steps`).
        groups: the distinct convolutions (`labkit.networks.unique`).
        measured: index in ``groups`` -> its measured summary.
        rows: the other tables' rows so far.

    Returns:
        The DataFrame (`to_frame`).
    """
    spec_id = {g.spec.key: i for i, g in enumerate(groups)}
    return to_frame(layer_rows(steps, spec_id, groups, measured) + rows)


def _in_order(plans_of: Dict[int, List[dict]]) -> List[dict]:
    """The plan rows of the layers measured so far, in the network's order (a deferred layer is
    measured after later ones)."""
    return [row for i in sorted(plans_of) for row in plans_of[i]]


def _still_compiling_last(queue, groups, deferred: set, meanwhile) -> tuple:
    """The layers left to measure (indices in the report's distinct convolutions, the first one
    measured), with those a build worker still compiles for moved to the end, in order, and added
    to ``deferred`` (not deferred again): `labkit.gpu.report_steps.ahead_step` queues their compiles and says
    which are pending, in one step for every layer.

    Args:
        queue: the indices left, in order.
        groups: the distinct convolutions (`labkit.networks.unique`).
        deferred: the indices deferred so far; updated.
        meanwhile: called once the step is sent (the first layer's progress is drawn then).

    Returns:
        (the new queue, the layers still compiling); the same order and none when the step failed
        (each layer is then asked in turn).
    """
    left = list(queue)
    try:
        pending = _in_worker(
            "ahead_step",
            ([groups[i].spec for i in left],),
            report_steps.AHEAD_BUDGET_S,
            "queueing the plan builds",
            meanwhile,
        )
    except LabkitError:
        return queue, set()  # each step builds its own graph anyway
    late = {i for i, p in zip(left, pending) if p}
    deferred |= late  # measured once the others are, those whose compiles are done first (`_ready_first`)
    return collections.deque([i for i in left if i not in late] + [i for i in left if i in late]), late


def _ready_first(queue, groups, meanwhile) -> tuple:
    """The layers left, those whose compiles are done first, in order: asked of the worker
    (`labkit.gpu.report_steps.ready_step`) when the next layer was still compiling, so a layer that
    waits for a long compile does not hold up the layers after it whose compiles are done.

    Args:
        queue: the indices left, in order.
        groups: the distinct convolutions (`labkit.networks.unique`).
        meanwhile: called once the step is sent.

    Returns:
        (the new queue, the layers still compiling); the same queue and none when the worker found
        none ready in time or the step failed (each layer then waits for its own compiles).
    """
    left = list(queue)
    try:
        ready = _in_worker(
            "ready_step",
            ([groups[i].spec for i in left],),
            report_steps.READY_WAIT_S,
            "waiting for the plan builds",
            meanwhile,
        )
    except LabkitError:
        return queue, set()
    if not ready:
        return queue, set()
    first = [left[k] for k in ready]
    return collections.deque(first + [i for i in left if i not in first]), set(left) - set(first)


def _report(network, steps, groups, budget_s: float):
    spec_id = {g.spec.key: i for i, g in enumerate(groups)}
    total = len(groups) + len(REPORT_STRATEGIES)
    room = len(groups) + 16  # every graph of the pass stays built until the end
    measured: Dict[int, dict] = {}
    plans_of: Dict[int, List[dict]] = {}  # index in ``groups`` -> its plan rows
    rows: List[dict] = []

    def frame():
        return report_table(steps, groups, measured, _in_order(plans_of) + rows)

    # the progress of a step is reported (a panel draws it) while the worker runs the next one: a
    # chart of the report takes tens of milliseconds to draw, in which the GPU would wait
    unreported: List[int] = []

    def report_meanwhile():
        while unreported:
            report_progress(frame, unreported.pop(), total, "steps")

    report_progress(frame, 0, total, "steps")  # the network's layers, before anything is measured
    queue, deferred, compiling = collections.deque(range(len(groups))), set(), set()
    while queue:
        checkpoint()
        if len(measured) == 1 and queue[0] == 1 and len(groups) > 2:
            # the first layer is measured (and drawn meanwhile); the others' compiles go to build
            # workers, and the layers still waiting for one are measured after the others
            queue, compiling = _still_compiling_last(queue, groups, deferred, report_meanwhile)
        if queue[0] in compiling and len(queue) > 1:
            queue, compiling = _ready_first(queue, groups, report_meanwhile)
        i = queue.popleft()
        g = groups[i]
        # a layer whose plans still compile waits for the others, once: not the first (drawn first)
        may_defer = bool(measured) and bool(queue) and i not in deferred
        t0 = time.perf_counter()
        try:
            out = _in_worker(
                "spec_step",
                (g.spec, budget_s, room, may_defer),
                budget_s,
                f"measuring {g.spec.label}",
                report_meanwhile,
            )
        except LabkitError as exc:
            out = status_row(exc), []
        if out is None:  # deferred: measured once the other layers are
            deferred.add(i)
            queue.append(i)
            continue
        summary, plans = out
        measured[i] = dict(summary, step_seconds=time.perf_counter() - t0)
        plans_of[i] = [dict(table="plans", spec_id=i, spec=g.spec.label, **p) for p in plans]
        unreported[:] = [len(measured)]
    choice = {
        g.spec.key: measured[i]["fastest_plan"]
        for i, g in enumerate(groups)
        if measured[i]["status"] in ("ok", "wrong")
    }
    runnable = [(n, s) for n, s in steps if s.key in choice]
    sized = max([measured[spec_id[s.key]]["fastest_workspace_bytes"] for _, s in runnable] or [0])
    for j, (label, name, options) in enumerate(REPORT_STRATEGIES):
        checkpoint()
        opts = strategy_options(options, sized)
        srow, tl = (
            dict(table="strategies", strategy=label, status="error", reason="no layer could be measured"),
            [],
        )
        if runnable:
            t0 = time.perf_counter()
            try:
                srow, tl = _in_worker(
                    "strategy_step",
                    (label, name, opts, runnable, choice, budget_s, room, j == len(REPORT_STRATEGIES) - 1),
                    budget_s,
                    f"strategy {label}",
                    report_meanwhile,
                )
            except LabkitError as exc:
                srow.update(status_row(exc))
            srow["step_seconds"] = time.perf_counter() - t0
        if len(runnable) < len(steps):
            srow["reason"] = (
                srow.get("reason") or ""
            ) + f" {counted(len(steps) - len(runnable), 'call')} left out: not measured"
        rows += [srow] + tl
        unreported[:] = [len(groups) + j + 1]
    report_meanwhile()

    plan_rows = _in_order(plans_of)
    plans_df = (
        pd.DataFrame(plan_rows)
        if plan_rows
        else pd.DataFrame(columns=["spec_id", "workspace_bytes", "gpu_us", "status"])
    )
    rows += budget_rows(plans_df, [(spec_id[s.key], s.direction) for _, s in steps])
    df = frame()
    df.attrs["network"] = network.name
    df.attrs["network_source"] = network.source
    df.attrs["step_budget_s"] = budget_s
    return df
