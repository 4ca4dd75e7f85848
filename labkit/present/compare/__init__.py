"""The same experiment call answered from several recordings: one convolution, several GPUs.

``frames(name, **kwargs)`` looks the call up in every shipped recording (or the ones named) and
returns one DataFrame with ``recording`` and ``gpu`` columns; a recording that lacks the call is
left out and named, with the reason, in ``df.attrs['skipped']`` (never silently). ``ratios(df)``
puts each GPU's value side by side per row label (dtype, shape, plan, strategy, ...) with the
ratio other / baseline, and its range under the spread of repeated timings where the recording
holds one; ``figure(df)`` draws the GPUs on the same axes, each trace labelled with its GPU and
the title with every recording's provenance. ``summary(table)`` says it in words, with the noise
to read it against.

Always recorded numbers, in live mode too (the recordings compared are GPUs you may not have);
nothing is interpolated or borrowed: a row appears only where that GPU measured exactly that call.
Its parts: `frames` (the frames, ratios and summaries), `charts` (the figures), `roofline` (the
roofline's figure) and `names` (how the charts name GPUs and what they leave out).
"""

from .charts import PLANS_SHOWN, figure
from .frames import (
    COMPARABLE,
    GPU_COLORS,
    NOT_COMPARED,
    Comparable,
    Text,
    ceilings_table,
    comparable,
    describe,
    frames,
    quoted_labels,
    ratio_column,
    ratio_range,
    ratio_text,
    ratios,
    reference_spread,
    spread_columns,
    summary,
)
from .names import COLOR_EQUAL, short_gpu
from .roofline import ROOF_MARKER_SIZE, ROOF_MARKER_STEP, ROOF_SAME_DECADES

__all__ = [
    "COMPARABLE",
    "NOT_COMPARED",
    "GPU_COLORS",
    "PLANS_SHOWN",
    "COLOR_EQUAL",
    "ROOF_MARKER_SIZE",
    "ROOF_MARKER_STEP",
    "ROOF_SAME_DECADES",
    "Comparable",
    "Text",
    "comparable",
    "frames",
    "describe",
    "ceilings_table",
    "ratios",
    "quoted_labels",
    "ratio_column",
    "ratio_range",
    "ratio_text",
    "reference_spread",
    "spread_columns",
    "summary",
    "figure",
    "short_gpu",
]
