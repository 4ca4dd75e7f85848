"""Plans labkit never runs: cuDNN builds them, but their results were wrong against the float64
reference (`KNOWN_WRONG`, with the evidence). `labkit.gpu.engine` lists them as not runnable and
says why; `labkit.gpu.builds` gives them no worker's time.
"""

from __future__ import annotations

from typing import Optional

from ..spec import ConvSpec

#: Plans labkit has seen give wrong results (checked against the float64 reference); they are
#: listed as not runnable, with the evidence, so no lesson or strategy runs them.
#: (engine name, dtype, layout, evidence)
KNOWN_WRONG = (
    (
        "eng7_k24=26",
        "fp8_e4m3",
        "NCHW",
        "relative error 1.4 vs the float64 reference on an H100 with cuDNN 9.19.0 "
        "(fp8 NCHW fprop 2x32x12x12 -> 32 3x3, 3 seeds); the heuristic's first pick there",
    ),
)


def known_wrong(spec: ConvSpec, name: str) -> Optional[str]:
    """Why labkit never runs plan ``name`` of ``spec`` (`KNOWN_WRONG`), or None."""
    for engine_name, dtype, layout, evidence in KNOWN_WRONG:
        if name == engine_name and spec.dtype == dtype and spec.layout == layout:
            return "excluded by labkit: " + evidence
    return None
