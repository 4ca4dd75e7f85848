"""Tests of labkit.gpu.classic.legacy (the classic cuDNN forward-algorithm table) and of
labkit.gpu.classic.cudnn_library (finding, loading and binding the cuDNN library it uses).

CPU tests check validation, the enum/struct tables, table assembly and the library loader
without a GPU. Tests marked ``gpu`` run the real cuDNN 9 legacy API on CuPy arrays.
"""

from __future__ import annotations

import ctypes
import math

import pytest

from labkit.errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from labkit.gpu.classic import cudnn_library, legacy
from labkit.spec import ConvSpec

BASE = ConvSpec(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")


@pytest.fixture
def no_load(monkeypatch):
    """Fail the test if anything tries to load cuDNN."""

    def boom():
        raise AssertionError("the library was loaded before validation finished")

    monkeypatch.setattr(legacy, "_load_library", boom)  # algorithm_table looks it up in legacy's namespace


# ---- validation happens before any library load ----------------------------------------------
@pytest.mark.parametrize("direction", ["dgrad", "wgrad"])
def test_non_fprop_is_unsupported(no_load, direction):
    with pytest.raises(Unsupported, match="only fprop"):
        legacy.algorithm_table(BASE.replace(direction=direction))


def test_fp8_is_unsupported(no_load):
    with pytest.raises(Unsupported, match="fp8"):
        legacy.algorithm_table(BASE.replace(dtype="fp8_e4m3"))


@pytest.mark.parametrize("limit", [-1, 1 << 40, (1 << 40) + 5, 2**64, 1.5, "1GB", None, True])
def test_bad_workspace_limit(no_load, limit):
    with pytest.raises(InvalidSpec) as e:
        legacy.algorithm_table(BASE, workspace_limit_bytes=limit)
    assert e.value.field == "workspace_limit_bytes"


@pytest.mark.parametrize("limit", [0, 1, (1 << 40) - 1])
def test_workspace_limit_edges_pass_validation(no_load, limit):
    with pytest.raises(AssertionError, match="loaded"):  # got past validation, to the (patched) loader
        legacy.algorithm_table(BASE, workspace_limit_bytes=limit)


def test_not_a_spec(no_load):
    with pytest.raises(InvalidSpec) as e:
        legacy.algorithm_table({"N": 1})
    assert e.value.field == "spec"


def test_find_must_be_bool(no_load):
    with pytest.raises(InvalidSpec) as e:
        legacy.algorithm_table(BASE, find=1)
    assert e.value.field == "find"


def test_errors_are_labkit_errors():
    assert issubclass(Unsupported, LabkitError) and issubclass(InvalidSpec, LabkitError)


class FakeDeviceArray:
    """Just enough of a CuPy array: a __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f2", strides=None, ptr=1 << 20, read_only=False):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "strides": strides,
            "data": (ptr, read_only),
            "version": 3,
        }


def test_storage_shapes():
    s = BASE.replace(C=64, K=32, groups=4, H=20, W=30, stride=2)
    nhwc = legacy.storage_shapes(s)
    assert nhwc == {"x": (32, 20, 30, 64), "w": (32, 3, 3, 16), "y": (32, 10, 15, 32)}
    nchw = legacy.storage_shapes(s.replace(layout="NCHW"))
    assert nchw == {"x": (32, 64, 20, 30), "w": (32, 16, 3, 3), "y": (32, 32, 10, 15)}


@pytest.mark.parametrize(
    "name, arr, field_value",
    [
        ("x", FakeDeviceArray((32, 64, 56, 56)), (32, 64, 56, 56)),  # NCHW shape for an NHWC spec
        ("w", FakeDeviceArray((64, 3, 3, 64), typestr="<f4"), "<f4"),  # fp32 for fp16
        ("y", FakeDeviceArray((32, 56, 56, 64), strides=(2, 2, 2, 2)), (2, 2, 2, 2)),  # not contiguous
        ("y", FakeDeviceArray((32, 56, 56, 64), read_only=True), "read-only"),
        ("x", FakeDeviceArray((32, 56, 56, 64), ptr=0), 0),
        ("x", FakeDeviceArray((32, 56, 56, 64), ptr=(1 << 20) + 1), hex((1 << 20) + 1)),
        ("x", [[1.0]], "list"),
    ],
)
def test_bad_arrays_rejected_before_load(no_load, name, arr, field_value):
    with pytest.raises(InvalidSpec) as e:
        legacy.algorithm_table(BASE, **{name: arr})
    assert e.value.field == name
    assert e.value.value == field_value


def test_good_fake_arrays_pass_validation(no_load):
    shapes = legacy.storage_shapes(BASE)
    arrays = {k: FakeDeviceArray(v, strides=None) for k, v in shapes.items()}
    arrays["y"] = FakeDeviceArray(shapes["y"], strides=legacy._c_strides(shapes["y"], 2))
    with pytest.raises(AssertionError, match="loaded"):
        legacy.algorithm_table(BASE, **arrays)


@pytest.mark.parametrize(
    "typestr, ok", [("<u2", True), ("<i2", True), ("<V2", True), ("<f2", False), ("<f4", False)]
)
def test_bf16_storage_typestrs(typestr, ok):
    spec = BASE.replace(dtype="bf16")
    shape = legacy.storage_shapes(spec)["x"]
    arr = FakeDeviceArray(shape, typestr=typestr)
    if ok:
        assert legacy._check_array("x", arr, shape, "bf16", writable=False) == 1 << 20
    else:
        with pytest.raises(InvalidSpec):
            legacy._check_array("x", arr, shape, "bf16", writable=False)


# ---- enum / name tables ---------------------------------------------------------------------------
def test_fwd_algo_table_matches_header_order():
    assert cudnn_library.FWD_ALGOS == (
        "IMPLICIT_GEMM",
        "IMPLICIT_PRECOMP_GEMM",
        "GEMM",
        "DIRECT",
        "FFT",
        "FFT_TILING",
        "WINOGRAD",
        "WINOGRAD_NONFUSED",
    )
    assert cudnn_library.CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8
    assert all(cudnn_library.FWD_ALGO_IDS[n] == i for i, n in enumerate(cudnn_library.FWD_ALGOS))


def test_enum_values():
    lib = cudnn_library
    assert (lib.CUDNN_DATA_FLOAT, lib.CUDNN_DATA_HALF, lib.CUDNN_DATA_BFLOAT16) == (0, 2, 9)
    assert (cudnn_library.CUDNN_TENSOR_NCHW, cudnn_library.CUDNN_TENSOR_NHWC) == (0, 1)
    assert (cudnn_library.CUDNN_CONVOLUTION, cudnn_library.CUDNN_CROSS_CORRELATION) == (0, 1)
    assert (
        cudnn_library.CUDNN_DEFAULT_MATH,
        cudnn_library.CUDNN_TENSOR_OP_MATH,
        cudnn_library.CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
        cudnn_library.CUDNN_FMA_MATH,
    ) == (0, 1, 2, 3)
    assert (cudnn_library.CUDNN_NON_DETERMINISTIC, cudnn_library.CUDNN_DETERMINISTIC) == (0, 1)
    assert set(cudnn_library.MATH_NAMES) == {0, 1, 2, 3}


def test_dtype_plan():
    F, H, B = cudnn_library.CUDNN_DATA_FLOAT, cudnn_library.CUDNN_DATA_HALF, cudnn_library.CUDNN_DATA_BFLOAT16
    assert legacy.DTYPE_PLAN == {
        "fp32": (F, F, cudnn_library.CUDNN_FMA_MATH),  # TF32 off
        "tf32": (F, F, cudnn_library.CUDNN_TENSOR_OP_MATH),  # TF32 allowed, and reported as "tensor op"
        "fp16": (H, F, cudnn_library.CUDNN_TENSOR_OP_MATH),
        "bf16": (B, F, cudnn_library.CUDNN_TENSOR_OP_MATH),
    }
    assert "fp8_e4m3" not in legacy.DTYPE_PLAN


def test_status_names():
    names = cudnn_library.STATUS_NAMES
    assert names[0] == "CUDNN_STATUS_SUCCESS"
    assert names[2000] == "CUDNN_STATUS_BAD_PARAM"
    assert names[3000] == "CUDNN_STATUS_NOT_SUPPORTED"
    assert names[4000] == "CUDNN_STATUS_INTERNAL_ERROR"
    assert names[5000] == "CUDNN_STATUS_EXECUTION_FAILED"
    for code, name in names.items():  # the cuDNN 9 numbering: category * 1000 + specific
        assert name.startswith("CUDNN_STATUS_")
        if code:
            family = {1: "", 2: "BAD_PARAM", 3: "NOT_SUPPORTED", 4: "INTERNAL_ERROR", 5: "EXECUTION_FAILED"}[
                code // 1000
            ]
            assert family in name or code == 2001, (code, name)
    assert cudnn_library.status_name(0) == "ok"
    assert cudnn_library.status_name(3004) == "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT"
    assert cudnn_library.status_name(3999) == "CUDNN_STATUS_3999"


def test_error_mapping():
    label = BASE.label
    assert isinstance(cudnn_library._error_for(3000, "f", "t", label), Unsupported)
    assert isinstance(cudnn_library._error_for(3007, "f", "t", label), Unsupported)
    oom = cudnn_library._error_for(4004, "f", "t", label, requested_bytes=123, free_bytes=7)
    assert isinstance(oom, OutOfMemory) and oom.requested_bytes == 123 and oom.free_bytes == 7
    assert isinstance(cudnn_library._error_for(4003, "f", "t", label), OutOfMemory)
    bad = cudnn_library._error_for(2002, "cudnnX", "null pointer", label)
    assert isinstance(bad, InvalidSpec) and "CUDNN_STATUS_BAD_PARAM_NULL_POINTER" in str(bad)
    for code in (1001, 4000, 4001, 5000, 77):
        err = cudnn_library._error_for(code, "f", "t", label)
        assert type(err) is LabkitError
    assert "cudnnFoo" in str(cudnn_library._error_for(5000, "cudnnFoo", "text", label))


# ---- the ctypes struct ------------------------------------------------------------------------------
def test_perf_struct_layout():
    P = cudnn_library.ConvolutionFwdAlgoPerf
    assert [f[0] for f in P._fields_] == [
        "algo",
        "status",
        "time",
        "memory",
        "determinism",
        "mathType",
        "reserved",
    ]
    assert [f[1] for f in P._fields_[:6]] == [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_float,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
    ]
    assert P.reserved.size == 3 * ctypes.sizeof(ctypes.c_int)
    if ctypes.sizeof(ctypes.c_size_t) == 8 and ctypes.sizeof(ctypes.c_int) == 4:  # x86-64 / aarch64 Linux
        # 4 algo + 4 status + 4 time + 4 padding + 8 memory + 4 determinism + 4 mathType + 12 reserved
        assert (
            P.algo.offset,
            P.status.offset,
            P.time.offset,
            P.memory.offset,
            P.determinism.offset,
            P.mathType.offset,
            P.reserved.offset,
        ) == (0, 4, 8, 16, 24, 28, 32)
        assert ctypes.sizeof(P) == 48


def test_perf_struct_array_round_trip():
    arr = (cudnn_library.ConvolutionFwdAlgoPerf * 2)()
    arr[1].algo, arr[1].status, arr[1].time, arr[1].memory = 7, 0, 0.25, (1 << 33) + 5
    arr[1].determinism, arr[1].mathType = 1, 1
    raw = bytes(memoryview(arr).cast("B"))
    assert len(raw) == 2 * ctypes.sizeof(cudnn_library.ConvolutionFwdAlgoPerf)
    assert legacy._perf_tuple(arr[1]) == (7, 0, 0.25, (1 << 33) + 5, 1, 1)


def test_signatures_declared_for_every_call():
    src = (
        open(legacy.__file__).read() + open(cudnn_library.__file__).read()
    )  # the table's calls and the loader's
    import re

    called = set(re.findall(r"lib\.(cudnn\w+)", src))
    declared = set(cudnn_library._SIGNATURES) | set(cudnn_library._OPTIONAL_SIGNATURES)
    assert called <= declared, called - declared
    for name, (restype, argtypes) in cudnn_library._SIGNATURES.items():
        assert isinstance(argtypes, list)
        if name not in ("cudnnGetVersion", "cudnnGetErrorString"):
            assert restype is ctypes.c_int, name  # cudnnStatus_t
    # filter: (desc, dataType, format, k, c, h, w) -- 7 args; conv 2d: 9 args; FindEx: 13 args
    assert len(cudnn_library._SIGNATURES["cudnnSetFilter4dDescriptor"][1]) == 7
    assert len(cudnn_library._SIGNATURES["cudnnSetConvolution2dDescriptor"][1]) == 9
    assert len(cudnn_library._SIGNATURES["cudnnFindConvolutionForwardAlgorithmEx"][1]) == 13
    assert len(cudnn_library._SIGNATURES["cudnnGetConvolutionForwardWorkspaceSize"][1]) == 7


# ---- table assembly ---------------------------------------------------------------------------------
def _query_all(ok_sizes):
    return {a: ((0, ok_sizes[a]) if a in ok_sizes else (3000, 0)) for a in range(8)}


def test_assemble_query_only():
    df = legacy._assemble(_query_all({0: 0, 1: 387}), None)
    assert list(df.columns) == ["algo_id", "algorithm", "query_status", "query_workspace_bytes"]
    assert list(df.algorithm) == list(legacy.FWD_ALGOS)
    assert df.query_status.tolist()[:3] == ["ok", "ok", "CUDNN_STATUS_NOT_SUPPORTED"]
    assert df.query_workspace_bytes.iloc[1] == 387 and df.query_workspace_bytes.isna().sum() == 6


def test_assemble_find_picks_first_ok_entry_and_reports_not_returned():
    found = [
        (1, 0, 0.092, 387, 1, 1),  # rank 0
        (0, 0, 0.660, 0, 1, 0),  # rank 1
        (1, 0, 0.300, 387, 1, 0),  # same algo, other math: ignored (slower, later)
        (4, 3000, -1.0, 0, 0, 0),  # not supported
        (5, 4003, -1.0, 0, 0, 0),  # needs more workspace than given
        (3, 3000, -1.0, 0, 0, 0),
        (3, 0, 1.5, 0, 0, 3),  # an ok entry after a failed one for the same algo wins
    ]
    df = legacy._assemble(_query_all({0: 0, 1: 387}), found).set_index("algorithm")
    assert df.loc["IMPLICIT_PRECOMP_GEMM", "find_status"] == "ok"
    assert df.loc["IMPLICIT_PRECOMP_GEMM", "find_rank"] == 0
    assert math.isclose(df.loc["IMPLICIT_PRECOMP_GEMM", "time_us"], 92.0, rel_tol=1e-6)
    assert df.loc["IMPLICIT_PRECOMP_GEMM", "math"] == "tensor op"
    assert bool(df.loc["IMPLICIT_PRECOMP_GEMM", "deterministic"]) is True
    assert (
        df.loc["IMPLICIT_GEMM", "math"] == "default" and df.loc["IMPLICIT_GEMM", "find_workspace_bytes"] == 0
    )
    assert df.loc["FFT", "find_status"] == "CUDNN_STATUS_NOT_SUPPORTED"
    assert df.loc["FFT_TILING", "find_status"] == "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"
    for col in ("time_us", "find_workspace_bytes", "math", "deterministic"):
        assert df.loc["FFT", col] is legacy_na()
    assert df.loc["DIRECT", "find_status"] == "ok" and df.loc["DIRECT", "math"] == "fma"
    assert df.loc["DIRECT", "find_rank"] == 6
    assert (
        df.loc["GEMM", "find_status"] == "not returned"
        and df.loc["WINOGRAD", "find_status"] == "not returned"
    )
    assert str(df.time_us.dtype) == "Float64" and str(df.find_workspace_bytes.dtype) == "Int64"
    assert str(df.deterministic.dtype) == "boolean"


def test_assemble_shows_an_algorithms_entry_of_the_math_asked_for():
    """Find may list an algorithm under two math types in either order (the H200 did, one Find to
    the next): the row is the entry of the convolution's math, whatever its rank."""
    found = [
        (1, 0, 0.1296, 387, 1, 0),  # IMPLICIT_PRECOMP_GEMM, default math, ranked first this time
        (1, 0, 0.1302, 387, 1, 1),  # the same under tensor-op math
        (0, 0, 0.3878, 0, 1, 0),  # IMPLICIT_GEMM: default math only
    ]
    tensor_op = legacy._assemble(_query_all({0: 0, 1: 387}), found, math_type=1).set_index("algorithm")
    assert tensor_op.loc["IMPLICIT_PRECOMP_GEMM", "math"] == "tensor op"
    assert tensor_op.loc["IMPLICIT_PRECOMP_GEMM", "find_rank"] == 1
    assert math.isclose(tensor_op.loc["IMPLICIT_PRECOMP_GEMM", "time_us"], 130.2, rel_tol=1e-6)
    assert tensor_op.loc["IMPLICIT_GEMM", "math"] == "default"  # no entry of the math asked for
    unasked = legacy._assemble(_query_all({0: 0, 1: 387}), found).set_index("algorithm")
    assert unasked.loc["IMPLICIT_PRECOMP_GEMM", "math"] == "default"  # the first ok entry


def legacy_na():
    import pandas as pd

    return pd.NA


def test_assemble_find_failed_as_a_whole():
    df = legacy._assemble(_query_all({0: 0}), None, find_failed="CUDNN_STATUS_NOT_SUPPORTED")
    assert (df.find_status == "CUDNN_STATUS_NOT_SUPPORTED").all()
    assert df.time_us.isna().all()


def test_assemble_accepts_structs():
    p = legacy.ConvolutionFwdAlgoPerf()
    p.algo, p.status, p.time, p.memory, p.determinism, p.mathType = 7, 0, 0.21, 116_200_000, 0, 1
    df = legacy._assemble(_query_all({7: 116_200_000}), [p]).set_index("algorithm")
    assert df.loc["WINOGRAD_NONFUSED", "find_workspace_bytes"] == 116_200_000
    assert bool(df.loc["WINOGRAD_NONFUSED", "deterministic"]) is False


# ---- library loading -----------------------------------------------------------------------------------
@pytest.fixture
def fresh_loader(monkeypatch):
    monkeypatch.setattr(cudnn_library, "_lib", None)
    monkeypatch.setattr(cudnn_library, "_lib_path", None)
    return monkeypatch


def test_no_cudnn_gives_clear_unsupported(fresh_loader, tmp_path):
    fresh_loader.setattr(cudnn_library, "_mapped_cudnn_paths", lambda: [])
    fresh_loader.setattr(cudnn_library, "_load_frontend", lambda: None)
    fresh_loader.setattr(cudnn_library, "_site_dirs", lambda: [str(tmp_path)])
    fresh_loader.setattr(cudnn_library, "_SONAMES", ("libcudnn_labkit_test_absent.so.9",))
    with pytest.raises(Unsupported) as e:
        cudnn_library.cudnn_version()
    assert e.value.what == "legacy cuDNN API"
    for part in (
        "libcudnn.so.9",
        "already loaded: none found",
        "nvidia wheel: none found",
        "libcudnn_labkit_test_absent.so.9",
    ):
        assert part in e.value.reason
    assert cudnn_library._lib is None  # a failure is not cached


def test_broken_wheel_file_is_reported(fresh_loader, tmp_path):
    lib_dir = tmp_path / "nvidia" / "cudnn" / "lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libcudnn.so.9").write_bytes(b"not an ELF file")
    fresh_loader.setattr(cudnn_library, "_mapped_cudnn_paths", lambda: [])
    fresh_loader.setattr(cudnn_library, "_load_frontend", lambda: None)
    fresh_loader.setattr(cudnn_library, "_site_dirs", lambda: [str(tmp_path)])
    fresh_loader.setattr(cudnn_library, "_SONAMES", ())
    with pytest.raises(Unsupported) as e:
        cudnn_library.library_path()
    assert str(lib_dir / "libcudnn.so.9") in e.value.reason


def test_wheel_candidates_prefer_cudnn_dir(fresh_loader, tmp_path):
    for sub in ("cu13", "cudnn"):
        d = tmp_path / "nvidia" / sub / "lib"
        d.mkdir(parents=True)
        (d / "libcudnn.so.9").write_bytes(b"")
    fresh_loader.setattr(cudnn_library, "_site_dirs", lambda: [str(tmp_path)])
    got = cudnn_library._wheel_candidates()
    assert got == [
        str(tmp_path / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"),
        str(tmp_path / "nvidia" / "cu13" / "lib" / "libcudnn.so.9"),
    ]


def test_wrong_library_is_refused(fresh_loader):
    # libc is a real shared object without cuDNN's symbols
    import ctypes.util

    libc = ctypes.util.find_library("c") or "libc.so.6"
    fresh_loader.setattr(cudnn_library, "_mapped_cudnn_paths", lambda: [])
    fresh_loader.setattr(cudnn_library, "_load_frontend", lambda: None)
    fresh_loader.setattr(cudnn_library, "_site_dirs", lambda: [])
    fresh_loader.setattr(cudnn_library, "_SONAMES", (libc,))
    with pytest.raises(Unsupported, match="lacks cudnnGetVersion"):
        cudnn_library.cudnn_version()


def test_legacy_reexports_the_library_api():
    for name in ("cudnn_version", "library_path", "FWD_ALGOS", "ConvolutionFwdAlgoPerf"):
        assert name in legacy.__all__ and getattr(legacy, name) is getattr(cudnn_library, name)


def test_shim_name_pattern():
    m = cudnn_library._SHIM_RE.match
    assert m("libcudnn.so.9") and m("libcudnn.so.9.19.0") and m("libcudnn.so")
    assert not m("libcudnn_cnn.so.9") and not m("libcudnn_graph.so.9.14.0") and not m("libcudnn.so.8")


def test_mapped_paths_parse_proc_maps(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 11 /opt/x/nvidia/cudnn/lib/libcudnn.so.9\n"
        "7f01-7f02 r--p 00000000 08:01 11 /opt/x/nvidia/cudnn/lib/libcudnn.so.9\n"
        "7f02-7f03 r-xp 00000000 08:01 12 /opt/x/nvidia/cudnn/lib/libcudnn_graph.so.9\n"
        "7f03-7f04 r-xp 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0\n"
        "7f04-7f05 rw-p 00000000 00:00 0 \n"
        "7f05-7f06 r-xp 00000000 08:01 14 /tmp/old/libcudnn.so.9 (deleted)\n"
    )
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda p, *a, **k: real_open(maps if p == "/proc/self/maps" else p, *a, **k)
    )
    assert cudnn_library._mapped_cudnn_paths() == [
        "/opt/x/nvidia/cudnn/lib/libcudnn.so.9",
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0",
    ]


# ---- GPU: the real legacy API --------------------------------------------------------------------------
SMALL = ConvSpec(N=8, C=32, H=28, W=28, K=32, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
LIMIT = 1 << 30


def _check_table(df, limit):
    assert list(df.algorithm) == list(legacy.FWD_ALGOS)
    assert len(df) == 8
    ok = df[df.find_status == "ok"]
    for _, row in ok.iterrows():
        assert math.isfinite(row.time_us) and row.time_us > 0, row
        assert 0 <= row.find_workspace_bytes <= limit, row
        assert row.math in cudnn_library.MATH_NAMES.values()
    assert df[df.find_status != "ok"].time_us.isna().all()
    q_ok = df[df.query_status == "ok"]
    assert (q_ok.query_workspace_bytes >= 0).all()
    assert df[df.query_status != "ok"].query_workspace_bytes.isna().all()
    return ok


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_gpu_fp16_table(layout):
    pytest.importorskip("cupy")
    spec = BASE.replace(layout=layout)
    df = legacy.algorithm_table(spec, workspace_limit_bytes=LIMIT)
    print(f"\n{spec.label} (cuDNN {df.attrs['cudnn_version']}, {df.attrs['gpu']})\n{df.to_string()}")
    ok = _check_table(df, LIMIT).set_index("algorithm")
    by = df.set_index("algorithm")
    assert (
        by.loc["IMPLICIT_GEMM", "query_status"] == "ok"
        and by.loc["IMPLICIT_GEMM", "query_workspace_bytes"] == 0
    )
    assert "IMPLICIT_GEMM" in ok.index and ok.loc["IMPLICIT_GEMM", "find_workspace_bytes"] == 0
    if layout == "NCHW":
        assert len(ok) >= 4, df
        assert (ok.find_workspace_bytes > 0).any(), df
    else:
        for name in ("FFT", "FFT_TILING"):  # not supported for NHWC (H100, cuDNN 9.19)
            assert by.loc[name, "find_status"] != "ok", df
    assert df.attrs["cudnn_version"] // 10000 == 9
    assert df.attrs["find_workspace_bytes_given"] <= LIMIT
    assert df.attrs["math_type_requested"] == "tensor op"


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [0, 1024])
def test_gpu_tiny_workspace_limit(limit):
    pytest.importorskip("cupy")
    df = legacy.algorithm_table(BASE.replace(layout="NCHW"), workspace_limit_bytes=limit)
    print(f"\nlimit {limit}\n{df.to_string()}")
    ok = _check_table(df, limit)
    assert "IMPLICIT_GEMM" in set(ok.algorithm)
    assert df.attrs["find_workspace_bytes_given"] <= limit
    # algorithms that need more than the limit did not run (or, at most, ran within it)
    needs_more = df[df.query_workspace_bytes.fillna(0) > limit]
    assert ((needs_more.find_status != "ok") | (needs_more.find_workspace_bytes <= limit)).all()


@pytest.mark.gpu
def test_gpu_query_only():
    pytest.importorskip("cupy")
    df = legacy.algorithm_table(SMALL, find=False)
    assert list(df.columns) == ["algo_id", "algorithm", "query_status", "query_workspace_bytes"]
    assert df.set_index("algorithm").loc["IMPLICIT_GEMM", "query_status"] == "ok"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "changes",
    [
        dict(dtype="fp32", layout="NCHW"),
        dict(dtype="fp32", layout="NHWC"),
        dict(dtype="tf32", layout="NCHW"),
        dict(dtype="bf16", layout="NHWC"),
        dict(dtype="bf16", layout="NCHW"),
        dict(groups=4, layout="NHWC"),
        dict(groups=4, layout="NCHW"),
        dict(dilation=2, padding=2, layout="NCHW"),
        dict(dilation=2, padding=2, layout="NHWC"),
        dict(stride=2, R=1, S=1, padding=0, layout="NHWC"),
        dict(N=1, C=3, H=17, W=23, K=5, R=5, S=3, stride=(2, 1), padding=(2, 1), layout="NCHW"),
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_gpu_other_specs_do_not_crash(changes):
    pytest.importorskip("cupy")
    spec = SMALL.replace(**changes)
    df = legacy.algorithm_table(spec, workspace_limit_bytes=256 << 20)
    print(f"\n{spec.label}\n{df.to_string()}")
    _check_table(df, 256 << 20)
    expected_math = {"fp32": "fma"}.get(spec.dtype, "tensor op")
    assert df.attrs["math_type_requested"] == expected_math
    if spec.dtype == "fp32":  # TF32 off: nothing may report tensor-op math
        assert not df.math.isin(["tensor op", "tensor op (allow conversion)"]).any(), df


@pytest.mark.gpu
def test_gpu_tf32_uses_tensor_cores_and_fp32_does_not():
    cp = pytest.importorskip("cupy")
    if int(cp.cuda.Device().compute_capability) < 80:
        pytest.skip("TF32 needs compute capability 8.0+")
    spec = ConvSpec(N=8, C=256, H=28, W=28, K=256, R=3, S=3, padding=1, dtype="tf32", layout="NCHW")
    tf32 = legacy.algorithm_table(spec, workspace_limit_bytes=256 << 20)
    fp32 = legacy.algorithm_table(spec.replace(dtype="fp32"), workspace_limit_bytes=256 << 20)
    print(f"\n{spec.label}\n{tf32.to_string()}\n{fp32.to_string()}")
    assert (tf32.math == "tensor op").any(), tf32
    assert not fp32.math.isin(["tensor op", "tensor op (allow conversion)"]).any(), fp32
    # same algorithm, TF32 vs FMA kernels (H100, 32x256x28x28: 199 vs 1017 us); Find times one run
    t_tf32, t_fp32 = (t.set_index("algorithm").loc["IMPLICIT_PRECOMP_GEMM", "time_us"] for t in (tf32, fp32))
    assert t_tf32 < t_fp32, (t_tf32, t_fp32)


@pytest.mark.gpu
def test_gpu_caller_arrays_are_used_and_checked():
    cp = pytest.importorskip("cupy")
    shapes = legacy.storage_shapes(SMALL)
    x = cp.ones(shapes["x"], dtype=cp.float16)
    w = cp.ones(shapes["w"], dtype=cp.float16)
    y = cp.zeros(shapes["y"], dtype=cp.float16)
    df = legacy.algorithm_table(SMALL, x=x, w=w, y=y)
    assert (df.find_status == "ok").any()
    # cuDNN documents y as overwritten with arbitrary values by Find; the inputs must be untouched
    assert bool((x == 1).all()) and bool((w == 1).all())
    print("y[0, 5, 5, 0] after Find:", float(y[0, 5, 5, 0]), "(288 if the last algorithm left its result)")
    with pytest.raises(InvalidSpec):
        legacy.algorithm_table(SMALL, x=x.astype(cp.float32))
    with pytest.raises(InvalidSpec):
        legacy.algorithm_table(SMALL, y=cp.zeros(shapes["y"][::-1], dtype=cp.float16))


@pytest.mark.gpu
def test_gpu_version_matches_frontend():
    pytest.importorskip("cupy")
    v = cudnn_library.cudnn_version()
    assert v // 10000 == 9
    assert "libcudnn" in cudnn_library.library_path()
    cudnn = pytest.importorskip("cudnn")
    assert cudnn.backend_version() == v  # one cuDNN in the process, not two


@pytest.mark.gpu
def test_gpu_no_leak_of_handles_or_memory():
    cp = pytest.importorskip("cupy")
    legacy.algorithm_table(SMALL, workspace_limit_bytes=64 << 20)  # warm up cuDNN's own state
    cp.get_default_memory_pool().free_all_blocks()
    free0 = cp.cuda.runtime.memGetInfo()[0]
    for _ in range(5):
        legacy.algorithm_table(SMALL, workspace_limit_bytes=64 << 20)
    cp.get_default_memory_pool().free_all_blocks()
    free1 = cp.cuda.runtime.memGetInfo()[0]
    assert free0 - free1 < 32 << 20, (free0, free1)
