"""What a network report measures: the network a request names (`network_of`), the convolution
calls of one pass (`pass_steps`), the strategies it runs (`REPORT_STRATEGIES`), the workspace caps
of its budget curve (`BUDGET_CAPS`, bytes), its tables (`TABLES`) and their columns (`COLUMNS`), the
presets the recorded grid holds, and the time each step may take (`step_budget_s`, seconds).
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from ... import env, networks
from ...errors import InvalidSpec
from ...gpu.workspaces.labels import label
from ...spec import ConvSpec
from ..core import MIB

#: the strategies a report runs, as (key, strategy name, options); ``"sized"``: the fixed arena is
#: made as large as the largest workspace of the pass's fastest plans. The long frame stores a
#: strategy's rows under its key; its tables name it by its label (`strategy_labels`)
REPORT_STRATEGIES: Tuple[Tuple[str, str, object], ...] = (
    ("preallocated", "preallocated", {}),
    ("fixed_arena (sized)", "fixed_arena", "sized"),
    ("malloc_per_call", "malloc_per_call", {}),
    ("keyed_cache (256 MiB)", "keyed_cache", {"budget_bytes": 256 * MIB}),
    ("keyed_cache (32 MiB)", "keyed_cache", {"budget_bytes": 32 * MIB}),
    ("scratchpad", "scratchpad", {}),
    ("cupy_pool", "cupy_pool", {}),
    ("async_pool", "async_pool", {}),
)
#: the workspace caps of the budget curve, bytes (None: no cap)
BUDGET_CAPS = (0, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB, None)
TABLES = ("layers", "plans", "strategies", "timeline", "budget")
#: the columns a row of each table may hold (`layer_rows` with the spec step's summary, the plans
#: and strategy steps, `budget_rows`): a table keeps them when a cut report leaves one without a value
COLUMNS = {
    name: tuple(words.split())
    for name, words in dict(
        layers="order layer spec_id spec count direction N C H W K R S stride padding dilation groups flops "
        "tolerance max_rel_error checked plans_timed plans_cut plans_wrong status reason "
        "heuristic_plan heuristic_gpu_us heuristic_workspace_bytes heuristic_plan_index "
        "fastest_plan fastest_gpu_us fastest_workspace_bytes fastest_plan_index "
        "smallest_plan smallest_gpu_us smallest_workspace_bytes smallest_plan_index step_seconds",
        plans="spec_id spec plan_index plan_name workspace_bytes gpu_us tune_seconds status",
        strategies="strategy calls pass_gpu_us pass_host_us host_us_per_call peak_workspace_bytes "
        "stats_peak_bytes held_after_bytes alloc_calls_first_pass alloc_calls_per_pass alloc_us_first_pass "
        "fallbacks_first_pass fallbacks_per_pass describe status reason step_seconds",
        timeline="strategy step layer direction held_bytes held_after_bytes workspace_bytes fell_back",
        budget="cap_bytes cap_label pass_gpu_us calls_changing_plan calls_without_plan peak_workspace_bytes "
        "slowdown",
    ).items()
}
#: the presets the recorded grid holds a report for (batch 32, fp16, NHWC, inference)
RECORDED_PRESETS = ("resnet50", "resnext50_32x4d", "mobilenet_v2", "convnext_tiny", "vgg16", "deeplabv3_aspp")
#: seconds one step of a report may take (``LABKIT_STEP_BUDGET_S`` overrides): a distinct
#: convolution's build (at most half of it), autotune and checks, or one strategy's pass
STEP_BUDGET_S = 60.0
#: seconds past a step's budget before its worker is killed (its own budget stops it between
#: parts first; this catches a call that never returns)
KILL_GRACE_S = 15.0


def strategy_options(options, sized_bytes: int) -> dict:
    """A report strategy's options, with the sized arena's size filled in.

    Args:
        options: its options in `REPORT_STRATEGIES`.
        sized_bytes: the largest workspace of the pass's fastest plans, bytes.

    Returns:
        The options `labkit.gpu.workspaces.workspace.make` takes.
    """
    return {"size_bytes": int(sized_bytes)} if options == "sized" else dict(options)


def strategy_labels(sized_bytes: int) -> dict:
    """Each report strategy's label (`labkit.gpu.workspaces.labels.label`, as lesson 02 names it).

    Args:
        sized_bytes: the largest workspace of the pass's fastest plans, bytes (the sized arena's size).

    Returns:
        Key in `REPORT_STRATEGIES` -> label, e.g. ``fixed_arena (sized)`` -> ``fixed_arena (12 MiB)``.
    """
    return {key: label(name, **strategy_options(opts, sized_bytes)) for key, name, opts in REPORT_STRATEGIES}


def step_budget_s() -> float:
    """A report step's budget.

    Returns:
        Seconds: `STEP_BUDGET_S`, or ``LABKIT_STEP_BUDGET_S`` when set.
    """
    return env.seconds_setting("LABKIT_STEP_BUDGET_S", STEP_BUDGET_S)


def network_of(net, batch, dtype, layout, image) -> networks.Network:
    """The `Network` a report request names.

    Args:
        net: a preset name, or a list of layers given as [name, ConvSpec or spec dict] pairs (what
            `labkit.report` passes for a list or a model).
        batch: images per batch; None: a preset's default, or each spec's own.
        dtype: the dtype; None: a preset's default, or each spec's own.
        layout: the layout; None: a preset's default, or each spec's own.
        image: a preset's image size in pixels.

    Returns:
        The `Network`.
    """
    if isinstance(net, str):
        return networks.layers_of(net, batch=batch, dtype=dtype, layout=layout, image=image)
    if isinstance(net, (list, tuple)):
        net = [_pair_layer(item) if isinstance(item, (list, tuple)) else item for item in net]
    return networks.layers_of(net, batch=batch, dtype=dtype, layout=layout)


def _pair_layer(item) -> networks.Layer:
    """A [name, ConvSpec or spec dict] pair as a `Layer`."""
    if not (len(item) == 2 and isinstance(item[0], str)):
        raise InvalidSpec("net", item, "a layer given as a list must be a [name, spec] pair")
    spec = item[1] if isinstance(item[1], ConvSpec) else ConvSpec.from_dict(dict(item[1]))
    return networks.Layer(item[0], spec)


def pass_steps(layers: Sequence[networks.Layer], training: bool) -> List[Tuple[str, ConvSpec]]:
    """Every convolution call of one pass, in order.

    With ``training``, the backward calls follow: dgrad and wgrad of each layer, last layer first (no
    dgrad for the first layer, whose input needs no gradient).

    Args:
        layers: the network's layers.
        training: forward plus backward.

    Returns:
        (layer name, `ConvSpec`) pairs.
    """
    steps = [(lay.name, lay.spec) for lay in layers]
    if training:
        for i in reversed(range(len(layers))):
            lay = layers[i]
            if i > 0:  # the network's input needs no gradient
                steps.append((lay.name, lay.spec.replace(direction="dgrad")))
            steps.append((lay.name, lay.spec.replace(direction="wgrad")))
    return steps
