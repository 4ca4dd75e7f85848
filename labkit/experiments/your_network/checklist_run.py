"""The run function of the performance checklist, `checklist_items`: each distinct convolution of a
network measured under the checklist's variants, step by step in the worker process
(`checklist_steps`), gathered into one long DataFrame with a ``table`` column:

=============  ================================================================================
``convs``      one row per distinct layer (``spec_id``) and variant: the layer as the network
               runs it, in each of `CHECKLIST_DTYPES`, in the other layout, and at the
               production batch. Per row: the heuristic's plan (its next right plan when the
               first is wrong), checked against float64 before it is timed (``rel_error``,
               ``tolerance``), its GPU time (CUDA-graph replay median, ``gpu_us``), workspace
               and the bytes of its inputs and output (``operands_bytes``).
``plans``      per distinct layer: building its graph with the heuristic's plan
               (``build_seconds``, in a process that has built other graphs) against loading the
               plan serialized (``load_seconds``: read and deserialize, as a later process does).
``reuse``      per distinct layer: host time of one call, waited for, when the graph is built
               again for each call (``rebuild_call_us``) and when the built graph is called
               again (``reuse_call_us``).
``convert``    one row: converting the network's input from NCHW to NHWC (``convert_gpu_us``).
=============  ================================================================================

Autotuning, memory fits and the profile of the pass are `network_report`'s rows for the same
request. Bounded: in the worker process, a warm-up first runs a small convolution through every
step in every dtype and layout (`checklist_steps.warm_step`, charged to no layer); then each
distinct layer has `LAYER_BUDGET_S` seconds as the network runs it and `VARIANT_BUDGET_S` for each
other variant (a part past its budget is a row with status ``timed_out``); a layer whose worker
does not answer `KILL_GRACE_S` after its budgets is killed and its rows say ``timed_out``. A layer
left when the whole checklist's `CHECKLIST_BUDGET_S` is spent is a row whose status begins
``cut:``. Bytes;
microseconds; seconds for budgets and builds.
"""

from __future__ import annotations

import time
from typing import Dict, List

from ... import networks
from ...errors import InvalidSpec, LabkitError, status_row
from ...gpu.host import isolated
from ...signals.cancel import checkpoint
from ...signals.progress import announce
from ...signals.progress import report as report_progress
from ...spec import MAX_DIM, ConvSpec
from ..core import experiment, to_frame
from . import checklist_steps
from .checklist_steps import cut_row, spec_columns
from .request import KILL_GRACE_S, network_of

#: the dtypes of the precision item
CHECKLIST_DTYPES = ("fp32", "tf32", "fp16", "bf16")
#: the production batch a checklist measures when none is named
PRODUCTION_BATCH = 128
#: seconds a distinct layer as the network runs it may take (build, check, time, save and load, reuse)
LAYER_BUDGET_S = 4.0
#: seconds each other variant of a layer may take (build, check against float64, time)
VARIANT_BUDGET_S = 3.0
#: seconds the warm-up before the first layer may take (charged to no layer and not to the checklist)
WARM_BUDGET_S = 120.0
#: seconds the whole checklist may take; layers left when it is spent are cut
CHECKLIST_BUDGET_S = 50.0
#: the clock the checklist's budget is read on (seconds)
clock = time.perf_counter
#: the tables of the long frame
CHECKLIST_TABLES = ("convs", "plans", "reuse", "convert")


def variants_of(spec: ConvSpec, production_batch: int) -> List[ConvSpec]:
    """The variants a layer is measured in besides its own: each other dtype of
    `CHECKLIST_DTYPES`, the other layout, the production batch (each once).

    Args:
        spec: the layer as the network runs it.
        production_batch: the production batch.

    Returns:
        The `ConvSpec` variants, without ``spec`` itself.
    """
    out = [spec.replace(dtype=d) for d in CHECKLIST_DTYPES]
    out.append(spec.replace(layout="NCHW" if spec.layout == "NHWC" else "NHWC"))
    out.append(spec.replace(N=production_batch))
    seen, kept = {spec.key}, []
    for v in out:
        if v.key not in seen:
            seen.add(v.key)
            kept.append(v)
    return kept


def check_production_batch(production_batch) -> int:
    """A production batch, checked.

    Args:
        production_batch: images.

    Returns:
        It; `InvalidSpec` for anything but a whole number of images from 1 to `MAX_DIM`.
    """
    if (
        isinstance(production_batch, bool)
        or not isinstance(production_batch, int)
        or not 1 <= production_batch <= MAX_DIM
    ):
        raise InvalidSpec(
            "production_batch", production_batch, f"must be a whole number of images, 1 to {MAX_DIM:,}"
        )
    return production_batch


@experiment
def checklist_items(
    net="resnet50",
    batch=32,
    dtype="fp16",
    layout="NHWC",
    production_batch: int = PRODUCTION_BATCH,
    image=224,
):
    """The performance checklist's measurements for a network: per distinct layer, its heuristic
    plan in each dtype, in the other layout and at the production batch (each checked against
    float64 before it is timed), its build against loading it saved, and a call with and without
    building the graph again; and the network input's conversion to NHWC.

    Args:
        net: a preset name, or [name, ConvSpec] pairs.
        batch: images per batch; None: a preset's default, or each spec's own.
        dtype: the dtype; None: a preset's default, or each spec's own.
        layout: the layout; None: a preset's default, or each spec's own.
        production_batch: the batch the network will run at in production, in images.
        image: a preset's image size in pixels.

    Returns:
        One long DataFrame; its ``table`` column names each row's table (see the module docstring).
    """
    production_batch = check_production_batch(production_batch)
    network = network_of(net, batch, dtype, layout, image)
    if not len(network):
        raise InvalidSpec("net", network.name, "has no convolution to measure")
    groups = networks.unique(network.layers)
    for g in groups:  # every layer is a convolution cuDNN takes at the production batch, before measuring
        try:
            g.spec.replace(N=production_batch)
        except InvalidSpec as err:
            raise InvalidSpec(
                "production_batch", production_batch, f"is too large for layer {g.names[0]}: {err.rule}"
            ) from None
    return _checklist(network, groups, production_batch)


def _in_worker(step: str, args: tuple, budget_s: float, what: str):
    """``step(*args)`` of `checklist_steps` in the worker process, killed `KILL_GRACE_S` after
    ``budget_s``."""
    return isolated.run_step(
        f"{checklist_steps.__name__}:{step}", args, budget_s + KILL_GRACE_S, what, announce, hold_gpu=True
    )


def layer_columns(spec_id: int, group) -> dict:
    """The columns every row of a distinct layer carries.

    Args:
        spec_id: its index among the network's distinct layers.
        group: its `labkit.networks.Group`.

    Returns:
        ``spec_id``, ``layer`` (its first name), ``count`` (its calls in one pass), ``layer_spec``.
    """
    return dict(spec_id=spec_id, layer=group.names[0], count=group.count, layer_spec=group.spec.label)


def failed_rows(spec: ConvSpec, variants: List[ConvSpec], status: dict) -> List[dict]:
    """A layer's rows when its step did not answer (timed out, worker died) or was not run.

    Args:
        spec: the layer as the network runs it.
        variants: its variants.
        status: the ``status`` and ``reason`` every row gets.

    Returns:
        A ``convs`` row per variant (its own first), and its ``plans`` and ``reuse`` rows.
    """
    rows = [dict(table="convs", **spec_columns(s), **status) for s in [spec] + variants]
    return rows + [dict(table=t, **spec_columns(spec), **status) for t in ("plans", "reuse")]


def _checklist(network, groups, production_batch: int):
    rows: List[dict] = []
    total = len(groups) + 1

    def frame():
        return to_frame(rows)

    checkpoint()
    try:
        warm_s = _in_worker(
            "warm_step", (CHECKLIST_DTYPES,), WARM_BUDGET_S, "warming up the checklist's kernels"
        )
    except LabkitError:
        warm_s = float("nan")  # each layer warms what it uses, within its own budget
    t_start = clock()
    first = network.layers[0].spec
    try:
        convert = _in_worker("input_step", (first,), LAYER_BUDGET_S, "converting the network's input")
    except LabkitError as exc:
        convert = dict(table="convert", spec=first.label, dtype=first.dtype, N=first.N, **status_row(exc))
    rows.append(dict(convert, layer=network.layers[0].name))
    report_progress(frame, 1, total, "steps")
    step_seconds: Dict[int, float] = {}
    for i, g in enumerate(groups):
        checkpoint()
        variants = variants_of(g.spec, production_batch)
        spent = clock() - t_start
        if spent > CHECKLIST_BUDGET_S:
            out = failed_rows(
                g.spec, variants, cut_row(f"the checklist's budget of {CHECKLIST_BUDGET_S:.0f} s was spent")
            )
        else:
            t0 = clock()
            try:
                out = _in_worker(
                    "layer_step",
                    (g.spec, variants, LAYER_BUDGET_S, VARIANT_BUDGET_S),
                    LAYER_BUDGET_S + len(variants) * VARIANT_BUDGET_S,
                    f"checklist of {g.spec.label}",
                )
            except LabkitError as exc:
                out = failed_rows(g.spec, variants, status_row(exc))
            step_seconds[i] = clock() - t0
        rows += [dict(layer_columns(i, g), **r, step_seconds=step_seconds.get(i)) for r in out]
        report_progress(frame, i + 2, total, "steps")
    df = frame()
    df.attrs["network"] = network.name
    df.attrs["network_source"] = network.source
    df.attrs["layer_budget_s"] = LAYER_BUDGET_S
    df.attrs["variant_budget_s"] = VARIANT_BUDGET_S
    df.attrs["warm_seconds"] = warm_s
    df.attrs["checklist_budget_s"] = CHECKLIST_BUDGET_S
    return df
