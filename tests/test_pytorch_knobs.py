"""Lesson 11's experiment on the CPU (`labkit.experiments.pytorch_knobs`): the settings and the
process each runs in, reading a child's output (results, a cut, no torch, a crash), a PyTorch row
beside its labkit counterpart and whether their kernels match. The numbers in these tests are
synthetic, made up here to exercise the logic; the lesson's come from the recordings."""

import html
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from labkit import ConvSpec
from labkit.errors import InvalidSpec
from labkit.experiments import BASE, pytorch_knobs
from labkit.experiments.pytorch_knobs import runs
from labkit.experiments.pytorch_knobs.settings import (
    KNOB_ENV,
    check_request,
    child_config,
    child_env,
    counterpart,
    labkit_name,
    settings_for,
)

SPEC = pytorch_knobs.KNOBS_SPEC


def by_name(spec=SPEC, net=None):
    return {s.name: s for s in settings_for(spec, net)}


def test_the_settings_start_from_pytorchs_defaults_and_change_one_knob_each():
    s = settings_for(SPEC)
    assert s[0].name == "PyTorch's defaults" and not s[0].flags and not s[0].env
    names = [x.name for x in s]
    assert len(names) == len(set(names))
    for x in s:
        assert set(x.env) <= set(KNOB_ENV), x
    assert {x.knob for x in s} >= {
        "cudnn.benchmark",
        "benchmark_limit",
        "allow_tf32",
        "deterministic",
        "memory format",
        "autocast",
        "plan cache",
        "workspace cap",
    }


def test_the_memory_format_setting_is_the_other_layout():
    assert by_name()["channels_last"].layout == "NHWC"
    assert by_name(BASE)["contiguous_format"].layout == "NCHW"


def test_a_network_runs_no_environment_knob_and_measures_no_kernels():
    s = settings_for(SPEC, "resnet50")
    assert not any(x.env for x in s)
    cfg = json.loads(child_config(SPEC, "resnet50", s[0], calls=3, warmup=1))
    assert cfg["net"] == "resnet50" and cfg["batch"] == 32 and cfg["conv"] is None and not cfg["profile"]


def test_the_child_config_carries_the_convolution_and_the_setting():
    s = by_name()["channels_last"]
    cfg = json.loads(child_config(SPEC, None, s, calls=7, warmup=2))
    assert cfg["conv"]["x_shape"] == [32, 256, 56, 56] and cfg["conv"]["w_shape"] == [256, 256, 3, 3]
    assert cfg["channels_last"] is True and cfg["dtype"] == "fp32" and cfg["calls"] == 7
    cfg = json.loads(child_config(SPEC, None, by_name()["benchmark=True"], calls=7, warmup=2))
    assert cfg["flags"] == {"benchmark": True} and cfg["channels_last"] is False


def test_a_child_environment_holds_only_its_own_knob_variables():
    parent = {"PATH": "/bin", KNOB_ENV[0]: "5", KNOB_ENV[1]: "3"}
    env = child_env(parent, by_name()["CUDNN_CONV_WSCAP_DBG=16"])
    assert env == {"PATH": "/bin", KNOB_ENV[1]: "16"}
    assert child_env(parent, by_name()["PyTorch's defaults"]) == {"PATH": "/bin"}


def test_the_counterpart_is_the_convolution_cudnn_runs():
    s = by_name()
    assert counterpart(SPEC, s["PyTorch's defaults"], True).dtype == "tf32"
    assert counterpart(SPEC, s["PyTorch's defaults"], False).dtype == "fp32"
    assert counterpart(SPEC, s["autocast bf16"], True).dtype == "bf16"
    twin = counterpart(SPEC, s["channels_last"], True)
    assert (twin.dtype, twin.layout) == ("tf32", "NHWC")
    assert counterpart(BASE, by_name(BASE)["PyTorch's defaults"], True).dtype == "fp16"
    assert labkit_name(twin, True, 16 << 20) == "autotuned, tf32 NHWC, cap 16 MiB"
    assert labkit_name(twin, False, None) == "heuristic, tf32 NHWC"


@pytest.mark.parametrize(
    "spec,net,field",
    [
        (SPEC.replace(dtype="fp8_e4m3", layout="NHWC"), None, "spec.dtype"),
        (SPEC.replace(direction="dgrad"), None, "spec.direction"),
        (SPEC, "alexnet", "net"),
    ],
)
def test_a_request_pytorch_cannot_run_is_a_clear_error(spec, net, field):
    with pytest.raises(InvalidSpec) as info:
        check_request(spec, net)
    assert field in str(info.value)


# ---- a child's output ----------------------------------------------------------------------------
def test_a_childs_results_are_read_from_its_marked_line():
    out = "a warning\n" + runs.MARKER + json.dumps({"gpu_us": 1.5, "flags": {"allow_tf32": True}}) + "\n"
    got = runs.parse_child(out, "UserWarning: something", 0)
    assert got["status"] == "ok" and got["gpu_us"] == 1.5 and got["flags"] == {"allow_tf32": True}


def test_a_cut_child_says_after_how_long():
    got = runs.parse_child("", "", None, 300)
    assert got == {"status": "timed_out", "reason": "cut after 300 s"}


def test_a_child_without_torch_is_unsupported_and_a_crash_is_an_error_with_its_last_line():
    tb = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'torch'\n"
    got = runs.parse_child("", tb, 1)
    assert got["status"] == "unsupported" and got["reason"].endswith("No module named 'torch'")
    got = runs.parse_child("", "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory.\n\n", 1)
    assert got == {"status": "error", "reason": "torch.OutOfMemoryError: CUDA out of memory."}
    assert runs.parse_child("", "", -11)["reason"] == "exit status -11, no results"
    assert runs.parse_child(runs.MARKER + "{not json", "", 0)["status"] == "error"


def test_the_childs_marker_is_the_one_the_parent_reads():
    from labkit.experiments.pytorch_knobs import torch_child

    assert torch_child.MARKER == runs.MARKER


def test_the_child_imports_only_the_standard_library_and_torch():
    import ast

    from labkit.experiments.pytorch_knobs import torch_child

    tree = ast.parse(Path(torch_child.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))  # run as a script
    tops = {n.split(".")[0] for n in names}
    assert tops - {"torch", "torchvision"} <= set(sys.stdlib_module_names), tops


def test_one_module_reads_pytorchs_kernels_the_child_and_the_vs_torch_bench_alike():
    labkit_dir = Path(runs.__file__).parents[2]
    readers = sorted(p.name for p in labkit_dir.rglob("*.py") if "ProfilerActivity" in p.read_text())
    assert readers == ["torch_child.py"]
    assert "torch_child.kernels(torch, call)" in (labkit_dir / "cli" / "vs_torch.py").read_text()


def test_the_childs_kernels_are_the_profiled_calls_cuda_events_in_launch_order(monkeypatch):
    import types

    from labkit.experiments.pytorch_knobs import torch_child

    def event(name, start, device="CUDA"):
        return types.SimpleNamespace(
            name=name,
            device_type=types.SimpleNamespace(name=device),
            time_range=types.SimpleNamespace(start=start),
        )

    calls = []

    class Profile:
        def __init__(self, activities):
            self.activities = activities

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return [event("second", 20), event("aten::conv2d", 5, "CPU"), event("first", 10)]

    profiler = types.SimpleNamespace(ProfilerActivity=types.SimpleNamespace(CUDA="cuda"), profile=Profile)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None), profiler=profiler)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.profiler", profiler)
    assert torch_child.kernels(fake, lambda: calls.append(1)) == ["first", "second"]
    assert len(calls) == 2  # once unprofiled, once profiled


@pytest.mark.skipif("torch" in sys.modules, reason="torch is importable here")
def test_a_child_run_where_torch_is_missing_is_a_row_that_says_so():
    pytest.importorskip("numpy")
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed here")
    except ImportError:
        pass
    s = by_name()["CUDNN_CONV_WSCAP_DBG=0"]
    got = runs.run_child(child_config(SPEC, None, s, calls=2, warmup=1), child_env({}, s), 60)
    assert got["status"] == "unsupported" and "No module named 'torch'" in got["reason"]
    row = runs.torch_row(SPEC, s, got)
    assert (
        row["status"] == "unsupported"
        and row["labkit_row"] == ""
        and row["env"] == '{"CUDNN_CONV_WSCAP_DBG": "0"}'
    )


def test_a_child_past_its_time_is_cut(tmp_path, monkeypatch):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(runs, "CHILD", slow)
    got = runs.run_child("{}", {}, 0.5)
    assert got["status"] == "timed_out" and got["wall_s"] < 10


# ---- beside labkit -----------------------------------------------------------------------------
KERNEL = "void cutlass::Kernel<cutlass_80_tensorop_s1688fprop_128x128_32x3_nhwc>(Params)"
CONVERT = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>" + "(cudnn::ops::Params)"


def synthetic_frame():
    """Rows as the experiment writes them, with made-up figures."""
    s = by_name()
    rows = [
        runs.torch_row(
            SPEC,
            s["PyTorch's defaults"],
            dict(status="ok", flags={"allow_tf32": True}, gpu_us=10.0, kernels=[CONVERT, KERNEL + " "]),
        ),
        runs.torch_row(
            SPEC,
            s["benchmark=True"],
            dict(status="ok", flags={"allow_tf32": True}, gpu_us=9.0, kernels=[KERNEL]),
        ),
        runs.torch_row(
            SPEC, s["allow_tf32=False"], dict(status="ok", flags={"allow_tf32": False}, gpu_us=20.0)
        ),
        dict(
            source="labkit",
            setting="heuristic, tf32 NCHW",
            plan_name="eng1",
            workspace_bytes=4096,
            gpu_us=8.0,
            kernels=f"{CONVERT} | memset | {KERNEL}",
        ),
        dict(
            source="labkit",
            setting="autotuned, tf32 NCHW",
            plan_name="eng2",
            workspace_bytes=0,
            gpu_us=7.0,
            kernels=f"{CONVERT} | {KERNEL}",
        ),
        dict(
            source="labkit",
            setting="heuristic, fp32 NCHW",
            plan_name="eng3",
            workspace_bytes=0,
            gpu_us=19.0,
            kernels="",
        ),
    ]
    return runs.beside(pd.DataFrame(rows))


def test_each_pytorch_row_is_set_beside_its_labkit_counterpart():
    df = synthetic_frame().set_index("setting")
    assert df.loc["PyTorch's defaults", "labkit_row"] == "heuristic, tf32 NCHW"
    assert df.loc["PyTorch's defaults", "labkit_plan"] == "eng1"
    assert df.loc["PyTorch's defaults", "labkit_workspace_bytes"] == 4096
    assert df.loc["benchmark=True", "labkit_row"] == "autotuned, tf32 NCHW"
    assert df.loc["benchmark=True", "labkit_gpu_us"] == 7.0
    assert df.loc["allow_tf32=False", "labkit_row"] == "heuristic, fp32 NCHW"
    assert pd.isna(df.loc["heuristic, tf32 NCHW", "labkit_gpu_us"])


def test_kernels_match_by_name_without_arguments_or_memsets_and_in_order():
    df = synthetic_frame().set_index("setting")
    assert df.loc["PyTorch's defaults", "same_kernels"] is True  # the memset and the arguments aside
    assert df.loc["benchmark=True", "same_kernels"] is False  # no conversion on PyTorch's side
    assert df.loc["allow_tf32=False", "same_kernels"] is None  # neither side traced


def test_a_kernel_key_drops_void_and_the_argument_list_and_keeps_the_template():
    assert runs.kernel_key(KERNEL) == "cutlass::Kernel<cutlass_80_tensorop_s1688fprop_128x128_32x3_nhwc>"
    assert runs.kernel_key("Memset (Device)") == "memset"
    assert runs.kernel_key("f(int (*)(int))") == "f"


def test_the_grid_records_the_convolution_and_the_network():
    calls = pytorch_knobs.recorded_calls()
    assert calls[0] == ("torch_knobs", dict(spec=SPEC, net=None))
    assert ("torch_knobs", dict(spec=SPEC, net="resnet50")) in calls
    assert SPEC == ConvSpec.from_label("fp32 NCHW fprop 32x256x56x56 -> 256 3x3 s1 p1")


# ---- recorded: the lesson's chart, sentences and hands-on on each shipped recording -----------------------
@pytest.fixture(params=["h100-sxm", "h200"])
def recorded(recorded_mode, monkeypatch, request):
    from labkit.experiments import handson_check
    from labkit.session import handson, lessons
    from labkit.store import recordings

    monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    monkeypatch.setenv("LABKIT_RECORDING", request.param)
    handson_check.forget()
    handson.register_topics()
    lessons.forget()
    yield lessons
    lessons.forget()
    recordings._current = recordings._picked = None


def test_the_chart_draws_every_setting_and_labkit_beside_the_convolution_only(recorded):
    from labkit.experiments.pytorch_knobs.charts import TRACES, knobs_chart

    conv, net = recorded.knobs(), recorded.knobs(net="resnet50")
    fig = knobs_chart(conv)
    pt = conv[(conv.source == "pytorch") & (conv.status == "ok")]
    assert len(fig.data) == len(TRACES) and list(fig.data[0].y) == list(pt.setting)
    assert fig.data[1].showlegend is not False and fig.data[5].showlegend is not False
    fig = knobs_chart(net)
    assert fig.data[1].showlegend is False and fig.data[5].showlegend is False
    assert "resnet50" in fig.layout.title.text


def test_the_summary_says_what_the_rows_say(recorded):
    from labkit.experiments.pytorch_knobs import knobs_summary, unchanged
    from labkit.experiments.pytorch_knobs.summaries import DEFAULTS, row_of, same_peaks, same_time

    df = recorded.knobs()
    text = str(knobs_summary(df))
    base = row_of(df, DEFAULTS)
    same = unchanged(df)
    for s in same:
        assert same_time(row_of(df, s), base) and same_peaks(row_of(df, s), base)
        assert f"`{s}`" in text.split("Changed neither")[1].split("\n")[0]
    bench = row_of(df, "benchmark=True")
    ratio = f"{bench.gpu_us / base.gpu_us:.2f}x"
    assert ("within the defaults' spread" in text) == same_time(bench, base) or ratio in text
    ran = df[(df.source == "pytorch") & (df.status == "ok")]
    # PyTorch's figures, labkit's counterparts, then two batch sizes in turn: each a header, its rule,
    # a row per setting
    tables = (2 if ran.labkit_gpu_us.notna().any() else 1) + int(ran.alternating_us.notna().all())
    assert text.count("\n| ") == tables * (len(ran) + 2)


def test_the_plan_caches_sentence_quotes_times_its_table_shows(recorded):
    from labkit.draw.units import us_text
    from labkit.experiments.pytorch_knobs import knobs_summary
    from labkit.experiments.pytorch_knobs.summaries import DEFAULTS, row_of

    df = recorded.knobs()
    text = str(knobs_summary(df))
    sentence = next(line for line in text.splitlines() if "two batch sizes in turn took" in line)
    turns = text.split("(a plan cache must hold both shapes):")[1]
    for setting in ("TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT=1", DEFAULTS):
        quoted = us_text(row_of(df, setting).alternating_us)
        assert quoted in sentence and f"| {html.escape(setting)} | {quoted} |" in turns


def test_the_hands_on_reference_passes_and_a_wrong_list_gets_a_hint(recorded, capsys):
    from labkit.present import check
    from labkit.session import handson
    from labkit.store import recordings

    ns = {"lessons": recorded, "check": check}
    handson.run("unchanged_knobs", handson.HANDS_ON["unchanged_knobs"].source, ns)
    out = capsys.readouterr().out
    gpu = recorded.env_label(recordings.current())
    assert out.startswith("correct: ") and f"recorded on the {gpu}" in " ".join(out.split()), out
    wrong = check.unchanged_knobs(["PyTorch's defaults", "benchmark=True"])
    assert not wrong.correct and "Hint:" in wrong.message and "defaults themselves" in wrong.message
    assert not check.unchanged_knobs(ns["my_unchanged"][:-1]).correct  # one left out


@pytest.mark.usefixtures("fresh_progress")
def test_a_wrong_benchmark_prediction_hears_both_times_before_the_hint_and_not_why(recorded):
    """Exercise 1: a wrong answer is told the two steady times with their spread and how they
    compare, then the hint; labkit's plans underneath (the reason) wait for the right answer."""
    from labkit.draw.units import us_text
    from labkit.experiments.pytorch_knobs.summaries import BENCHMARK, DEFAULTS, row_of, same_time
    from labkit.present import check

    df = recorded.knobs()
    base, bench = row_of(df, DEFAULTS), row_of(df, BENCHMARK)
    faster = bool(bench.gpu_us < base.gpu_us and not same_time(bench, base))
    said = " ".join(check.benchmark_faster(not faster).message.split())
    told, hint = said.split(" Hint: ")
    assert told.startswith(f"not yet: `{BENCHMARK}` took {us_text(bench.gpu_us)} per call"), said
    assert f"the defaults {us_text(base.gpu_us)} (p10 {us_text(base.gpu_us_p10)}" in told, said
    verdict = "faster" if faster else "overlap" if same_time(bench, base) else "slower"
    assert told.endswith(".") and verdict in told.rsplit(":", 1)[1], said
    assert "Underneath" not in said and "nothing to win" not in said, said


def test_the_lesson_names_labkits_marks_as_the_chart_draws_them(recorded):
    from labkit.draw.plots import COLORS
    from labkit.experiments.pytorch_knobs.charts import TRACES, knobs_chart

    fig = knobs_chart(recorded.knobs())
    labkit = [t for t in fig.data if t.name.startswith("labkit")]
    assert [t.name for t in labkit] == [TRACES[1], TRACES[5]]
    assert all(
        t.type == "scatter" and t.marker.color == COLORS["muted"] and t.marker.symbol == "diamond"
        for t in labkit
    )
    assert all(t.marker.symbol != "diamond" for t in fig.data if t not in labkit)
    assert "grey diamonds: labkit's plan" in fig.layout.title.text
    nb = json.loads(
        (Path(__file__).resolve().parents[1] / "notebooks" / "11_pytorch_knobs.ipynb").read_text()
    )
    prose = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    prose = " ".join(prose.split())
    assert "grey bar" not in prose
    assert "and the grey diamond labkit's time" in prose
    assert "and the grey diamond labkit's plan's workspace" in prose
    assert "(`check.benchmark_memory()` says what each one means)" in prose


def test_a_counterpart_that_runs_the_defaults_plan_says_its_time_is_the_same_plan_timed_again(recorded):
    from labkit.draw.units import us_text
    from labkit.experiments.pytorch_knobs import knobs_summary
    from labkit.experiments.pytorch_knobs.summaries import BENCHMARK, DEFAULTS, row_of

    df = recorded.knobs()
    base, bench = row_of(df, DEFAULTS), row_of(df, BENCHMARK)
    said = f"{us_text(bench.labkit_gpu_us)} and {us_text(base.labkit_gpu_us)} are one plan timed twice"
    same = bench.labkit_plan == base.labkit_plan and bench.labkit_row != base.labkit_row
    assert (said in str(knobs_summary(df))) == same
    other = df.copy()
    other.loc[other.setting == BENCHMARK, "labkit_plan"] = "another plan"
    assert "timed twice" not in str(knobs_summary(other))


def _bullet(text: str, start: str) -> str:
    """The summary's bullet that starts with ``start`` (empty when there is none)."""
    return next((line for line in text.splitlines() if line.startswith(f"* {start}")), "")


@pytest.mark.parametrize("net", [None, "resnet50"])
def test_a_time_compared_with_the_defaults_carries_its_spread_or_is_not_ranked(recorded, net):
    from labkit.draw.spreads import spreads_overlap as overlap
    from labkit.draw.units import us_text
    from labkit.experiments.pytorch_knobs import knobs_summary
    from labkit.experiments.pytorch_knobs.summaries import DEFAULTS, ratio_text, row_of, same_time

    df = recorded.knobs(net=net)
    text, base = str(knobs_summary(df)), row_of(df, DEFAULTS)
    autocast = _bullet(text, "Autocast")
    for setting in ("autocast fp16", "autocast bf16", "benchmark=True"):
        r = row_of(df, setting)
        said = (
            autocast.split(f"`{setting}` ran ")[1].split("`autocast")[0]
            if setting.startswith("autocast")
            else _bullet(text, "`benchmark")
        )
        ratio = f"{ratio_text(r.gpu_us, base.gpu_us)} the defaults'"
        spread = f"({us_text(r.gpu_us_p10)} to {us_text(r.gpu_us_p90)})"
        if same_time(r, base):
            assert "within the defaults' spread" in said and ratio not in said
        elif overlap(r, base):
            assert ratio not in said and spread in said and "do not rank the two" in said, said
        else:
            assert f"{ratio} {us_text(base.gpu_us)} (p10-p90 {spread[1:-1]} against" in said, said
    assert "against strict fp32 math instead, which `allow_tf32=False` runs here" in autocast
    assert "set against the defaults (fp32 tensors, TF32 math)" in autocast


def test_the_switches_together_are_set_against_each_alone(recorded):
    from labkit.draw.spreads import spreads_overlap as overlap
    from labkit.experiments.pytorch_knobs import knobs_summary
    from labkit.experiments.pytorch_knobs.summaries import row_of

    df = recorded.knobs(net="resnet50")
    setting = "benchmark=True, channels_last, autocast fp16"
    said = _bullet(str(knobs_summary(df)), f"`{setting}`, these switches together")
    together = row_of(df, setting)
    for name in setting.split(", "):
        alone = row_of(df, name)
        verdict = (
            "not ranked against"
            if overlap(together, alone)
            else ("slower than" if together.gpu_us > alone.gpu_us else "faster than")
        )
        clause = said.split(f"`{name}` alone")[0]
        assert verdict in clause.split(";")[-1], (name, verdict, said)
    assert "benchmark=True, channels_last, autocast fp16" not in str(knobs_summary(recorded.knobs()))


@pytest.mark.parametrize("net", [None, "resnet50"])
def test_benchmarks_first_call_is_ranked_only_beyond_the_first_calls_that_repeat_the_defaults(recorded, net):
    from labkit.experiments.pytorch_knobs import knobs_summary, unchanged
    from labkit.experiments.pytorch_knobs.summaries import BENCHMARK, DEFAULTS, row_of

    df = recorded.knobs(net=net)
    said = _bullet(str(knobs_summary(df)), f"`{BENCHMARK}`")
    bench, same = row_of(df, BENCHMARK), [row_of(df, s) for s in unchanged(df)]
    firsts = [r.first_call_ms for r in same + [row_of(df, DEFAULTS)]]
    if not same:
        assert "one sample each: no other setting here matched" in said
    elif min(firsts) <= bench.first_call_ms <= max(firsts):
        assert "one first call does not rank the two" in said
    else:
        assert (
            f"{'above' if bench.first_call_ms > max(firsts) else 'below'} the {min(firsts):,.1f} to" in said
        )


def test_the_network_summary_says_why_lesson_09_times_it_otherwise(recorded):
    from labkit.experiments.pytorch_knobs import knobs_summary

    why = "Lesson 09's report gives this network another time"
    assert why in str(knobs_summary(recorded.knobs(net="resnet50"))).split("\n")[0]
    assert why not in str(knobs_summary(recorded.knobs()))


def test_the_benchmark_hints_lead_to_this_convolutions_plans_not_lesson_05s(recorded):
    """Exercise 1's hints once sent the learner to lesson 05's plans chart, whose fp32 NCHW heuristic
    pick is several percent from its fastest plan: far beyond the defaults' spread here, so it led
    to "faster". The hints point at this convolution's labkit rows (the heuristic's plan against the
    autotuned one), which the summary under the chart names."""
    from labkit.experiments.core import result
    from labkit.experiments.pytorch_knobs.summaries import BENCHMARK, DEFAULTS, row_of
    from labkit.present import check

    ex = check.benchmark_faster.exercise
    hints = " ".join(ex.hint(n) for n in (0, 1))
    assert "lesson 05" not in hints and "labkit's counterpart rows" in hints, hints
    plans = result("plans", spec=BASE.replace(dtype="fp32", layout="NCHW"))
    ok = plans[plans.status == "ok"]
    lesson_05 = float(ok[ok.heuristic_pick].gpu_us.iloc[0] / ok[ok.best].gpu_us.iloc[0])
    base = row_of(recorded.knobs(), DEFAULTS)
    assert lesson_05 > base.gpu_us_p90 / base.gpu_us_p10, (lesson_05, base.gpu_us_p10, base.gpu_us_p90)
    summary = " ".join(str(recorded.summary(recorded.knobs())).split())
    assert "Its labkit counterpart (autotuned" in summary and BENCHMARK in summary, summary
