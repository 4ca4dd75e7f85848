"""Peak dense throughput (TFLOP/s) per dtype and memory bandwidth (bytes/s) of known GPUs.

Datasheet numbers (NVIDIA, dense, no sparsity) for roofline charts. A GPU not in the table gets
no ceiling, and the chart says so; it is never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class Ceiling:
    """``tflops``: dtype -> dense TFLOP/s; ``bandwidth_bytes_per_s``: HBM/DRAM bandwidth."""

    gpu: str
    tflops: Dict[str, float]
    bandwidth_bytes_per_s: float
    source: str = "NVIDIA datasheet (dense)"

    def peak_tflops(self, dtype: str) -> Optional[float]:
        return self.tflops.get(dtype)

    def ridge_intensity(self, dtype: str) -> Optional[float]:
        """FLOPs per byte where the compute roof meets the bandwidth roof."""
        peak = self.peak_tflops(dtype)
        return None if peak is None else peak * 1e12 / self.bandwidth_bytes_per_s


def _c(gpu, fp32, tf32, half, fp8, tb_s):
    t = {"fp32": fp32, "tf32": tf32, "fp16": half, "bf16": half}
    if fp8:
        t["fp8_e4m3"] = fp8
    return Ceiling(gpu, t, tb_s * 1e12)


#: (substring of the CUDA device name, ceiling); the first match wins, so specific names go first
KNOWN = (
    ("H100 PCIe", _c("H100 PCIe", 51, 378, 756, 1513, 2.0)),
    ("H100 NVL", _c("H100 NVL", 60, 418, 835, 1670, 3.9)),
    ("H100", _c("H100 SXM", 67, 495, 989, 1979, 3.35)),
    ("H200", _c("H200 SXM", 67, 495, 989, 1979, 4.8)),
    ("A100-SXM4-80GB", _c("A100 SXM 80GB", 19.5, 156, 312, None, 2.039)),
    ("A100-SXM4-40GB", _c("A100 SXM 40GB", 19.5, 156, 312, None, 1.555)),
    ("A100 80GB PCIe", _c("A100 PCIe 80GB", 19.5, 156, 312, None, 1.935)),
    ("L4", _c("L4", 30.3, 60, 121, 242.5, 0.3)),
)


def for_gpu(name: Optional[str]) -> Optional[Ceiling]:
    """The ceiling for a CUDA device name (as `cudaGetDeviceProperties` reports it), or None."""
    if not name:
        return None
    for key, ceiling in KNOWN:
        if key.lower() in name.lower():
            return ceiling
    return None
