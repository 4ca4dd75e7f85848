"""Reading a trace frame (`labkit.gpu.timing.trace`, no GPU): times relative to the first record, marks
on the same axis, passes cut at the marks, busy time and idle share of each."""

import re

import pytest

from labkit.gpu.timing import trace


def _kernel(start_ns, end_ns, stream=7):
    return dict(
        kind="kernel",
        start_ns=start_ns,
        end_ns=end_ns,
        correlation_id=1,
        stream_id=stream,
        raw_name="xmma_gemm_kernel",
        grid="1x1x1",
        block="128x1x1",
        graph_id=0,
    )


def test_marks_cut_a_frame_into_passes_with_their_own_idle_share():
    # pass 1: two kernels of 10 us with a 10 us gap; pass 2: two kernels back to back
    rows = [
        _kernel(1_000_000, 1_010_000),
        _kernel(1_020_000, 1_030_000),
        _kernel(1_100_000, 1_110_000),
        _kernel(1_110_000, 1_120_000),
    ]
    df = trace.to_frame(rows, "two passes", marks_ns=[999_000, 1_050_000, 1_200_000])
    assert df.attrs["marks_us"] == [-1.0, 50.0, 200.0]
    first, second = trace.between_marks(df)
    assert len(first) == 2 and len(second) == 2
    assert trace.busy_us(first) == pytest.approx(20.0) and trace.idle_share(first) == pytest.approx(1 / 3)
    assert trace.idle_share(second) == pytest.approx(0.0)
    assert set(df.role) == {"main convolution"} and set(df.row) == {"stream 1"}


def test_a_frame_without_marks_has_no_passes():
    df = trace.to_frame([_kernel(0, 5_000)], "one kernel")
    assert df.attrs["marks_us"] == [] and trace.between_marks(df) == []
    assert trace.to_frame([], "empty").attrs["marks_us"] == []


def test_overlap_spans_are_where_both_streams_ran_and_sum_to_overlap_us():
    # stream 1: 0-10 and 20-30 us; stream 2 (another stream id): 5-25 us
    rows = [_kernel(0, 10_000, stream=7), _kernel(20_000, 30_000, stream=7), _kernel(5_000, 25_000, stream=9)]
    df = trace.to_frame(rows, "two streams")
    assert set(df.row) == {"stream 1", "stream 2"}
    assert trace.overlap_spans(df, "stream 1", "stream 2") == [(5.0, 10.0), (20.0, 25.0)]
    assert trace.overlap_us(df, "stream 1", "stream 2") == pytest.approx(10.0)
    assert trace.overlap_spans(df[df.row == "stream 1"], "stream 1", "stream 2") == []


def test_the_race_chart_shades_the_overlap_and_never_hides_kernels_under_waits():
    """The recorded race: CUPTI's synchronisation records lie on the stream lanes exactly where the
    streams overlap; they are drawn first (under the kernels) and the overlap is a shaded band."""
    from labkit import experiments
    from labkit.experiments.under_the_hood import TIMELINE_KINDS

    df = experiments.race_timeline("graph", 2)
    fig = experiments.chart(df)
    names = [t.name for t in fig.data]
    assert names[0] == "synchronise (host)" and names.index("kernels") > 0
    legend = sorted(fig.data, key=lambda t: t.legendrank)
    assert [t.name for t in legend] == [name for _, name, _ in TIMELINE_KINDS]
    bands = [s for s in fig.layout.shapes if s.name == "both streams' kernels at once"]
    assert bands and sum(s.x1 - s.x0 for s in bands) >= float(df.overlap_us.iloc[0]) * 0.99
    assert list(fig.layout.yaxis.categoryarray)[:2] == ["stream 1", "stream 2"]


def test_merged_spans_join_overlapping_touching_and_close_spans():
    spans = [(10, 12), (0, 5), (5, 6), (3, 4), (20, 30), (13, 14)]
    assert trace.merged_spans(spans) == [[0, 6], [10, 12], [13, 14], [20, 30]]
    assert trace.merged_spans(spans, join=2) == [[0, 6], [10, 14], [20, 30]]
    assert trace.merged_spans([]) == []


@pytest.mark.parametrize("recording", ["h100-sxm", "h200"])
def test_the_race_summary_tells_the_window_from_the_overlap(recorded_mode, monkeypatch, recording):
    """The graph-launched round: the stretch in which the streams could meet is longer than the time
    they did; the summary and the chart's note give both, each once and for what it is."""
    from labkit import experiments
    from labkit.draw.units import us_text as fmt_us
    from labkit.experiments.under_the_hood.race_trace import overlap_total, stream_spans

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    df = experiments.race_timeline("graph", 2)
    text = str(experiments.summary(df))
    (_, e1), (s2, _) = stream_spans(df)["stream 1"], stream_spans(df)["stream 2"]
    overlap = overlap_total(df)
    assert overlap < e1 - s2
    assert f"could run together only in the last {fmt_us(e1 - s2)}" in text, text
    assert "and did for less than that: between its kernels, a stream ran nothing" in text, text
    assert f"ran at the same time for {fmt_us(overlap)}" in text, text
    note = " ".join(experiments.CHARTS["race_timeline"](df).layout.annotations[-1].text.split("<br>"))
    for said in (text, note):
        numbers = re.findall(r"(?<![\w.,])\d[\d,]*(?:\.\d+)? us", said)
        assert len(numbers) == len(set(numbers)), f"a duration said twice: {said}"


@pytest.mark.parametrize("recording", ["h100-sxm", "h200"])
def test_the_kernel_summaries_count_in_words_that_agree(recorded_mode, monkeypatch, recording):
    """Lesson 10's kernel and fusion summaries say "1 plan spends", "41 plans spend", "2 kernels": no
    "plan(s)" or "kernel(s)"."""
    from labkit import experiments

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    base = experiments.BASE
    texts = [
        str(experiments.summary(experiments.kernels(spec=base))),
        str(experiments.summary(experiments.kernels(spec=base.replace(layout="NCHW")))),
        str(experiments.summary(experiments.fusion_kernels(spec=base, epilogue="bias_relu"))),
    ]
    for text in texts:
        assert "(s)" not in text, text
    assert "1 plan spends GPU time converting layouts" in texts[0], texts[0]
    assert "plans spend GPU time converting layouts" in texts[1], texts[1]
    assert "launches 2 kernels per call" in texts[2], texts[2]
