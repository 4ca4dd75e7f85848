"""Recorded mode on this machine: the shipped H100 recording answers every lesson call, with
provenance, and every shipped recording holds every experiment; a call the default lacks comes from
the recording that holds it; bad recordings and unrecorded requests give clear errors."""

import json
import pickle
import shutil

import pytest
import recording_copies

import labkit
from labkit import ConvSpec, RecordedDataError, env, experiments
from labkit.cli.record import gpu_slug, grid
from labkit.store import recordings

pytestmark = pytest.mark.usefixtures("recorded_mode")


@pytest.fixture
def copy(tmp_path):
    src = recordings.data_dir() / recordings.DEFAULT_RECORDING
    dst = tmp_path / "rec"
    shutil.copytree(src, dst)
    return dst


def test_shipped_recording_is_complete_and_labelled():
    rec = recordings.current()
    m = rec.metadata
    assert rec.name == "h100-sxm" and "H100" in m["gpu"]
    assert m["cudnn_backend"].startswith("9.") and m["cudnn_frontend"].startswith("1.28")
    assert m["complete"] is True and m["schema_version"] == recordings.SCHEMA_VERSION
    assert len(m["git_commit"]) == 40 and m["wall_seconds"] > 0
    assert set(rec.experiments()) == set(experiments.registry())


def test_every_shipped_recording_holds_every_experiment():
    """`doctor` lists the same experiments for each shipped GPU: a lesson never has to borrow
    another GPU's numbers."""
    assert len(recordings.shipped()) == 2
    for r in recordings.shipped():
        assert set(r.experiments()) == set(experiments.registry()), r.name
        assert r.metadata["complete"] is True, r.name


def test_a_complete_recording_holds_every_request_of_the_grid():
    """A recording that says it is complete holds every call of the lessons' grid as the code has it
    now (`labkit.cli.record.grid`): a call added to the grid after a recording was made is recorded
    before a lesson offers it, on every GPU."""
    for r in recordings.shipped():
        held = {(n, experiments.request_key(q)) for n in r.experiments() for q in r.requests(n)}
        missing = [
            (n, kw)
            for n, kw in grid(quick=False)
            if (n, experiments.request_key(experiments.request_of(n, **kw))) not in held
        ]
        assert not missing, (r.name, missing[:3])


def test_a_call_the_default_recording_lacks_is_answered_by_the_shipped_recording_that_holds_it(
    tmp_path, monkeypatch
):
    """Nobody picked a recording and the default lacks a call (a recording cut short, or one of a
    GPU of your own): the shipped recording that holds it answers, its provenance naming its GPU,
    and a panel starts on the recording that holds the most of its experiment's calls. A recording
    picked answers alone."""
    n8 = dict(spec=experiments.BASE.replace(N=8))
    recording_copies.without(
        tmp_path / "call", monkeypatch, "h100-sxm", "precision", experiments.request_of("precision", **n8)
    )
    assert experiments.precision(**n8).attrs["gpu"] == "NVIDIA H200"
    assert experiments.precision().attrs["gpu"] == "NVIDIA H100 80GB HBM3"  # what the default holds
    assert recordings.for_experiment("precision").name == "h200"  # it holds more of its calls
    monkeypatch.setenv("LABKIT_RECORDING", "h100-sxm")
    assert recordings.for_experiment("precision").name == "h100-sxm"
    with pytest.raises(RecordedDataError, match="nearest recorded: spec.N="):
        experiments.precision(**n8)
    monkeypatch.delenv("LABKIT_RECORDING")
    recordings._current = recordings._picked = None

    recording_copies.without(tmp_path / "experiment", monkeypatch, "h100-sxm", "layout")
    assert recordings.for_experiment("layout").name == "h200"
    assert experiments.layout().attrs["gpu"] == "NVIDIA H200"
    recordings.use("h100-sxm")
    assert recordings.for_experiment("layout").name == "h200"  # the one picked holds none of it


@pytest.mark.parametrize("name,kwargs", grid(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_recorded_call_answers_with_provenance(name, kwargs):
    df = getattr(experiments, name)(**kwargs)
    assert len(df) > 0
    assert df.attrs["mode"] == "recorded"
    for k in ("gpu", "cudnn_backend", "cudnn_frontend", "date", "source"):
        assert df.attrs[k], k
    for col in df.columns:
        if (
            col.endswith(("_us", "_bytes")) and col != "cap_bytes" and df[col].dtype.kind in "if"
        ):  # cap -1 = unlimited
            assert (df[col].dropna() >= 0).all(), col


def test_a_request_outside_the_grid_names_the_nearest_recorded_values():
    with pytest.raises(RecordedDataError) as info:
        experiments.precision(ConvSpec(N=3, C=64, H=56, W=56, K=64))
    assert info.value.nearest == {"spec.N": [1, 8, 32, 64]}
    assert "nearest recorded: spec.N=[1, 8, 32, 64]" in str(info.value)
    assert "precision.csv" in str(info.value)


def test_recorded_values_for_widgets():
    rec = recordings.current()
    assert rec.values("precision", "spec.N", where={"spec.C": 64, "spec.H": 56, "spec.layout": "NHWC"}) == [
        1,
        8,
        32,
        64,
    ]
    assert rec.values("strategies", "workload") == sorted(
        ["one_conv", "resnet50_fp16_nhwc", "resnet50_fp32_nchw", "random_shapes", "growing_batch", "pressure"]
    )


def test_bad_arguments_are_invalid_spec_not_typeerror():
    with pytest.raises(labkit.InvalidSpec):
        experiments.precision(ConvSpec(), bogus=1)


def test_corrupt_csv_is_named(copy):
    path = copy / "precision.csv"
    path.write_text(path.read_text()[:-200])
    with pytest.raises(RecordedDataError, match="sha256") as info:
        recordings.load(copy).table("precision")
    assert info.value.path == path


def test_truncated_csv_without_checksum_reports_rows(copy):
    meta = json.loads((copy / "metadata.json").read_text())
    meta["experiments"]["layout"]["sha256"] = None
    (copy / "metadata.json").write_text(json.dumps(meta))
    lines = (copy / "layout.csv").read_text().splitlines(True)
    (copy / "layout.csv").write_text("".join(lines[:-3]))
    with pytest.raises(RecordedDataError, match="expected .* rows"):
        recordings.load(copy).table("layout")


@pytest.mark.parametrize("line,request_text", [(2, '"{not json"'), (-1, '"{not json"'), (4, "")])
def test_bad_request_json_names_the_row(copy, line, request_text):
    """Each distinct request is parsed once; the error names the file's line of its first row
    (an empty request too)."""
    meta = json.loads((copy / "metadata.json").read_text())
    meta["experiments"]["race"]["sha256"] = None
    (copy / "metadata.json").write_text(json.dumps(meta))
    lines = (copy / "race.csv").read_text().splitlines(True)
    line = line % len(lines)
    lines[line] = request_text + "," + lines[line].split('}",', 1)[1]
    (copy / "race.csv").write_text("".join(lines))
    with pytest.raises(RecordedDataError) as info:
        recordings.load(copy).table("race")
    assert info.value.row == line + 1 and "race.csv" in str(info.value)


@pytest.mark.parametrize(
    "breakage,message",
    [
        (lambda d: (d / "metadata.json").write_text("{"), "not valid JSON"),
        (lambda d: (d / "metadata.json").unlink(), "no metadata.json"),
        (lambda d: (d / "metadata.json").write_text(json.dumps({"schema_version": 99})), "schema version 99"),
        (lambda d: (d / "metadata.json").write_text(json.dumps({"schema_version": 1})), "lacks"),
    ],
)
def test_broken_metadata(copy, breakage, message):
    breakage(copy)
    with pytest.raises(RecordedDataError, match=message):
        recordings.load(copy)


def test_missing_csv_is_named(copy):
    (copy / "fusion.csv").unlink()
    with pytest.raises(RecordedDataError, match="file missing"):
        recordings.load(copy).table("fusion")


def test_choosing_a_recording(copy, monkeypatch):
    monkeypatch.setenv("LABKIT_RECORDING", str(copy))
    assert recordings.current().path == copy
    assert experiments.race().attrs["source"] == str(copy)
    with pytest.raises(RecordedDataError, match="available: h100-sxm"):
        recordings.use("a100-nowhere")
    with pytest.raises(labkit.InvalidSpec):
        recordings.use(42)


@pytest.mark.skipif(
    env.environment().problem is None,
    reason=(
        "a CPU machine's modes (this machine has a GPU: tests/test_classroom_gpu.py and the gpu tests "
        "check live mode)"
    ),
)
def test_modes_on_a_cpu_machine(monkeypatch):
    monkeypatch.delenv("LABKIT_MODE")
    m = env.mode()
    assert m.name == "recorded" and m.reason and not m.forced
    monkeypatch.setenv("LABKIT_MODE", "live")
    with pytest.raises(labkit.ModeError, match="cannot run live"):
        env.mode()
    monkeypatch.setenv("LABKIT_MODE", "fast")
    with pytest.raises(labkit.ModeError, match="must be one of"):
        env.mode()
    monkeypatch.setenv("LABKIT_MODE", "recorded")
    assert env.mode().forced


def test_doctor_and_record_cli_on_cpu(capsys):
    from labkit.__main__ import main

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "mode: recorded" in out and "h100-sxm: H100 SXM" in out
    assert main(["record", "--quick"]) == 2
    assert "needs a live GPU" in capsys.readouterr().err


def test_gpu_slug():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert gpu_slug("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb"


def test_every_recorded_roofline_point_is_at_or_under_its_roof():
    """A point above min(peak, bandwidth x intensity) means the byte model understates what a
    convolution must move (e.g. counting every input pixel of a 1x1 stride-2 convolution, which
    reads one in four): the roof is a bound, so no measured point may sit above it by more than
    timing noise. Every roofline request of the shipped recording, with the model labkit uses now."""
    rec = recordings.current()
    reqs = rec.requests("roofline")
    assert reqs
    above = []
    for req in reqs:
        df = experiments.roofline(**req)
        ok = df[df.status == "ok"]
        assert len(ok) and ok.peak_tflops.notna().all() and ok.bandwidth_gb_s.notna().all()
        for _, r in ok.iterrows():
            spec = dict(experiments.resnet50_shapes(req["N"]))[r["shape"]].replace(
                dtype=req["dtype"], layout=req["layout"]
            )
            assert r.min_bytes == spec.min_bytes  # the model is applied to recorded rows too
            assert r.intensity_flops_per_byte == pytest.approx(spec.flops / spec.min_bytes)
            roof = min(r.peak_tflops, r.bandwidth_gb_s * r.intensity_flops_per_byte / 1e3)
            if r.tflops > 1.05 * roof:
                above.append(f"{req} {r['shape']}: {r.tflops:.0f} TFLOP/s against a roof of {roof:.0f}")
    assert not above, "points above their roof:\n" + "\n".join(above)


def test_recorded_floats_read_back_bit_for_bit():
    """read_csv_exact's float columns hold exactly Python's float() of the text written, in every
    shipped table (pandas' own parser may land one unit in the last place away)."""
    import csv
    import io
    import math

    import numpy as np

    for path in sorted(recordings.data_dir().glob("*/*.csv")):
        text = path.read_text()
        cells = list(csv.reader(io.StringIO(text)))
        header, rows = cells[0], cells[1:]
        # in one pass (float_precision="round_trip"), and the way a pandas without it reads
        for df in (recordings.read_csv_exact(io.StringIO(text)), recordings._read_csv_twice(text)):
            for col in (c for c in df.columns if df[c].dtype == np.float64):
                j = header.index(col)
                want = [float(r[j]) if r[j] != "" else math.nan for r in rows]
                got = df[col].tolist()
                assert all((g == w) or (math.isnan(g) and math.isnan(w)) for g, w in zip(got, want)), (
                    path,
                    col,
                )


def test_a_lookups_request_and_conditions_are_read_only_and_shared_by_the_frames_made_from_it():
    """pandas copies a frame's attrs into every frame made from it (a column, a filter): the nested
    ones a lookup gives are frozen, so the copy is the same object and a change raises."""
    rec = recordings.current()
    name = "workspace_sizes"
    request = rec.requests(name)[0]
    df = rec.lookup(name, request)
    assert df.attrs["request"] == request and json.dumps(df.attrs["request"]) == json.dumps(request)
    column = df[df.columns[0]]
    assert column.attrs["request"] is df.attrs["request"]
    with pytest.raises(TypeError, match="read-only"):
        df.attrs["request"]["changed"] = 1
    nested = [v for v in df.attrs["request"].values() if isinstance(v, (dict, list))]
    assert nested, request  # the spec, as a dict
    for v in nested:
        with pytest.raises(TypeError, match="read-only"):
            v.clear()
    back = pickle.loads(pickle.dumps(df))
    assert back.attrs == df.attrs and type(back.attrs["request"]) is type(df.attrs["request"])
    assert dict(df.attrs["request"]) == request  # a copy to change is a plain dict
