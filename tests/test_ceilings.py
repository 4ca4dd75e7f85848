"""labkit.ceilings: real CUDA device names find the right datasheet entry (PCIe never taken for
SXM, L4 never for L40S), an unknown GPU gets None and a chart that says so, every entry names its
source document."""

import math

import pytest

from labkit import ceilings, experiments

# names as cudaGetDeviceProperties / nvidia-smi report them -> the entry's gpu
# names as cudaGetDeviceProperties / nvidia-smi report them -> the entry's gpu
from labkit.session import lessons

# names as cudaGetDeviceProperties / nvidia-smi report them -> the entry's gpu
NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A10": "A10",
    "NVIDIA A40": "A40",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA L40": "L40",
    "Tesla T4": "T4",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
}
#: GPUs the table does not know, some close in name to ones it does: None, never a neighbour's roof
UNKNOWN = [
    "Some Future GPU",
    "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB",
    "NVIDIA B200",
    "NVIDIA A10G",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA A100",
    "NVIDIA H100",
    "NVIDIA GeForce RTX 4080",
    "NVIDIA RTX 6000 Ada Generation",
    "",
    None,
]


@pytest.mark.parametrize("name,gpu", NAMES.items())
def test_each_device_name_resolves_to_its_entry(name, gpu):
    assert ceilings.for_gpu(name).gpu == gpu
    assert len(ceilings.matches(name)) == 1  # never two candidates
    assert ceilings.for_gpu(name.upper()).gpu == gpu and ceilings.for_gpu(name.lower()).gpu == gpu


def test_pcie_sxm_and_nvl_boards_are_not_confused():
    sxm, pcie, nvl = (
        ceilings.for_gpu(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL")
    )
    assert sxm.bandwidth_bytes_per_s == 3.35e12 and pcie.bandwidth_bytes_per_s == 2.0e12
    assert nvl.bandwidth_bytes_per_s == 3.9e12
    assert sxm.peak_tflops("fp16") > nvl.peak_tflops("fp16") > pcie.peak_tflops("fp16")
    a_sxm, a_pcie = ceilings.for_gpu("NVIDIA A100-SXM4-80GB"), ceilings.for_gpu("NVIDIA A100 80GB PCIe")
    assert a_sxm.bandwidth_bytes_per_s == 2.039e12 and a_pcie.bandwidth_bytes_per_s == 1.935e12
    assert ceilings.for_gpu("NVIDIA A100-SXM4-40GB").bandwidth_bytes_per_s == 1.555e12
    # H200 is the H100 SXM's compute with more bandwidth
    h200 = ceilings.for_gpu("NVIDIA H200")
    assert h200.tflops == sxm.tflops and h200.bandwidth_bytes_per_s == 4.8e12


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_gpu_gets_none(name):
    assert ceilings.for_gpu(name) is None


def test_dtypes_a_gpu_lacks_are_absent_not_zero():
    t4, a100, l4 = (ceilings.for_gpu(n) for n in ("Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA L4"))
    assert (
        t4.peak_tflops("bf16") is None
        and t4.peak_tflops("tf32") is None
        and t4.peak_tflops("fp8_e4m3") is None
    )
    assert a100.peak_tflops("fp8_e4m3") is None and a100.ridge_intensity("fp8_e4m3") is None
    assert l4.peak_tflops("fp8_e4m3") == pytest.approx(2 * l4.peak_tflops("fp16"), rel=0.01)


def test_every_entry_has_a_source_and_sane_figures():
    for e in ceilings.KNOWN:
        c = e.ceiling
        assert "datasheet" in c.source.lower() or "whitepaper" in c.source.lower(), c.gpu
        assert "http" in c.source, c.gpu
        assert c.tflops["fp32"] > 0 and c.bandwidth_bytes_per_s > 1e11
        # dense tensor peaks: fp16 at least fp32; tf32 half of fp16 (or fp32 rate on Ada GeForce/L40);
        # fp8 twice fp16
        assert c.tflops["fp16"] >= c.tflops["fp32"]
        if "tf32" in c.tflops:
            assert c.tflops["tf32"] <= c.tflops["fp16"] / 2 * 1.02  # L40S: 183 against 362.05 / 2, as listed
        if "fp8_e4m3" in c.tflops:
            assert c.tflops["fp8_e4m3"] == pytest.approx(
                2 * c.tflops["fp16"], rel=0.02
            )  # L40S: 733 vs 2 x 362.05


def test_table_lists_every_entry():
    df = ceilings.table()
    assert list(df.gpu) == [e.ceiling.gpu for e in ceilings.KNOWN]
    assert {
        "fp32_tflops",
        "tf32_tflops",
        "fp16_tflops",
        "bf16_tflops",
        "fp8_e4m3_tflops",
        "bandwidth_gb_s",
        "source",
    } <= set(df.columns)
    assert df.source.str.len().gt(0).all() and df.gpu.is_unique
    t4 = df.set_index("gpu").loc["T4"]
    assert math.isnan(t4.bf16_tflops) and t4.bandwidth_gb_s == pytest.approx(300)


def test_recorded_roofline_keeps_its_h100_roof():
    df = experiments.roofline()
    c = ceilings.for_gpu(df.attrs["gpu"])
    assert c is not None and df.ceiling_gpu.iloc[0] == c.gpu
    assert float(df.peak_tflops.iloc[0]) == c.peak_tflops(df.dtype.iloc[0])
    assert float(df.bandwidth_gb_s.iloc[0]) == pytest.approx(c.bandwidth_bytes_per_s / 1e9)


def test_roofline_with_empty_ceiling_columns_draws_with_the_note():
    df = experiments.roofline().copy()
    df.attrs = dict(df.attrs, gpu="NVIDIA Some Future GPU", mode="live")
    df["peak_tflops"], df["bandwidth_gb_s"], df["ceiling_gpu"] = None, None, None
    fig = experiments.CHARTS["roofline"](df)
    assert len(fig.data) == experiments.TRACES["roofline"] and len(fig.data[1].x or ()) == 0
    assert len(fig.data[0].x) == len(df)  # the measured points are still drawn
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "no ceilings known for Some Future GPU" in notes
    assert "no ceilings known for Some Future GPU" in str(lessons.roofline_summary(df))


def test_roofline_for_a_known_gpu_without_that_dtype_says_which():
    df = experiments.roofline().copy()
    df.attrs = dict(df.attrs, gpu="Tesla T4", mode="live")
    df["peak_tflops"], df["bandwidth_gb_s"], df["ceiling_gpu"] = None, 300.0, "T4"
    notes = " ".join(a.text for a in experiments.CHARTS["roofline"](df).layout.annotations)
    assert "no fp16 peak for T4" in notes
