"""labkit.present.check: right answers (computed here from the recorded tables) pass, wrong ones get a
hint that does not give the answer away, None asks the question, bad types raise InvalidSpec."""

from __future__ import annotations

import pytest

import labkit
from labkit import experiments
from labkit.errors import InvalidSpec
from labkit.present import check

BASE = experiments.BASE


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def truths():
    """check name -> (right answer, wrong answer, a string the wrong answer's hint must not contain)."""
    prec = experiments.precision()
    order = list(prec.sort_values("rel_error_vs_fp64_inputs").dtype)
    lay = experiments.layout().set_index("layout")
    fus = experiments.fusion()
    fr = fus[fus.epilogue == "bias_relu"].set_index("path")
    f32 = experiments.fusion(BASE.replace(dtype="fp32"))
    loses = [
        e
        for e, s in f32.groupby("epilogue")
        if s.set_index("path").gpu_us["fused"] > s.set_index("path").gpu_us["unfused"]
    ]
    pl = experiments.plans(BASE.replace(layout="NCHW"))
    cp = experiments.caps(BASE.replace(layout="NCHW"))
    bc = experiments.build_cost(BASE.replace(dtype="fp32", layout="NCHW"))
    rep = labkit.report("resnet50", batch=32)
    big = rep.layers.loc[rep.layers.fastest_workspace_bytes.idxmax(), "layer"]
    fits = rep.budget[(rep.budget.cap_bytes >= 0) & (rep.budget.cap_bytes <= 16 << 20)]
    best_cap = float(fits.loc[fits.pass_gpu_us.idxmin(), "cap_bytes"]) / (1 << 20)
    st = rep.strategies[rep.strategies.peak_workspace_bytes <= 64 << 20]
    best_st = st.loc[st.pass_gpu_us.idxmin(), "strategy"]
    worst_st = st.loc[st.pass_gpu_us.idxmax(), "strategy"]
    race = experiments.race("graph", 2)
    shared = int(race[race.scratchpad == "shared"].mismatches_bitwise.iloc[0])
    kern = experiments.kernels(BASE)
    heur = kern.sort_values("plan_index").kernels_per_call.iloc[
        0
    ]  # the heuristic's pick: its first runnable plan
    tl = experiments.strategy_timeline("one_conv", 8).drop_duplicates("strategy").set_index("strategy")
    idle = tl.idle_share_api if "idle_share_api" in tl else tl.idle_share
    overlap = float(experiments.race_timeline("graph", 2).overlap_us.iloc[0])
    return {
        "mode": ("recorded", "live", None),
        "precision_order": (order, order[::-1], None),
        "nhwc_speedup": (lay.conv_gpu_us["NCHW"] / lay.conv_gpu_us["NHWC"], 50.0, None),
        "nhwc_pays_off": (
            bool(lay.end_to_end_us["NHWC"] < lay.end_to_end_us["NCHW"]),
            not bool(lay.end_to_end_us["NHWC"] < lay.end_to_end_us["NCHW"]),
            None,
        ),
        "fusion_speedup": (
            fr.gpu_us["unfused"] / fr.gpu_us["fused"],
            100.0,
            f"{fr.gpu_us['unfused'] / fr.gpu_us['fused']:.1f}x",
        ),
        "fusion_saved_bytes": (
            int(fr.intermediate_bytes["unfused"]),
            12,
            f"{int(fr.intermediate_bytes['unfused']):,}",
        ),
        "fusion_loses": (loses[0] if loses else "none", "none" if loses else "bias_relu", None),
        "worst_vs_best": (pl.gpu_us.max() / pl.gpu_us.min(), 1.0, None),
        "cap_slowdown": (float(cp[cp.cap_bytes == 2**20].slowdown_vs_unlimited.iloc[0]), 100.0, None),
        "autotune_payoff_calls": (float(bc.calls_to_pay_off_autotune.iloc[0]), 3, None),
        "race_mismatches": (shared, shared + 1, None),
        "race_hidden_by": ("python", "graph", "python"),
        "scratchpad_shared_flag": (True, False, None),
        "largest_workspace_layer": (big, "layer2.0.conv2" if big != "layer2.0.conv2" else "conv1", big),
        "cap_for_budget": (best_cap, 0, None),
        "strategy_for_budget": (best_st, worst_st, best_st),
        "heuristic_kernels": (float(heur), float(heur) + 3, None),
        "idle_strategy": (idle.idxmax(), idle.idxmin(), idle.idxmax()),
        "race_overlap": (overlap, overlap * 3 + 100, None),
    }


#: the checks written as functions (those made from `labkit.experiments.exercise.Exercise` objects are
#: covered by tests/test_exercises.py)
ALL = [fn for fns in check.EXERCISES.values() for fn in fns if not hasattr(fn, "exercise")]


def test_every_exercise_has_a_truth():
    assert sorted(fn.__name__ for fn in ALL) == sorted(truths())
    assert all(2 <= len(fns) <= 6 for lesson, fns in check.EXERCISES.items() if lesson != "00")


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_right_answer_passes(fn, capsys):
    right, _, _ = truths()[fn.__name__]
    res = fn(right)
    out = capsys.readouterr().out
    assert res.correct and bool(res), res.message
    assert out.startswith("correct: ") and all(len(line) <= 100 for line in out.splitlines())


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_wrong_answer_gets_a_hint_not_the_answer(fn, capsys):
    _, wrong, secret = truths()[fn.__name__]
    res = fn(wrong)
    out = capsys.readouterr().out
    assert not res.correct and out.startswith("not yet: ")
    if secret:
        assert secret not in out, f"the hint gives the answer away: {out}"


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_none_asks_the_question(fn, capsys):
    res = fn(None)
    assert not res.correct and capsys.readouterr().out.startswith("no answer yet: ")


BAD = {  # check -> answers of the wrong type
    "mode": [3],
    "precision_order": ["fp32", ["fp32"], [1, 2, 3, 4, 5]],
    "nhwc_speedup": ["2x"],
    "nhwc_pays_off": ["yes", 1],
    "fusion_speedup": ["fast"],
    "fusion_saved_bytes": [{}],
    "fusion_loses": [0, "relu"],
    "worst_vs_best": [float("nan")],
    "cap_slowdown": ["x"],
    "autotune_payoff_calls": [[3]],
    "race_mismatches": ["598"],
    "race_hidden_by": [True, "cuda"],
    "scratchpad_shared_flag": ["True", 1],
    "largest_workspace_layer": [3, "no_such_layer"],
    "cap_for_budget": ["16"],
    "strategy_for_budget": [3, "magic"],
    "heuristic_kernels": ["2"],
    "idle_strategy": [3, "magic"],
    "race_overlap": ["100us"],
}


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_bad_types_raise_invalid_spec(fn):
    for bad in BAD[fn.__name__]:
        with pytest.raises(InvalidSpec):
            fn(bad)


def test_checks_use_a_given_dataframe():
    df = experiments.layout(BASE.replace(N=1))
    t = df.set_index("layout").conv_gpu_us
    assert check.nhwc_speedup(float(t["NCHW"] / t["NHWC"]), df=df)
    with pytest.raises(InvalidSpec):
        check.cap_slowdown(2.0, cap_mib=3)


def test_every_exercise_hint_names_only_what_its_lesson_shows(monkeypatch, capsys):
    """A hint that sends the learner to a column (``intermediate_bytes``) must point at one the
    lesson shows or names: every snake_case name in a hint appears in its notebook's cells."""
    import json
    import re
    from pathlib import Path

    from labkit.present import check

    monkeypatch.setenv("LABKIT_MODE", "recorded")
    missing = []
    for nb in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells)
        for call in re.findall(r"(?<![\w.])check\.(\w+)\(answer", text):
            fn = getattr(check, call)
            hint = (
                " ".join(fn.exercise.hints)
                if hasattr(fn, "exercise")
                else fn(None).message.split("Hint:", 1)[1]
            )
            for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", hint):
                if name not in text:
                    missing.append(
                        f"{nb.name}: check.{call} hint names {name!r}, which the lesson never shows"
                    )
    capsys.readouterr()
    assert not missing, "\n".join(missing)
