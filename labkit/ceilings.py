"""Peak dense throughput (TFLOP/s) per dtype and memory bandwidth (bytes/s) of known GPUs.

Vendor datasheet figures (NVIDIA; dense, no sparsity) for roofline charts, each entry with the
document it comes from in ``source``. Where a datasheet gives only the with-sparsity figure (marked
``*`` in NVIDIA's tables) the dense one is half of it, and the entry's comment says so. A dtype the
GPU has no tensor-core path for (fp8 before Ada/Hopper, bf16/tf32 on Turing) is absent, not zero.
A GPU not in the table gets None, and the chart says "no ceilings known for <name>"; a ceiling is
never guessed, nor borrowed from a similar GPU (PCIe and SXM boards differ in clocks and memory).

Names are matched on the words of the CUDA device name (``cudaGetDeviceProperties``), so "L4" is
not found in "L40S" and "A10" not in "A100".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional, Tuple


@dataclass(frozen=True)
class Ceiling:
    """One GPU's datasheet peaks (dense, no sparsity).

    Attributes:
        gpu: the board, e.g. "H100 SXM".
        tflops: dtype -> peak dense TFLOP/s; a dtype with no tensor-core path is absent.
        bandwidth_bytes_per_s: HBM/DRAM bandwidth, in bytes per second.
        source: the vendor document the figures come from.
    """

    gpu: str
    tflops: Dict[str, float]
    bandwidth_bytes_per_s: float
    source: str = "NVIDIA datasheet (dense)"

    def peak_tflops(self, dtype: str) -> Optional[float]:
        """Peak dense throughput for one dtype.

        Args:
            dtype: a labkit dtype name.

        Returns:
            TFLOP/s; None when the GPU has no path for ``dtype``.
        """
        return self.tflops.get(dtype)

    def ridge_intensity(self, dtype: str) -> Optional[float]:
        """FLOPs per byte where the compute roof meets the bandwidth roof.

        Args:
            dtype: a labkit dtype name.

        Returns:
            The ridge point in FLOP/B; None when the GPU has no path for ``dtype``.
        """
        peak = self.peak_tflops(dtype)
        return None if peak is None else peak * 1e12 / self.bandwidth_bytes_per_s


def _c(gpu, source, fp32, tf32, fp16, bf16, fp8, tb_s):
    """A ceiling from the datasheet's dense figures (TFLOP/s; None: no such path) and TB/s."""
    t = {
        k: v
        for k, v in (("fp32", fp32), ("tf32", tf32), ("fp16", fp16), ("bf16", bf16), ("fp8_e4m3", fp8))
        if v is not None
    }
    return Ceiling(gpu, t, float(round(tb_s * 1e12)), source)


@dataclass(frozen=True)
class _Entry:
    """``patterns``: sets of words that must all be in the device name (any one set matches);
    ``exclude``: words that rule the entry out."""

    patterns: Tuple[FrozenSet[str], ...]
    ceiling: Ceiling
    exclude: FrozenSet[str] = field(default_factory=frozenset)

    def matches(self, words: set) -> bool:
        return not (self.exclude & words) and any(p <= words for p in self.patterns)


def _e(ceiling, *patterns, exclude=()):
    return _Entry(tuple(frozenset(p.split()) for p in patterns), ceiling, frozenset(exclude))


H100_DS = (
    "NVIDIA H100 Tensor Core GPU datasheet, "
    "https://resources.nvidia.com/en-us-gpu-resources/h100-datasheet-24306"
    " (tensor figures there are with sparsity: halved)"
)
H200_DS = (
    "NVIDIA H200 Tensor Core GPU datasheet, https://nvdam.widen.net/content/udc6mzrk7a/original/"
    "hpc-datasheet-sc23-h200-datasheet-3002446.pdf (tensor figures there are with sparsity: halved)"
)
A100_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet, "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/"
    "pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (dense figures as listed)"
)
A10_DS = (
    "NVIDIA A10 Tensor Core GPU datasheet, "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"
    " (dense figures as listed)"
)
A40_DS = (
    "NVIDIA A40 datasheet, "
    "https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf"
    " (dense figures as listed beside the sparse ones)"
)
L4_DS = (
    "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/l4/"
    "nvidia-l4-tensor-core-gpu-datasheet.pdf (tensor figures there are with sparsity: halved)"
)
L40S_DS = (
    "NVIDIA L40S datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 "
    "(dense figures as listed beside the sparse ones)"
)
L40_DS = (
    "NVIDIA L40 datasheet (L40/L40S specification table; dense figures as listed beside the sparse ones, "
    "as reproduced at https://www.mullet.se/product.html?product_id=355414)"
)
T4_DS = (
    "NVIDIA T4 Tensor Core GPU datasheet, "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
    "t4-tensor-core-datasheet-951643.pdf (dense; Turing has no tf32, bf16 or fp8 tensor path)"
)
ADA_WP = (
    "NVIDIA Ada GPU Architecture whitepaper v1.1, GeForce RTX 4090 column, https://images.nvidia.com/aem-dam/"
    "Solutions/geforce/ada/nvidia-ada-lovelace-architecture-whitepaper-v1.1.pdf (dense, FP32 accumulate)"
)

#: every known GPU; a device name matches at most one entry (tests check the names they know)
KNOWN = (
    # Hopper. H100 SXM/PCIe/NVL: TF32 989*/756*/835*, FP16 and BF16 1979*/1513*/1671*, FP8 3958*/3026*/3341*
    # (* with sparsity; halved here); FP32 67/51/60; 3.35/2.0/3.9 TB/s.
    _e(
        _c("H100 SXM", H100_DS, 67, 495, 989, 989, 1979, 3.35),
        "h100 80gb hbm3",
        "h100 sxm5 80gb",
        "h100 sxm 80gb",
        exclude=("pcie", "nvl"),
    ),
    _e(_c("H100 PCIe", H100_DS, 51, 378, 756, 756, 1513, 2.0), "h100 pcie"),
    _e(_c("H100 NVL", H100_DS, 60, 418, 835, 835, 1670, 3.9), "h100 nvl"),
    # H200 (SXM): the H100 SXM's compute (TF32 989*, FP16/BF16 1979*, FP8 3958*, halved) with 4.8 TB/s HBM3e.
    # The H200 NVL (a lower-power board) has other figures and is not in the table.
    _e(_c("H200 SXM", H200_DS, 67, 495, 989, 989, 1979, 4.8), "h200", exclude=("nvl",)),
    # Ampere A100: FP32 19.5, TF32 156, FP16/BF16 312 dense (624* sparse); bandwidth by board:
    # SXM 80GB 2,039 GB/s, PCIe 80GB 1,935 GB/s, SXM and PCIe 40GB 1,555 GB/s. No fp8.
    _e(_c("A100 SXM 80GB", A100_DS, 19.5, 156, 312, 312, None, 2.039), "a100 sxm4 80gb", "a100 sxm 80gb"),
    _e(_c("A100 SXM 40GB", A100_DS, 19.5, 156, 312, 312, None, 1.555), "a100 sxm4 40gb", "a100 sxm 40gb"),
    _e(_c("A100 PCIe 80GB", A100_DS, 19.5, 156, 312, 312, None, 1.935), "a100 80gb pcie", "a100 pcie 80gb"),
    _e(_c("A100 PCIe 40GB", A100_DS, 19.5, 156, 312, 312, None, 1.555), "a100 pcie 40gb", "a100 40gb pcie"),
    # Ampere A10: FP32 31.2, TF32 62.5, FP16/BF16 125 dense; 600 GB/s. (AWS's A10G is a different board.)
    _e(_c("A10", A10_DS, 31.2, 62.5, 125, 125, None, 0.6), "a10"),
    # Ampere A40: FP32 37.4, TF32 74.8, BF16 (FP32 accumulate) and FP16 149.7 dense
    # (149.6*/299.4* sparse); 696 GB/s.
    _e(_c("A40", A40_DS, 37.4, 74.8, 149.7, 149.7, None, 0.696), "a40"),
    # Ada. L4: TF32 120*, FP16/BF16 242*, FP8 485* (halved); FP32 30.3; 300 GB/s.
    _e(_c("L4", L4_DS, 30.3, 60, 121, 121, 242.5, 0.3), "l4"),
    # L40S: FP32 91.6, TF32 183, FP16/BF16 362.05, FP8 733 dense (366*/733*/1,466* sparse); 864 GB/s.
    _e(_c("L40S", L40S_DS, 91.6, 183, 362.05, 362.05, 733, 0.864), "l40s"),
    # L40: FP32 90.5, TF32 90.5, FP16/BF16 181.05, FP8 362 dense (181*/362.1*/724* sparse); 864 GB/s.
    _e(_c("L40", L40_DS, 90.5, 90.5, 181.05, 181.05, 362, 0.864), "l40"),
    # GeForce RTX 4090: FP32 82.6; tensor with FP32 accumulate (cuDNN's fp16/bf16 compute type): TF32 82.6,
    # FP16/BF16 165.2, FP8 330.3 (the whitepaper lists twice that with FP16 accumulate, and twice again
    # with sparsity); 1,008 GB/s. The RTX 4090 D and the laptop GPU are other configurations.
    _e(
        _c("GeForce RTX 4090", ADA_WP, 82.6, 82.6, 165.2, 165.2, 330.3, 1.008),
        "rtx 4090",
        exclude=("d", "laptop"),
    ),
    # Turing T4: FP32 8.1, FP16 (mixed precision, FP32 accumulate) 65; 300 GB/s (the datasheet version cited;
    # earlier versions say 320+ GB/s: the lower figure is kept). No tf32, bf16 or fp8.
    _e(_c("T4", T4_DS, 8.1, None, 65, None, None, 0.3), "t4"),
)


def _words(name: str) -> set:
    return set(re.findall(r"[a-z0-9]+", name.lower()))


def matches(name: Optional[str]) -> list:
    """Every table entry the device name matches (at most one for a name the tests know).

    Args:
        name: a CUDA device name; None or empty for none.

    Returns:
        The matching `Ceiling` s, in table order.
    """
    if not name:
        return []
    words = _words(name)
    return [e.ceiling for e in KNOWN if e.matches(words)]


def for_gpu(name: Optional[str]) -> Optional[Ceiling]:
    """The ceiling for a CUDA device name, or None; never a guess.

    Args:
        name: the name as ``cudaGetDeviceProperties`` reports it, e.g. ``NVIDIA H100 80GB HBM3``,
            ``NVIDIA A100 80GB PCIe``, ``Tesla T4``.

    Returns:
        The `Ceiling`; None for a GPU the table does not know or a name that matches two entries.
    """
    found = matches(name)
    return found[0] if len(found) == 1 else None


def table():
    """Every entry as a DataFrame.

    Returns:
        One row per GPU: gpu, peak dense TFLOP/s per dtype (NaN: no such path), bandwidth_gb_s, the
        fp16 ridge in FLOP/B and source (the vendor document).
    """
    import pandas as pd  # heavy: pandas, off the light path

    rows = []
    for e in KNOWN:
        c = e.ceiling
        row = dict(gpu=c.gpu)
        for d in ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3"):
            row[f"{d}_tflops"] = c.peak_tflops(d)
        row["bandwidth_gb_s"] = c.bandwidth_bytes_per_s / 1e9
        row["fp16_ridge_flop_per_byte"] = c.ridge_intensity("fp16")
        row["source"] = c.source
        rows.append(row)
    return pd.DataFrame(rows)
