"""ConvSpec: output sizes, FLOPs, bytes and keys against hand-computed cases, and fuzzing of
validation (anything invalid raises InvalidSpec naming the field; anything valid constructs)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labkit
from labkit import ConvSpec, InvalidSpec
from labkit.spec import DIRECTIONS, DTYPES, LAYOUTS, MAX_DIM, MAX_ELEMENTS

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- output sizes -------------------------------------------------------------------------------
# P = floor((H + 2*pad - dil*(R-1) - 1) / stride) + 1, worked by hand in each comment.
@pytest.mark.parametrize(
    "kw, P, Q",
    [
        # 3x3 s1 p1 on 56: (56 + 2 - 2 - 1)/1 + 1 = 56
        (dict(H=56, W=56, R=3, S=3, stride=1, padding=1), 56, 56),
        # 3x3 s2 p1 on 56: floor(55/2) + 1 = 28; on 57: floor(56/2) + 1 = 29
        (dict(H=56, W=57, R=3, S=3, stride=2, padding=1), 28, 29),
        # ResNet stem, 7x7 s2 p3 on 224: floor((224 + 6 - 6 - 1)/2) + 1 = 111 + 1 = 112
        (dict(C=3, H=224, W=224, R=7, S=7, stride=2, padding=3), 112, 112),
        # 1x1 s2 p0 downsample on 56: floor(55/2) + 1 = 28
        (dict(C=256, K=512, H=56, W=56, R=1, S=1, stride=2, padding=0), 28, 28),
        # 3x3 dilation 2, pad 2 keeps 32: 32 + 4 - 4 - 1 + 1 = 32; no pad: 32 - 4 - 1 + 1 = 28
        (dict(H=32, W=32, R=3, S=3, dilation=2, padding=(2, 0)), 32, 28),
        # dilation 2 with stride 2 on 33, pad 2: floor((33 + 4 - 4 - 1)/2) + 1 = 17
        (dict(H=33, W=33, R=3, S=3, dilation=2, stride=2, padding=2), 17, 17),
        # (h, w) pairs: 3x5 filter, padding (1, 2), stride (1, 2) on 10x20:
        #   P = 10 + 2 - 2 - 1 + 1 = 10;  Q = floor((20 + 4 - 4 - 1)/2) + 1 = 9 + 1 = 10
        (dict(H=10, W=20, R=3, S=5, stride=(1, 2), padding=(1, 2)), 10, 10),
        # padding (0, 2) on a 5x5 filter over 16x16: P = 16 - 4 - 1 + 1 = 12; Q = 16 + 4 - 4 = 16
        (dict(H=16, W=16, R=5, S=5, padding=(0, 2)), 12, 16),
        # dilation (2, 3): 3x3 on 20x20, padding 0: P = 20 - 4 - 1 + 1 = 16; Q = 20 - 6 - 1 + 1 = 14
        (dict(H=20, W=20, R=3, S=3, dilation=(2, 3), padding=0), 16, 14),
        # the filter exactly covers the image: 1x1 output
        (dict(H=7, W=7, R=7, S=7, padding=0), 1, 1),
    ],
)
def test_output_size(kw, P, Q):
    s = ConvSpec(**kw)
    assert (s.P, s.Q) == (P, Q)
    assert s.y_shape == (s.N, s.K, P, Q)


def test_pairs_are_normalised():
    s = ConvSpec(stride=2, padding=[1, 0], dilation=(1, 1))
    assert (s.stride, s.padding, s.dilation) == ((2, 2), (1, 0), (1, 1))
    assert ConvSpec(stride=2) == ConvSpec(stride=(2, 2)) == ConvSpec(stride=[2, 2])


def test_choices_are_normalised():
    s = ConvSpec(dtype="FP16", layout="nhwc", direction="FPROP")
    assert (s.dtype, s.layout, s.direction) == ("fp16", "NHWC", "fprop")
    assert s == ConvSpec()


# ---- shapes and FLOPs ---------------------------------------------------------------------------
def test_default_spec_numbers():
    # N=1 C=64 56x56 -> K=64 3x3 s1 p1, fp16 NHWC fprop
    s = ConvSpec()
    assert (s.P, s.Q) == (56, 56)
    assert s.x_shape == (1, 64, 56, 56) and s.w_shape == (64, 64, 3, 3) and s.y_shape == (1, 64, 56, 56)
    # 2 * 1 * 64 * 56 * 56 * 64 * 3 * 3 = 2 * 64 * 3136 * 576 = 231,211,008
    assert s.flops == 231_211_008
    # X: 64*56*56 = 200,704 elements * 2 B = 401,408; W: 64*64*9 = 36,864 * 2 = 73,728; Y as X
    assert s.tensor_bytes == {"x": 401_408, "w": 73_728, "y": 401_408}
    assert s.min_bytes == 876_544
    assert s.arithmetic_intensity == pytest.approx(231_211_008 / 876_544)
    assert s.arithmetic_intensity == pytest.approx(263.78, abs=0.01)


def test_resnet_stem_numbers():
    s = ConvSpec(N=1, C=3, H=224, W=224, K=64, R=7, S=7, stride=2, padding=3, dtype="fp32", layout="NCHW")
    # 2 * 64 * 112 * 112 * 3 * 49 = 128 * 12,544 * 147 = 236,027,904
    assert s.flops == 236_027_904
    # X: 3*224*224 = 150,528 * 4 = 602,112; W: 64*3*49 = 9,408 * 4 = 37,632;
    # Y: 64*112*112 = 802,816 * 4 = 3,211,264
    assert s.tensor_bytes == {"x": 602_112, "w": 37_632, "y": 3_211_264}
    assert s.min_bytes == 602_112 + 37_632 + 3_211_264


def test_downsample_1x1_stride2_numbers():
    s = ConvSpec(N=8, C=256, H=56, W=56, K=512, R=1, S=1, stride=2, padding=0)
    # 2 * 8 * 512 * 28 * 28 * 256 * 1 * 1 = 16 * 512 * 784 * 256 = 1,644,167,168
    assert s.flops == 1_644_167_168
    assert s.w_shape == (512, 256, 1, 1)


def test_grouped_numbers():
    s = ConvSpec(N=2, C=64, H=28, W=28, K=128, R=3, S=3, groups=4)
    assert s.w_shape == (128, 16, 3, 3)
    # each output sums over C/groups = 16 channels: 2 * 2 * 128 * 28 * 28 * 16 * 9
    assert s.flops == 2 * 2 * 128 * 784 * 16 * 9 == 57_802_752
    assert s.flops * 4 == ConvSpec(N=2, C=64, H=28, W=28, K=128).flops


def test_depthwise_numbers():
    s = ConvSpec(N=1, C=32, H=28, W=28, K=32, R=3, S=3, groups=32)
    assert s.w_shape == (32, 1, 3, 3)
    # 2 * 32 * 28 * 28 * 1 * 9 = 451,584
    assert s.flops == 451_584
    # fp16: X and Y 32*784*2 = 50,176 B each; W 32*9*2 = 576 B
    assert s.tensor_bytes == {"x": 50_176, "w": 576, "y": 50_176}
    assert s.arithmetic_intensity == pytest.approx(451_584 / 100_928)


def _touched_brute(size, out, taps, stride, pad, dil):
    """Input positions some window covers, by listing every (output, tap) pair."""
    return len({o * stride + t * dil - pad for o in range(out) for t in range(taps)} & set(range(size)))


@pytest.mark.parametrize(
    "kw, rows_cols",
    [
        (dict(), (56, 56)),  # 3x3 s1 p1: every pixel
        (dict(H=56, W=56, R=1, S=1, stride=2, padding=0), (28, 28)),  # 1x1/2: one pixel in four
        (dict(H=57, W=57, R=1, S=1, stride=2, padding=0), (29, 29)),  # odd size: rows 0, 2, .., 56
        (dict(H=224, W=224, R=7, S=7, stride=2, padding=3), (224, 224)),  # the stem: windows overlap
        (dict(H=10, W=10, R=3, S=3, stride=4, padding=0), (6, 6)),  # windows 0-2, 4-6; 3, 7-9 unread
        (dict(H=8, W=8, R=2, S=2, stride=3, padding=0, dilation=1), (6, 6)),  # windows 0-1, 3-4, 6-7
        (
            dict(H=12, W=12, R=3, S=3, stride=1, padding=0, dilation=4),
            (12, 12),
        ),  # dilated 0,4,8 .. 3,7,11: all
    ],
)
def test_touched_input_rows_and_columns(kw, rows_cols):
    s = ConvSpec(**kw)
    assert s.x_touched == rows_cols
    assert s.x_touched == (
        _touched_brute(s.H, s.P, s.R, s.stride[0], s.padding[0], s.dilation[0]),
        _touched_brute(s.W, s.Q, s.S, s.stride[1], s.padding[1], s.dilation[1]),
    )


def test_byte_model_counts_only_the_pixels_a_1x1_stride2_reads():
    # ResNet-50's downsample: fp16 N=32 C=256 56x56 -> K=512 1x1/2. Of X (51,380,224 B) only
    # rows and columns 0, 2, .., 54 are read: 32*256*28*28*2 = 12,845,056 B
    s = ConvSpec(N=32, C=256, H=56, W=56, K=512, R=1, S=1, stride=2, padding=0)
    assert s.tensor_bytes["x"] == 51_380_224
    assert s.touched_bytes == {"x": 12_845_056, "w": 262_144, "y": 25_690_112}
    assert s.min_bytes == 12_845_056 + 262_144 + 25_690_112
    assert s.arithmetic_intensity == pytest.approx(s.flops / s.min_bytes)
    # dgrad writes the whole of dX (zeros where no window reaches)
    assert s.replace(direction="dgrad").touched_bytes["x"] == 51_380_224
    # a border no window reaches: 3x3 s1 p0 on 10x10 still covers every pixel; 2x2 s3 on 8x8 misses two
    assert (
        ConvSpec(N=1, C=8, H=8, W=8, K=8, R=2, S=2, stride=3, padding=0).touched_bytes["x"] == 8 * 6 * 6 * 2
    )


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_flops_do_not_depend_on_direction(direction):
    assert ConvSpec(direction=direction).flops == ConvSpec().flops


# ---- bytes per dtype and direction --------------------------------------------------------------
# Small spec: X = 2*8*10*10 = 1,600 elements; W = 16*8*3*3 = 1,152; Y = 2*16*10*10 = 3,200.
_SMALL = dict(N=2, C=8, H=10, W=10, K=16, R=3, S=3)


@pytest.mark.parametrize(
    "dtype, direction, expect",
    [
        ("fp32", "fprop", {"x": 6_400, "w": 4_608, "y": 12_800}),
        ("tf32", "dgrad", {"x": 6_400, "w": 4_608, "y": 12_800}),
        ("fp16", "fprop", {"x": 3_200, "w": 2_304, "y": 6_400}),
        ("bf16", "wgrad", {"x": 3_200, "w": 2_304, "y": 6_400}),
        # fp8 reads 1-byte inputs and writes fp16 (2 bytes): the written tensor depends on direction
        ("fp8_e4m3", "fprop", {"x": 1_600, "w": 1_152, "y": 6_400}),
        ("fp8_e4m3", "dgrad", {"x": 3_200, "w": 1_152, "y": 3_200}),
        ("fp8_e4m3", "wgrad", {"x": 1_600, "w": 2_304, "y": 3_200}),
    ],
)
def test_tensor_bytes(dtype, direction, expect):
    s = ConvSpec(**_SMALL, dtype=dtype, direction=direction)
    assert s.tensor_bytes == expect
    assert s.min_bytes == sum(expect.values())
    assert s.arithmetic_intensity == pytest.approx(s.flops / sum(expect.values()))


def test_output_dtype():
    assert {d: ConvSpec(dtype=d).output_dtype for d in DTYPES} == {
        "fp32": "fp32",
        "tf32": "fp32",
        "fp16": "fp16",
        "bf16": "bf16",
        "fp8_e4m3": "fp16",
    }


def test_layout_does_not_change_sizes():
    a, b = ConvSpec(layout="NCHW"), ConvSpec(layout="NHWC")
    assert (a.x_shape, a.w_shape, a.y_shape, a.flops, a.tensor_bytes) == (
        b.x_shape,
        b.w_shape,
        b.y_shape,
        b.flops,
        b.tensor_bytes,
    )


# ---- identity -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        dict(dtype="bf16"),
        dict(layout="NCHW"),
        dict(direction="dgrad"),
        dict(direction="wgrad"),
        dict(dilation=2, padding=2),
        dict(dilation=(1, 2), padding=1),
        dict(stride=(2, 1)),
        dict(padding=(1, 0)),
        dict(groups=2),
        dict(N=2),
        dict(C=32),
        dict(K=32),
        dict(H=28),
    ],
)
def test_key_differs(change):
    base = ConvSpec()
    other = base.replace(**change)
    assert other != base
    assert other.key != base.key
    assert hash(other.key) != hash(base.key)
    assert hash(other) != hash(base)
    assert len({base, other}) == 2 and len({base.key, other.key}) == 2


def test_key_equal_for_equal_specs():
    a = ConvSpec(N=4, stride=2, padding=[1, 1], dtype="BF16", layout="nchw")
    b = ConvSpec(N=4, stride=(2, 2), padding=1, dtype="bf16", layout="NCHW")
    assert a == b and a.key == b.key and hash(a) == hash(b) and hash(a.key) == hash(b.key)
    names = [k for k, _ in a.key]
    assert names == [
        "N",
        "C",
        "H",
        "W",
        "K",
        "R",
        "S",
        "stride",
        "padding",
        "dilation",
        "groups",
        "dtype",
        "layout",
        "direction",
    ]


def test_replace():
    base = ConvSpec()
    s = base.replace(stride=2, dtype="fp32")
    assert (s.stride, s.dtype, s.P) == ((2, 2), "fp32", 28)
    assert base.stride == (1, 1) and base.dtype == "fp16"  # unchanged: frozen
    with pytest.raises(InvalidSpec) as e:
        base.replace(groups=3)
    assert e.value.field == "groups"
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.N = 2  # type: ignore[misc]


def test_dict_round_trip():
    s = ConvSpec(
        N=3,
        C=12,
        H=17,
        W=19,
        K=6,
        R=3,
        S=5,
        stride=(2, 1),
        padding=(1, 2),
        dilation=(1, 2),
        groups=3,
        dtype="fp8_e4m3",
        layout="NCHW",
        direction="wgrad",
    )
    d = s.to_dict()
    assert d["stride"] == [2, 1] and d["padding"] == [1, 2] and d["dilation"] == [1, 2]
    assert d["dtype"] == "fp8_e4m3" and d["groups"] == 3
    back = ConvSpec.from_dict(json.loads(json.dumps(d)))
    assert back == s and back.key == s.key


def test_from_dict_unknown_field():
    d = ConvSpec().to_dict()
    d["batch"] = 3
    with pytest.raises(InvalidSpec) as e:
        ConvSpec.from_dict(d)
    assert e.value.field == "spec" and "batch" in str(e.value)


@pytest.mark.parametrize(
    "kw, label",
    [
        (dict(), "fp16 NHWC fprop 1x64x56x56 -> 64 3x3 s1 p1"),
        (
            dict(N=32, stride=2, dtype="fp32", layout="NCHW", direction="dgrad"),
            "fp32 NCHW dgrad 32x64x56x56 -> 64 3x3 s2 p1",
        ),
        (
            dict(stride=(1, 2), padding=(1, 0), dilation=(1, 2), groups=64, K=128),
            "fp16 NHWC fprop 1x64x56x56 -> 128 3x3 s1,2 p1,0 d1,2 g64",
        ),
    ],
)
def test_label(kw, label):
    assert ConvSpec(**kw).label == label


def test_exported_from_package():
    assert labkit.ConvSpec is ConvSpec and labkit.InvalidSpec is InvalidSpec
    assert issubclass(InvalidSpec, labkit.LabkitError) and issubclass(InvalidSpec, ValueError)


# ---- hand-picked invalid specs ------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(N=0), "N"),
        (dict(C=-1), "C"),
        (dict(H=1.0), "H"),
        (dict(W="56"), "W"),
        (dict(K=None), "K"),
        (dict(R=True), "R"),
        (dict(S=MAX_DIM + 1), "S"),
        (dict(groups=0), "groups"),
        (dict(stride=0), "stride"),
        (dict(stride=(1, 2, 3)), "stride"),
        (dict(stride=(1,)), "stride"),
        (dict(padding=-1), "padding"),
        (dict(padding=(1, 1.5)), "padding"),
        (dict(dilation=(0, 1)), "dilation"),
        (dict(dtype="fp64"), "dtype"),
        (dict(dtype="fp8"), "dtype"),
        (dict(dtype=16), "dtype"),
        (dict(layout="CHWN"), "layout"),
        (dict(layout=None), "layout"),
        (dict(direction="bprop"), "direction"),
        (dict(C=64, groups=3), "groups"),
        (dict(C=64, K=96, groups=64), "groups"),
        (dict(H=3, R=7, S=3, padding=(0, 1)), "R"),
        (dict(W=2, R=3, S=5, padding=(1, 0)), "S"),
        (dict(N=2048, C=1024, H=32, W=32), "shape"),
    ],
)
def test_invalid(kw, field):
    with pytest.raises(InvalidSpec) as e:
        ConvSpec(**kw)
    assert e.value.field == field
    assert str(e.value).startswith(f"{field}=")


# ---- fuzzing ------------------------------------------------------------------------------------
INT_FIELDS = ("N", "C", "H", "W", "K", "R", "S", "groups")
PAIR_FIELDS = ("stride", "padding", "dilation")
CHOICES = {"dtype": DTYPES, "layout": LAYOUTS, "direction": DIRECTIONS}
# A valid base in which any one int field may be set to any valid value without breaking another
# rule: 1x1 filter, no padding, groups 1.
_BASE = dict(N=1, C=4, H=8, W=8, K=4, R=1, S=1, stride=1, padding=0, dilation=1, groups=1)

not_an_int = st.one_of(
    st.text(max_size=4),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.just(b"1"),
    st.complex_numbers(max_magnitude=10),
    st.builds(object),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
bad_int = st.one_of(not_an_int, st.integers(max_value=0), st.integers(min_value=MAX_DIM + 1))


def bad_pair(minimum: int):
    good = st.integers(min_value=minimum, max_value=4)
    worse = st.one_of(not_an_int, st.integers(max_value=minimum - 1), st.integers(min_value=MAX_DIM + 1))
    wrong_length = st.lists(st.integers(min_value=minimum, max_value=4), max_size=6).filter(
        lambda v: len(v) != 2
    )
    return st.one_of(
        not_an_int.filter(lambda v: not isinstance(v, (list, tuple))),
        st.integers(max_value=minimum - 1),
        st.integers(min_value=MAX_DIM + 1),
        wrong_length,
        wrong_length.map(tuple),
        st.tuples(worse, good),
        st.tuples(good, worse),
        st.lists(worse, min_size=2, max_size=2),
    )


PAIR_MIN = {"stride": 1, "padding": 0, "dilation": 1}


def bad_choice(allowed, normalise):
    return st.one_of(
        st.text(max_size=10).filter(lambda v: normalise(v) not in allowed),
        st.sampled_from(allowed).map(lambda v: " " + v),
        st.sampled_from(allowed).map(lambda v: v.encode()),
        st.integers(),
        st.none(),
        st.booleans(),
        st.sampled_from(allowed).map(lambda v: [v]),
    )


NORMALISE = {"dtype": str.lower, "layout": str.upper, "direction": str.lower}


@st.composite
def one_bad_field(draw):
    """A valid base with exactly one field made invalid on its own: (kwargs, that field)."""
    kind = draw(st.sampled_from(["int", "pair", "choice"]))
    kw = dict(_BASE)
    if kind == "int":
        field = draw(st.sampled_from(INT_FIELDS))
        kw[field] = draw(bad_int)
    elif kind == "pair":
        field = draw(st.sampled_from(PAIR_FIELDS))
        kw[field] = draw(bad_pair(PAIR_MIN[field]))
    else:
        field = draw(st.sampled_from(list(CHOICES)))
        kw[field] = draw(bad_choice(CHOICES[field], NORMALISE[field]))
    return kw, field


@FUZZ
@given(one_bad_field())
def test_fuzz_one_bad_field_names_it(case):
    kw, field = case
    with pytest.raises(InvalidSpec) as e:
        ConvSpec(**kw)
    assert e.value.field == field, (kw, e.value)
    assert isinstance(e.value.rule, str) and e.value.rule


@FUZZ
@given(st.data())
def test_fuzz_cross_field_rules_name_the_field(data):
    rule = data.draw(st.sampled_from(["groups", "filter_h", "filter_w", "elements"]))
    kw = dict(_BASE)
    if rule == "groups":
        g = data.draw(st.integers(2, 64))
        c = data.draw(st.integers(1, 512))
        k = data.draw(st.integers(1, 512))
        if c % g == 0 and k % g == 0:
            c += 1  # now g does not divide C
        kw.update(C=c, K=k, groups=g)
        field = "groups"
    elif rule in ("filter_h", "filter_w"):
        r, d = data.draw(st.integers(2, 15)), data.draw(st.integers(1, 8))
        reach = d * (r - 1)
        pad = data.draw(st.integers(0, (reach - 1) // 2))
        size = data.draw(st.integers(1, reach - 2 * pad))  # size + 2*pad <= reach: no window fits
        if rule == "filter_h":
            kw.update(H=size, R=r, dilation=(d, 1), padding=(pad, 0), W=64)
            field = "R"
        else:
            kw.update(W=size, S=r, dilation=(1, d), padding=(0, pad), H=64)
            field = "S"
    else:
        dims = [data.draw(st.integers(1, MAX_DIM)) for _ in range(4)]
        while math.prod(dims) <= MAX_ELEMENTS:
            dims[data.draw(st.integers(0, 3))] = MAX_DIM
        kw.update(N=dims[0], C=dims[1], H=dims[2], W=dims[3])
        field = "shape"
    with pytest.raises(InvalidSpec) as e:
        ConvSpec(**kw)
    assert e.value.field == field, (kw, e.value)


anything = st.one_of(
    st.integers(min_value=-3, max_value=40),
    st.integers(),
    bad_int,
    st.tuples(st.integers(-1, 5), st.integers(-1, 5)),
    st.lists(st.integers(-1, 5), max_size=4),
    st.sampled_from(DTYPES + LAYOUTS + DIRECTIONS),
    st.text(max_size=6),
)


@FUZZ
@given(st.fixed_dictionaries({}, optional={f: anything for f in (*INT_FIELDS, *PAIR_FIELDS, *CHOICES)}))
def test_fuzz_anything_is_valid_or_invalid_spec(kw):
    """Whatever is passed, the result is a valid spec or InvalidSpec; never another exception."""
    try:
        s = ConvSpec(**kw)
    except InvalidSpec as e:
        assert e.field in {*INT_FIELDS, *PAIR_FIELDS, *CHOICES, "shape"}
        return
    assert s.P >= 1 and s.Q >= 1


@st.composite
def valid_specs(draw):
    r, s_ = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    dil = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    pad = (draw(st.integers(0, dil[0] * (r - 1))), draw(st.integers(0, dil[1] * (s_ - 1))))
    h = draw(st.integers(max(1, dil[0] * (r - 1) + 1 - 2 * pad[0]), 128))
    w = draw(st.integers(max(1, dil[1] * (s_ - 1) + 1 - 2 * pad[1]), 128))
    g = draw(st.integers(1, 16))
    return dict(
        N=draw(st.integers(1, 8)),
        C=g * draw(st.integers(1, 8)),
        H=h,
        W=w,
        K=g * draw(st.integers(1, 8)),
        R=r,
        S=s_,
        stride=(draw(st.integers(1, 4)), draw(st.integers(1, 4))),
        padding=pad,
        dilation=dil,
        groups=g,
        dtype=draw(st.sampled_from(DTYPES)),
        layout=draw(st.sampled_from(LAYOUTS)),
        direction=draw(st.sampled_from(DIRECTIONS)),
    )


def _count_windows(size, kernel, stride, pad, dil):
    """Output positions by brute force: window starts (in padded coordinates) that fit."""
    reach = dil * (kernel - 1)
    return sum(1 for start in range(0, size + 2 * pad, stride) if start + reach <= size + 2 * pad - 1)


@FUZZ
@given(valid_specs())
def test_fuzz_valid_specs(kw):
    s = ConvSpec(**kw)
    assert s.P >= 1 and s.Q >= 1
    assert s.P == _count_windows(s.H, s.R, s.stride[0], s.padding[0], s.dilation[0])
    assert s.Q == _count_windows(s.W, s.S, s.stride[1], s.padding[1], s.dilation[1])
    assert s.flops == 2 * s.N * s.K * s.P * s.Q * (s.C // s.groups) * s.R * s.S
    assert s.min_bytes == sum(s.touched_bytes.values()) > 0
    rows, cols = s.x_touched
    assert (rows, cols) == (
        _touched_brute(s.H, s.P, s.R, s.stride[0], s.padding[0], s.dilation[0]),
        _touched_brute(s.W, s.Q, s.S, s.stride[1], s.padding[1], s.dilation[1]),
    )
    assert s.touched_bytes["w"] == s.tensor_bytes["w"] and s.touched_bytes["y"] == s.tensor_bytes["y"]
    assert 0 <= s.touched_bytes["x"] <= s.tensor_bytes["x"]  # dilated taps can all land in padding
    assert ConvSpec.from_dict(s.to_dict()) == s
    assert s.replace() == s and s.replace().key == s.key


@pytest.mark.parametrize(
    "kw, pq",
    [
        (
            dict(H=56, W=56, R=1, S=1, stride=2, padding=3),
            (31, 31),
        ),  # 1x1, padding 3, stride 2 (PyTorch takes it)
        (dict(H=8, W=8, R=3, S=3, padding=(4, 0)), (14, 6)),  # padding past the filter's reach
        (dict(H=1, W=1, R=1, S=1, padding=2), (5, 5)),  # windows wholly in padding read zeros
    ],
)
def test_any_padding_with_an_output_is_valid(kw, pq):
    """The rule is PyTorch's: any padding >= 0 as long as the output has at least one pixel."""
    s = ConvSpec(**kw)
    assert (s.P, s.Q) == pq
    assert 0 < s.x_touched[0] <= s.H and 0 < s.x_touched[1] <= s.W


@pytest.mark.parametrize("fields, said", [(dict(Q=2), "unknown field;"), (dict(Q=2, Z=3), "unknown fields;")])
def test_unknown_fields_are_counted_in_words_that_agree(fields, said):
    with pytest.raises(InvalidSpec, match=said):
        ConvSpec.from_dict(dict(N=1, **fields))
