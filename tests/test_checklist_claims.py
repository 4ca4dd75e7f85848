"""The performance checklist's sentences held against its numbers, for every shipped preset on
every shipped recording: each item's before and after recomputed here from the raw rows (the
checklist's measurements and the network report's), each sentence checked to write those numbers
and to say the direction they point (faster or slower, a gain or a loss, fits or not); every
quantity a sentence names can be read on the chart, and the chart follows the grammar."""

from __future__ import annotations

import chart_grammar as grammar
import pytest

import labkit
from labkit.draw.plots import fmt_seconds, fmt_us
from labkit.draw.units import size_text, us_text
from labkit.experiments.your_network import PRODUCTION_BATCH, RECORDED_PRESETS, checklist
from labkit.store import recordings

pytestmark = pytest.mark.usefixtures("recorded_mode")

CASES = [
    pytest.param(rec.name, net, id=f"{rec.name}-{net}")
    for rec in recordings.shipped()
    if "checklist_items" in rec.experiments()
    for net in RECORDED_PRESETS
]


@pytest.fixture(scope="module")
def made():
    """(recording, net) -> (the checklist, its sentences by item)."""
    cache = {}

    def get(recording, net):
        if (recording, net) not in cache:
            cl = labkit.report(net, recording=recording).checklist()
            cache[recording, net] = (cl, dict(zip(cl.table["item"], cl.sentences())))
        return cache[recording, net]

    return get


def _ok(df):
    return df[df.status == "ok"]


def _pass_us(convs, **sel):
    """spec_id -> count x gpu_us of the rows measured ok with these values."""
    rows = _ok(convs)
    for k, v in sel.items():
        rows = rows[rows[k] == v]
    return dict(zip(rows.spec_id, rows.gpu_us * rows["count"]))


def _both(a: dict, b: dict) -> tuple:
    keys = set(a) & set(b)
    return sum(a[k] for k in keys), sum(b[k] for k in keys), len(keys)


def _labels(fig) -> dict:
    """Item -> its bar's label, over every panel of the checklist's chart."""
    return {y: text for t in fig.data if t.type == "bar" for y, text in zip(t.y, t.text)}


@pytest.mark.parametrize("recording, net", CASES)
def test_every_item_has_a_row_and_one_sentence(made, recording, net):
    cl, said = made(recording, net)
    assert list(cl.table["item"]) == list(checklist.ITEMS) and list(said) == list(checklist.ITEMS)
    assert cl.table.attrs["mode"] == "recorded" and recording in str(cl.table.attrs["source"])
    for item, sentence in said.items():
        assert sentence.startswith(item.capitalize()), sentence


@pytest.mark.parametrize("recording, net", CASES)
def test_the_time_sentences_hold_against_the_rows(made, recording, net):
    cl, said = made(recording, net)
    items = cl.items
    convs = items[items.table == "convs"]
    fp32, fp16 = (
        _pass_us(convs, dtype="fp32", layout="NHWC", N=32),
        _pass_us(convs, dtype="fp16", layout="NHWC", N=32),
    )
    before, after, _ = _both(fp32, fp16)
    assert f"take {us_text(after)} in fp16 against {us_text(before)} in fp32" in said["precision"]
    assert ("faster" if after < before else "slower") in said["precision"]

    nchw = _pass_us(convs, dtype="fp16", layout="NCHW", N=32)
    b, a, _ = _both(nchw, fp16)
    convert = float(_ok(items[items.table == "convert"]).convert_gpu_us.iloc[0])
    assert f"converting the network's input from NCHW once {us_text(convert)}" in said["layout"]
    assert f"{us_text(a + convert)} in all against {us_text(b)} in NCHW" in said["layout"]
    assert ("a gain" if a + convert < b else "a loss") in said["layout"]

    rep = labkit.report(net, recording=recording)
    layers = _ok(rep.layers)
    heuristic, fastest = layers.heuristic_gpu_us.sum(), layers.fastest_gpu_us.sum()
    tuning = layers.drop_duplicates("spec_id").step_seconds.sum()
    assert f"take {us_text(fastest)} a pass against the heuristic's {us_text(heuristic)}" in said["autotune"]
    assert fmt_seconds(tuning) in said["autotune"]

    plans = _ok(items[items.table == "plans"]).dropna(subset=["load_seconds"])
    assert f"took {fmt_us(plans.build_seconds.sum() * 1e6)}; loading them saved took" in said["plans"]
    assert fmt_us(plans.load_seconds.sum() * 1e6) in said["plans"]

    reuse = _ok(items[items.table == "reuse"])
    rebuild, reused = (
        (reuse.rebuild_call_us * reuse["count"]).sum(),
        (reuse.reuse_call_us * reuse["count"]).sum(),
    )
    assert (
        f"costs {fmt_us(rebuild)} of host time a pass, calling the built graphs {fmt_us(reused)}"
        in said["graph reuse"]
    )
    assert rebuild > reused  # building a graph costs more than calling one built

    big = _pass_us(convs, dtype="fp16", layout="NHWC", N=PRODUCTION_BATCH)
    small, large, _ = _both(fp16, big)
    per_small, per_large = small / 32, large / PRODUCTION_BATCH
    assert f"takes {us_text(per_large)} of convolution time at batch {PRODUCTION_BATCH}" in said["batch size"]
    assert f"against {us_text(per_small)} at batch 32" in said["batch size"]
    assert ("less" if per_large < per_small else "more") in said["batch size"]


@pytest.mark.parametrize("recording, net", CASES)
def test_autotunes_gain_is_read_against_the_heuristics_pass_timed_twice(made, recording, net):
    cl, said = made(recording, net)
    items = cl.items
    layers = _ok(labkit.report(net, recording=recording).layers)
    report = layers.heuristic_gpu_us.sum()
    convs = _ok(items[items.table == "convs"])
    convs = convs[(convs.dtype == "fp16") & (convs.layout == "NHWC") & (convs.N == 32)]
    again_by_spec = dict(zip(convs.spec_id, convs.gpu_us))
    again = sum(again_by_spec[s] for s in layers.spec_id)  # one term a call, as the report's pass
    gain = report - layers.fastest_gpu_us.sum()
    diff = abs(again - report)
    assert (
        f"same heuristic plans, for precision and layout, gives {us_text(again)}, {us_text(diff)}"
        in said["autotune"]
    )
    assert f"the gain is {'within' if gain <= diff else 'beyond'} the difference" in said["autotune"]
    # the chart's label names it too, and the precision and layout rows time the same pass
    row = cl.table.set_index("item").loc["autotune"]
    assert (
        f"(heuristic timed again: {us_text(again)}, {us_text(diff)} apart)" in _labels(cl.chart())["autotune"]
    )
    assert us_text(row.again_us) == us_text(cl.table.set_index("item").loc["precision"].after_us)


@pytest.mark.parametrize("recording, net", CASES)
def test_the_memory_and_profile_sentences_hold_against_the_rows(made, recording, net):
    cl, said = made(recording, net)
    rep = labkit.report(net, recording=recording)
    strategies = _ok(rep.strategies)
    layers = _ok(rep.layers)
    fwd = layers
    P = (fwd.H + 2 * fwd.padding - fwd.dilation * (fwd.R - 1) - 1) // fwd.stride + 1
    Q = (fwd.W + 2 * fwd.padding - fwd.dilation * (fwd.S - 1) - 1) // fwd.stride + 1
    filters = (fwd.K * (fwd.C // fwd.groups) * fwd.R * fwd.S * 2).sum()
    inout = (fwd.N * fwd.C * fwd.H * fwd.W * 2 + fwd.N * fwd.K * P * Q * 2).max()
    peak = float(filters + inout + strategies.peak_workspace_bytes.max())
    memory = recordings.named(recording).metadata["gpu_memory_bytes"]
    assert f"holds at least {size_text(peak)}" in said["memory fits"]
    assert f"{100 * peak / memory:.1f}% of this GPU's {size_text(memory)}" in said["memory fits"]
    other = next(r for r in recordings.shipped() if r.metadata["gpu"] != rep.provenance["gpu"])
    target = other.metadata["gpu_memory_bytes"]
    assert (
        f"{100 * peak / target:.1f}% of the {labkit.env.gpu_label(other.metadata['gpu'])}'s"
        in said["memory fits"]
    )
    assert said["memory fits"].endswith("it fits.") == (peak <= memory and peak <= target)

    pass_us = float(strategies[strategies.strategy == "preallocated"].pass_gpu_us.iloc[0])
    kernels = float(layers.fastest_gpu_us.sum())
    assert (
        f"took {us_text(pass_us)} between two events and its calls' kernels {us_text(kernels)}"
        in said["profile"]
    )
    assert f"idled {100 * (pass_us - kernels) / pass_us:.0f}% of it" in said["profile"]
    # the shapes are ranked by their time summed over their calls, and the sentence says so
    by_shape = layers.groupby("spec_id").fastest_gpu_us.agg(["sum", "size"])
    by_shape = by_shape.sort_values("sum", ascending=False)
    top, first = by_shape.iloc[0], layers[layers.spec_id == by_shape.index[0]].layer.iloc[0]
    listed = said["profile"].split("summed over their calls, each named by its first layer: ")[1]
    calls = f"{int(top['size'])} calls, {us_text(top['sum'])} in all" if top["size"] > 1 else "1 call, "
    assert listed.startswith(f"{first} ({calls}"), listed
    assert f"{100 * top['sum'] / kernels:.0f}%)" in listed.split(")")[0] + ")", listed


@pytest.mark.parametrize("recording, net", CASES)
def test_every_quantity_a_sentence_names_can_be_read_on_the_chart(made, recording, net):
    cl, said = made(recording, net)
    fig = cl.chart()
    assert grammar.violations(fig) == []
    labels = _labels(fig)
    for item, sentence in said.items():
        if item not in labels:
            assert "not measurable here" in sentence or "production batch is the batch" in sentence
            continue
        for m in grammar.QUANTITY.finditer(sentence):
            assert m.group(0) in labels[item], f"{item}: {m.group(0)!r} not on the chart: {labels[item]!r}"
    assert labkit.env.gpu_label(cl.table.attrs["gpu"]) in fig.layout.title.text  # provenance, once


#: each kind of percent the checklist draws: the items that are one, and the words its axis says it with
KINDS = {
    "time saved": (checklist.ITEMS[:6], "time saved by the item (% of the time before it)"),
    "memory held": (("memory fits",), "memory the forward holds (% of this GPU's memory)"),
    "time idle": (("profile",), "time the GPU idles between launches (% of the pass)"),
}


@pytest.mark.parametrize("recording, net", CASES)
def test_each_axis_of_the_chart_has_one_meaning(made, recording, net):
    """One scale per chart: each kind of percent on an axis of its own, whose title says which."""
    cl, _ = made(recording, net)
    fig = cl.chart()
    layout = fig.layout.to_plotly_json()
    on_axis = {}
    for t in fig.data:
        axis = "xaxis" + (t.xaxis or "x")[1:]
        on_axis.setdefault(axis, set()).update(t.y)
    kinds = {}
    for axis, items in on_axis.items():
        found = {kind for kind, (members, _) in KINDS.items() if items & set(members)}
        assert len(found) == 1, f"{axis} mixes {sorted(found)}: {sorted(items)}"
        kind = found.pop()
        assert items <= set(KINDS[kind][0]) and layout[axis]["title"]["text"] == KINDS[kind][1]
        kinds[kind] = axis
    assert len(set(kinds.values())) == len(kinds) == 3
