"""Random valid convolutions on the GPU (hypothesis, derandomized): each one labkit runs is right
against float64, or a clear Unsupported; none crashes or hangs.

Every dtype (fp32, tf32, fp16, bf16, fp8_e4m3), both layouts, fprop, dgrad and wgrad, groups and
depthwise, dilation, strides and odd sizes. Each case builds the heuristic's graph, takes the plan
labkit runs by default (checked against float64 before it is handed out; a wrong pick falls
through to its next correct plan) and checks that plan again on other inputs; one case in four
also runs through a `Runner` on the graph with every plan (each checked), and checks its output.
A case has `CASE_DEADLINE_S` (hypothesis's deadline) and a watchdog ends the run with every
thread's traceback if one hangs for `HANG_S`.
"""

import collections
import datetime
import faulthandler
import json
import os
import sys
import time
import zlib

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from labkit import ConvSpec, InvalidSpec, Unsupported, WrongResult  # noqa: E402
from labkit.gpu.checks import plan_checks, reference  # noqa: E402
from labkit.gpu.cudnn import (  # noqa: E402
    conv_graph,
    graph_cache,
    operands,
    reference_runs,  # noqa: E402
    saved_plans,
)
from labkit.gpu.timing import autotune  # noqa: E402
from labkit.gpu.workspaces import workspace  # noqa: E402
from labkit.gpu.workspaces.runner import Runner  # noqa: E402
from labkit.store import machine, plan_store  # noqa: E402

#: valid convolutions checked (hypothesis's max_examples; ``LABKIT_PROPERTY_CASES`` sets another count)
CASES = int(os.environ.get("LABKIT_PROPERTY_CASES", "240"))
#: seconds one case may take (fp8 plans compile at run time: a few seconds the first time)
CASE_DEADLINE_S = 60
#: seconds after which a case is taken as hung: the run ends with every thread's traceback
HANG_S = 240
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")


@st.composite
def convolutions(draw):
    """A valid `ConvSpec` (valid by construction: the dilated filter fits the padded image)."""
    kind = draw(st.sampled_from(["dense", "dense", "grouped", "depthwise"]))
    groups = 1 if kind == "dense" else draw(st.sampled_from([2, 3, 4])) if kind == "grouped" else 0
    per_group = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 17, 32]))
    if kind == "depthwise":
        groups = C = per_group * draw(st.sampled_from([1, 2]))
        K = C * draw(st.sampled_from([1, 2]))
    else:
        C = groups * per_group
        K = groups * draw(st.sampled_from([1, 2, 4, 6, 8, 16, 24]))
    R, S = draw(st.sampled_from([(1, 1), (3, 3), (3, 3), (5, 5), (7, 7), (1, 7), (7, 1), (3, 1)]))
    dh, dw = draw(st.sampled_from([(1, 1), (1, 1), (2, 2), (2, 1)]))
    ph = draw(st.integers(0, dh * (R - 1)))
    pw = draw(st.integers(0, dw * (S - 1)))
    H = draw(st.integers(max(1, dh * (R - 1) + 1 - 2 * ph), 36))
    W = draw(st.integers(max(1, dw * (S - 1) + 1 - 2 * pw), 36))
    return ConvSpec(
        N=draw(st.sampled_from([1, 1, 2, 3, 4, 5, 8, 16, 32])),
        C=C,
        H=H,
        W=W,
        K=K,
        R=R,
        S=S,
        stride=(draw(st.sampled_from([1, 1, 2, 3])), draw(st.sampled_from([1, 1, 2]))),
        padding=(ph, pw),
        dilation=(dh, dw),
        groups=groups,
        dtype=draw(st.sampled_from(DTYPES)),
        layout=draw(st.sampled_from(["NCHW", "NHWC"])),
        direction=draw(st.sampled_from(["fprop", "dgrad", "wgrad"])),
    )


def _runner_case(spec: ConvSpec) -> bool:
    """One case in four (by its label, so every run picks the same) also runs through a Runner."""
    return zlib.crc32(spec.label.encode()) % 4 == 0


def _check(spec: ConvSpec, stats: collections.Counter, notes: list) -> None:
    t0 = time.perf_counter()
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    try:
        try:
            cg = graph_cache.get_graph(spec, all_plans=False)
            plan = cg.default_plan  # checked against float64 before it is handed out
        except WrongResult as exc:  # every plan cuDNN built is wrong: a clear Unsupported
            stats["no right plan"] += 1
            notes.append(f"no right plan: {exc}")
            return
        except (Unsupported, InvalidSpec) as exc:
            assert str(exc).strip(), "the error must say why"
            stats["unsupported"] += 1
            return
        if cg.fell_through:
            stats["heuristic pick wrong, fell through"] += 1
            notes.append(f"{spec.label}: {cg.fell_through}")
        again = reference_runs.check_plans(cg, [plan.index], operands.Operands(spec, seed=1))[0]
        assert again.ok, (
            f"{spec.label} plan {plan.index} ({plan.name}): rel {again.rel_error:.3g} > {again.tolerance:.1e}"
        )
        stats["right"] += 1
        if _runner_case(spec):
            _through_a_runner(spec, stats)
    finally:
        faulthandler.cancel_dump_traceback_later()
        stats["seconds"] += time.perf_counter() - t0


def _through_a_runner(spec: ConvSpec, stats: collections.Counter) -> None:
    """Every plan of the full graph checked, the default run by a Runner: its output is right."""
    try:
        full = graph_cache.get_graph(spec)
    except Unsupported:
        stats["runner: unsupported"] += 1
        return
    stats["runner: plans checked"] += len(full.built)
    stats["runner: plans wrong"] += len(full.wrong)
    assert all(full.verdicts[p.index].ok for p in full.runnable)
    with Runner(workspace.KeyedCache(), fallback=True) as runner:
        record = runner.run(spec)
        runner.stream.synchronize()
        ops = runner.operands(spec)
        ref = reference_runs.expected(spec, ops)
        rel = reference.relative_error(ops.output(), ref)
        assert rel <= reference.tolerance_for(spec), f"{spec.label} via a Runner: rel {rel:.3g}"
        assert full.verdicts[record.plan_index].ok
        assert bool(record.heuristic_wrong) == bool(full.fell_through)
    stats["runner: right"] += 1


def _save(stats: collections.Counter, notes: list) -> dict:
    """The counts so far, also written to ``$LABKIT_TEST_OUT/plan_checks_property.json`` if set."""
    summary = dict(stats, notes=notes[:40])
    out = os.environ.get("LABKIT_TEST_OUT")
    if out:
        with open(os.path.join(out, "plan_checks_property.json"), "w") as f:
            json.dump(summary, f, indent=1, default=str)
    return summary


def test_random_convolutions_are_right_or_unsupported():
    stats, notes = collections.Counter(), []

    @settings(
        max_examples=CASES,
        derandomize=True,
        database=None,
        deadline=datetime.timedelta(seconds=CASE_DEADLINE_S),
        phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as drawn
        suppress_health_check=list(HealthCheck),
    )
    @given(convolutions())
    # the convolutions whose heuristic pick computed wrong results on an H100 (cuDNN 9.19)
    @example(ConvSpec.from_label("fp8_e4m3 NCHW fprop 32x4x1x3 -> 16 1x1 s2,1 p0"))
    @example(ConvSpec.from_label("fp8_e4m3 NCHW fprop 16x96x5x7 -> 6 7x7 s2 p1 g2"))
    @example(ConvSpec.from_label("fp8_e4m3 NCHW fprop 32x4x8x8 -> 16 1x1 s1 p0"))
    @example(ConvSpec.from_label("fp8_e4m3 NCHW fprop 2x32x12x12 -> 32 3x3 s1 p1"))
    def case(spec):
        stats["cases"] += 1
        stats[spec.dtype] += 1
        _check(spec, stats, notes)
        if stats["cases"] % 20 == 0:
            _save(stats, notes)

    case()
    print(json.dumps(_save(stats, notes), indent=1, default=str), file=sys.stderr)
    assert stats["cases"] >= min(200, CASES) and all(stats[d] for d in DTYPES)
    assert stats["right"] + stats["unsupported"] + stats["no right plan"] == stats["cases"]


@pytest.fixture
def forget_verdicts():
    """Verdicts a test plants or makes are forgotten after it (the process's `plan_checks.BOOK`,
    and the graphs built meanwhile)."""
    plan_checks.BOOK.clear()
    graph_cache.graphs.clear()
    yield plan_checks.BOOK
    plan_checks.BOOK.clear()
    graph_cache.graphs.clear()


SMALL = ConvSpec(N=2, C=16, H=10, W=10, K=16, dtype="fp16", layout="NHWC")


def test_a_wrong_heuristic_pick_falls_through_and_is_never_timed_or_saved(forget_verdicts, tmp_path):
    picked = conv_graph.ConvGraph(SMALL, all_plans=False).heuristic_plan.name
    # as if the check had found the heuristic's pick wrong (cuDNN's own wrong plans depend on its version)
    forget_verdicts.put(SMALL.key, "none", plan_checks.Verdict(picked, 1.4, reference.tolerance_for(SMALL)))
    one = conv_graph.ConvGraph(SMALL, all_plans=False)
    first = one.heuristic_plan
    assert first.name == picked and not one.verdicts[first.index].ok
    plan = one.default_plan  # built now: the next candidate, checked
    assert plan.name != picked and one.verdicts[plan.index].ok
    assert picked in one.fell_through and plan.name in one.fell_through
    with pytest.raises(WrongResult):
        one.plan(first.index)
    full = conv_graph.ConvGraph(SMALL)
    assert picked not in {p.name for p in full.built}  # known wrong: not built again
    tune = autotune.autotune(full, save=False)
    row = tune.table[tune.table.plan_name == picked].iloc[0]
    assert plan_checks.is_wrong(row.status) and row.gpu_us != row.gpu_us  # no time
    assert tune.wrong >= 1 and tune.fell_through and full.plans[tune.best_index].name != picked
    assert (tune.table[tune.table.status == "ok"].rel_error <= reference.tolerance_for(SMALL)).all()
    with Runner(workspace.KeyedCache(), fallback=True) as runner:
        record = runner.run(SMALL)
        runner.stream.synchronize()
    assert record.heuristic_wrong and full.plans[record.plan_index].name != picked
    store = plan_store.PlanStore(tmp_path, machine.this_identity() or machine.identity())
    with pytest.raises(WrongResult):
        saved_plans.save_plan(one, first.index, "heuristic", store=store)


def test_saved_plans_carry_their_check(forget_verdicts, tmp_path):
    store = plan_store.PlanStore(tmp_path, machine.this_identity() or machine.identity())
    cg = conv_graph.ConvGraph(SMALL, all_plans=False)
    path = saved_plans.save_plan(cg, cg.default_plan.index, "heuristic", store=store)
    assert path is not None
    saved = json.loads(path.read_text())["info"]["check"]
    assert saved["rel_error"] <= reference.tolerance_for(SMALL)
    forget_verdicts.clear()
    loaded = saved_plans.load_plan(SMALL, kind="heuristic", store=store)
    assert loaded.verdicts[0].ok and loaded.plans_checked == 0  # its verdict came with it: nothing ran
    body = json.loads(path.read_text())
    del body["info"]["check"]  # a plan saved before plans carried their check
    path.write_text(json.dumps(body))
    forget_verdicts.clear()
    loaded = saved_plans.load_plan(SMALL, kind="heuristic", store=store)
    assert loaded.plans_checked == 1 and loaded.verdicts[0].ok  # checked when loaded ...
    assert "check" in json.loads(path.read_text())["info"]  # ... and the file given its verdict


def test_the_check_costs_one_reference_and_one_run_per_plan(forget_verdicts):
    spec = ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NHWC")
    cg = conv_graph.ConvGraph(spec)
    verdicts = cg.check()
    assert cg.plans_checked == len(cg.built) == len(verdicts)
    again = conv_graph.ConvGraph(spec, workspace_cap=0)  # the same convolution: its plans' verdicts are known
    again.check()
    assert again.plans_checked == 0
    print(f"{spec.label}: {len(cg.built)} plans checked in {cg.check_seconds * 1e3:.0f} ms")
