"""Checks of plans against float64, without a GPU: verdicts and their memory, the sentences a
result carries, a verdict inside a saved plan, plan-table statuses, labels read back, and the
format of docs/wrong-plans.md (the GPU side: tests/test_plan_checks_gpu.py)."""

import math
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit import ConvSpec, InvalidSpec, WrongResult
from labkit.errors import Unsupported
from labkit.gpu.audits import wrong_plans
from labkit.gpu.checks import plan_checks
from labkit.gpu.checks.plan_checks import BOOK, Verdict, VerdictBook

TOL = 1e-2


# ---- verdicts ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "rel, ok",
    [(0.0, True), (TOL, True), (1.1 * TOL, False), (1.4, False), (math.inf, False), (math.nan, False)],
)
def test_a_verdict_is_ok_only_within_the_tolerance(rel, ok):
    v = Verdict("eng7_k24=29", rel, TOL)
    assert v.ok is ok
    assert (v.status == "ok") is ok
    assert plan_checks.is_wrong(v.status) is not ok


def test_a_wrong_status_names_the_error_and_the_tolerance():
    assert Verdict("eng7_k24=29", 1.4, TOL).status == (
        "wrong result: relative error 1.4 vs float64 (tolerance 1.00e-02)"
    )
    assert "NaN or inf" in Verdict("eng4", math.inf, TOL).status
    assert "3.00e-05" in Verdict("eng17_k25=0", 3e-5, 2e-5).status


def test_a_plan_that_failed_its_run_is_excluded_and_says_why():
    v = Verdict("eng1", math.inf, TOL, error="workspace guard bands overwritten")
    assert not v.ok and v.status.startswith(plan_checks.FAILED) and "guard bands" in v.status
    assert plan_checks.is_wrong(v.status)


@pytest.mark.parametrize(
    "status", ["ok", "slower: one eager call took 3 ms", "cut: the budget", "timed out after 2 s"]
)
def test_other_statuses_are_not_wrong(status):
    assert not plan_checks.is_wrong(status)


def test_wrong_result_is_an_unsupported():
    assert issubclass(WrongResult, Unsupported)
    assert "not supported" in str(WrongResult("plan 0 (eng7_k24=29)", "wrong result: relative error 1.4"))


# ---- the process's memory of verdicts ------------------------------------------------------------
SPEC = ConvSpec(N=2, C=16, H=10, W=10, K=16, dtype="fp8_e4m3", layout="NCHW")


def test_the_book_keys_by_spec_epilogue_and_plan():
    book = VerdictBook()
    wrong, right = Verdict("eng7_k24=29", 1.4, TOL), Verdict("eng4_k24=26", 2e-4, TOL)
    book.put(SPEC.key, "none", wrong)
    book.put(SPEC.key, "none", right)
    assert book.get(SPEC.key, "none", "eng7_k24=29") == wrong
    assert book.get(SPEC.key, "bias_relu", "eng7_k24=29") is None
    assert book.get(SPEC.replace(N=3).key, "none", "eng7_k24=29") is None
    assert book.wrong(SPEC.key, "none") == [(SPEC.key, "none", wrong)]
    assert book.wrong(SPEC.replace(layout="NHWC").key) == []
    assert len(book) == 2


def test_a_transient_verdict_is_not_remembered():
    book = VerdictBook()
    book.put(SPEC.key, "none", Verdict("eng0", math.inf, TOL, error="out of device memory", transient=True))
    assert len(book) == 0


def test_the_book_is_bounded_and_forgets_the_oldest():
    book = VerdictBook(max_entries=3)
    for i in range(5):
        book.put(SPEC.key, "none", Verdict(f"eng{i}", 0.0, TOL))
    assert (
        len(book) == 3 and book.get(SPEC.key, "none", "eng0") is None and book.get(SPEC.key, "none", "eng4")
    )


def test_the_book_takes_writers_from_several_threads():
    book = VerdictBook()

    def write(k):
        for i in range(200):
            book.put(SPEC.key, "none", Verdict(f"eng{k}_{i}", 0.0, TOL))

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(book) == 800


def test_the_process_has_one_book():
    assert isinstance(BOOK, VerdictBook)


# ---- what a result says when the heuristic's pick is wrong --------------------------------------
def test_the_fell_through_sentence_names_both_plans_and_the_error():
    text = plan_checks.fell_through_note((0, Verdict("eng7_k24=29", 1.4, TOL)), (3, "eng4_k24=26"))
    assert text == (
        "the heuristic's first choice, plan 0 (eng7_k24=29), computes wrong results here "
        "(relative error 1.4 vs float64); its next correct plan, plan 3 (eng4_k24=26), ran instead"
    )
    none = plan_checks.fell_through_note((0, Verdict("eng7_k24=29", 1.4, TOL)), None)
    assert none.endswith("no other plan was right")
    failed = plan_checks.fell_through_note(
        (0, Verdict("eng1", math.inf, TOL, error="cuDNN refused")), (1, "eng0")
    )
    assert "failed its check here (cuDNN refused)" in failed


# ---- a verdict inside a saved plan --------------------------------------------------------------
def test_a_saved_verdict_reads_back_and_is_judged_by_todays_tolerance():
    v = Verdict("eng4_k24=26", 2.3e-4, TOL, 1e-3)
    info = dict(gpu_us=12.0, check=plan_checks.as_info(v))
    back = plan_checks.from_info("eng4_k24=26", info, TOL)
    assert back == v
    assert not plan_checks.from_info("eng4_k24=26", info, 1e-4).ok  # a tighter tolerance today


@pytest.mark.parametrize(
    "info",
    [
        {},
        None,
        dict(check="yes"),
        dict(check={}),
        dict(check=dict(rel_error="x")),
        dict(check=dict(rel_error=math.nan)),
    ],
)
def test_a_saved_plan_without_a_readable_verdict_gets_none(info):
    assert plan_checks.from_info("eng0", info, TOL) is None


# ---- plan tables --------------------------------------------------------------------------------
def _recorded_plans(recorded_mode):
    from labkit import experiments

    return experiments.plans(ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp8_e4m3", layout="NCHW"))


def test_a_plans_table_shows_a_wrong_plan_as_wrong_not_as_a_time(recorded_mode):
    """The shipped recording's fp8 NCHW table with its first choice marked as the check marks a
    wrong plan (what a live table holds when cuDNN gets that plan wrong)."""
    from labkit.experiments import plans_autotune as pa

    df = _recorded_plans(recorded_mode).copy()
    first = df.plan_index.idxmin()
    df["first_choice"] = df.index == first
    df["rel_error"] = 2e-4
    df.loc[first, ["status", "gpu_us", "rel_error"]] = [Verdict("x", 1.4, TOL).status, math.nan, 1.4]
    df.loc[first, "heuristic_pick"] = False
    df.loc[df[df.status == "ok"].gpu_us.idxmin(), "heuristic_pick"] = True
    fig = pa.plans_chart(df)
    assert len(fig.data[0].x) == len(df) - 1  # every plan but the wrong one has a point
    notes = " ".join(a.text or "" for a in fig.layout.annotations)
    assert f"1 of {len(df)} plans computed wrong results (checked vs float64): not timed" in notes
    text = str(pa.plans_summary(df))
    assert f"1 of {len(df)} plans computed wrong results when checked against float64" in text
    assert f"plan {int(df.loc[first, 'plan_index'])} ({df.loc[first, 'plan_name']})" in text
    assert "relative error 1.4" in text


def test_a_recorded_plans_table_without_checks_says_nothing_of_them(recorded_mode):
    from labkit.experiments import plans_autotune as pa

    df = _recorded_plans(recorded_mode)
    assert pa.wrong_plans_sentence(df) == ""


def test_a_network_report_counts_wrong_plans_apart_from_cut_ones():
    import pandas as pd

    from labkit.experiments.your_network.tables import cut_counts

    statuses = ["ok", Verdict("x", 1.4, TOL).status, "cut: the budget was spent", "slower: one eager call"]
    df = pd.DataFrame(
        [dict(table="plans", spec_id=0, status=s, workspace_bytes=0, gpu_us=1.0) for s in statuses]
        + [dict(table="layers", spec_id=0, status="ok"), dict(table="strategies", status="ok")]
    )
    counts = cut_counts(df)
    assert counts["wrong_plans"] == 1 and counts["plans"] == 1 and counts["slower_plans"] == 1


# ---- labels and the docs table ------------------------------------------------------------------
@settings(max_examples=200, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1))
def test_a_label_reads_back_as_its_spec(seed):
    spec = wrong_plans.random_spec(random.Random(seed))
    assert ConvSpec.from_label(spec.label) == spec


@pytest.mark.parametrize(
    "label",
    ["", "fp16 NHWC fprop", "fp16 NHWC fprop 1x2x3 -> 4 3x3 s1 p1", "fp99 NHWC fprop 1x2x3x4 -> 4 3x3 s1 p1"],
)
def test_a_bad_label_is_an_invalid_spec(label):
    with pytest.raises(InvalidSpec):
        ConvSpec.from_label(label)


def test_random_specs_cover_every_dtype_layout_direction_and_shape_feature():
    specs = [wrong_plans.random_spec(random.Random(i)) for i in range(400)]
    assert {s.dtype for s in specs} == {"fp32", "tf32", "fp16", "bf16", "fp8_e4m3"}
    assert {s.layout for s in specs} == {"NCHW", "NHWC"} and {s.direction for s in specs} == {
        "fprop",
        "dgrad",
        "wgrad",
    }
    assert any(s.groups > 1 and s.groups == s.C for s in specs)  # depthwise
    assert any(1 < s.groups < s.C for s in specs) and any(s.dilation != (1, 1) for s in specs)
    assert any(s.stride != (1, 1) for s in specs) and any(s.H % 2 and s.W % 2 for s in specs)


def test_shrinking_steps_are_valid_and_never_larger():
    spec = ConvSpec.from_label("fp8_e4m3 NCHW fprop 16x96x5x7 -> 6 7x7 s2 p1 g2")
    steps = list(wrong_plans.smaller(spec))
    assert steps and all(wrong_plans.size(s) <= wrong_plans.size(spec) and s != spec for s in steps)
    assert len({s.key for s in steps}) == len(steps)
    assert wrong_plans.smaller(ConvSpec(N=1, C=1, H=1, W=1, K=1, R=1, S=1, padding=0)).__next__ is not None


def test_the_docs_table_parses_and_every_row_is_a_real_convolution():
    text = wrong_plans.DOC.read_text()
    rows = wrong_plans.read_table(text)
    assert rows, "docs/wrong-plans.md lists no reproduction"
    for rep in rows:
        assert rep.plan.startswith("eng") and rep.cudnn[0].isdigit() and rep.frontend[0].isdigit()
        assert rep.rel_error > 1e-2 or not math.isfinite(rep.rel_error)  # wrong, not merely imprecise
        assert wrong_plans.table_row(rep) in text  # the file holds rows as table_row writes them
    assert len({(r.plan, r.spec.dtype, r.spec.layout, r.spec.direction) for r in rows}) == len(rows)


def test_a_table_row_reads_back():
    rep = wrong_plans.Reproduction(
        "eng7_k24=29",
        ConvSpec.from_label("fp8_e4m3 NCHW fprop 1x4x1x1 -> 16 1x1 s1 p0"),
        1.4,
        "H100",
        "9.19.0",
        "1.28.0",
    )
    doc = "\n".join(
        [
            wrong_plans.TABLE_HEADING,
            "",
            "| " + " | ".join(wrong_plans.COLUMNS) + " |",
            "| " + " | ".join("---" for _ in wrong_plans.COLUMNS) + " |",
            wrong_plans.table_row(rep),
            wrong_plans.table_row(
                wrong_plans.Reproduction("eng4", rep.spec.replace(N=1), math.inf, "H100", "9.19.0", "1.28.0")
            ),
        ]
    )
    assert wrong_plans.read_table(doc) == [
        rep,
        wrong_plans.Reproduction("eng4", rep.spec.replace(N=1), math.inf, "H100", "9.19.0", "1.28.0"),
    ]


@pytest.mark.parametrize(
    "doc, words",
    [
        ("# nothing here", "heading"),
        (f"{wrong_plans.TABLE_HEADING}\n\n| plan | spec |\n| --- | --- |\n", "columns"),
        (
            f"{wrong_plans.TABLE_HEADING}\n\n| " + " | ".join(wrong_plans.COLUMNS) + " |\n| --- |\n"
            "| `eng0` | `fp16 NHWC fprop 1x2 -> 3` | 1.0 | H100 | 9.19.0 | 1.28.0 | - |\n",
            "line 5",
        ),
        (
            f"{wrong_plans.TABLE_HEADING}\n\n| "
            + " | ".join(wrong_plans.COLUMNS)
            + " |\n| --- |\n| `eng0` | x |\n",
            "line 5",
        ),
    ],
)
def test_a_malformed_table_is_an_invalid_spec_naming_what(doc, words):
    with pytest.raises(InvalidSpec, match=words):
        wrong_plans.read_table(doc)
