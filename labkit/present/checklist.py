"""``labkit.report(net).checklist()``: the cuDNN frontend's performance checklist, each item
measured for the learner's network on this GPU (or read from the recording the report came from).

The items come from two measurements of the same request: `labkit.experiments.checklist_items`
(precision, layout, plans, graph reuse, batch size) and the report's own `network_report`
(autotune, memory fits, profile). The table, the sentences and the chart are
`labkit.experiments.your_network.checklist`'s. Bytes; microseconds; percent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from ..env import environment
from ..errors import InvalidSpec
from ..experiments.your_network import PRODUCTION_BATCH, check_production_batch
from ..experiments.your_network.checklist import checklist_sentences, checklist_table
from ..experiments.your_network.checklist_chart import checklist_chart
from ..session import lessons
from ..store import recordings


@dataclass
class Checklist:
    """A network's performance checklist.

    Attributes:
        table: one row per item (`labkit.experiments.your_network.checklist.COLUMNS`): whether it
            applies here (or why it cannot be measured here), what it compares, its gain and its
            cost, units in the column names.
        items: `checklist_items`' long frame the table was computed from.
        report: the network report's long frame (autotune, memory fits, profile).
    """

    table: object
    items: object = field(repr=False)
    report: object = field(repr=False)

    def sentences(self) -> List[str]:
        """One sentence per item, written from its row of ``table``.

        Returns:
            The sentences, in the checklist's order.
        """
        return checklist_sentences(self.table)

    def chart(self):
        """The checklist's chart: one panel per kind of percent (time saved, memory held, time idle),
        bars on linear axes from zero.

        Returns:
            The ``go.Figure``.
        """
        return checklist_chart(self.table)

    def _repr_markdown_(self) -> str:
        return "\n".join(f"* {s}" for s in self.sentences())


def _recording_of(frame) -> Optional[str]:
    """The shipped recording a recorded frame came from (its folder's name); None live."""
    a = getattr(frame, "attrs", {}) or {}
    if a.get("mode") != "recorded" or not a.get("source"):
        return None
    return Path(a["source"]).name


def memory_of(recording: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """A GPU's name and memory: a shipped recording's (its metadata), or this GPU's (live).

    Args:
        recording: a shipped recording's name; None for this machine's GPU.

    Returns:
        (the CUDA device name, its memory in bytes); None where unknown.
    """
    if recording is None:
        e = environment()
        return e.gpu_name, e.gpu_memory_bytes
    meta = recordings.named(recording).metadata
    return meta.get("gpu"), meta.get("gpu_memory_bytes")


def target_of(this_gpu: Optional[str], target_gpu: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """The target GPU's name and memory, from its shipped recording's metadata.

    Args:
        this_gpu: this report's GPU (its CUDA name).
        target_gpu: a shipped recording's name (``"h200"``); None: the first shipped recording of
            another GPU than this one.

    Returns:
        (its CUDA device name, its memory in bytes); (None, None) when there is none.
    """
    if target_gpu is not None:
        return memory_of(recordings.named(target_gpu).name)  # `InvalidSpec` naming the ones shipped
    other = next((r for r in recordings.shipped() if r.metadata.get("gpu") != this_gpu), None)
    return memory_of(other.name) if other is not None else (None, None)


def checklist_of(
    frame, production_batch: Optional[int] = None, target_gpu: Optional[str] = None
) -> Checklist:
    """The checklist of a network report (`labkit.present.netreport.Report.checklist`).

    Args:
        frame: the report's `network_report` frame.
        production_batch: the batch the network will run at in production, in images (None:
            `PRODUCTION_BATCH`, the one the recordings hold).
        target_gpu: the shipped recording whose GPU the memory item also compares with (None:
            another GPU than this one's).

    Returns:
        A `Checklist`.
    """
    request = dict(frame.attrs.get("request") or {})
    if request.get("training"):
        raise InvalidSpec(
            "training", True, "the checklist is of an inference pass: make the report with training=False"
        )
    production_batch = check_production_batch(
        PRODUCTION_BATCH if production_batch is None else production_batch
    )
    kwargs = {k: request.get(k) for k in ("net", "batch", "dtype", "layout", "image")}
    recording = _recording_of(frame)
    items = lessons.data("checklist_items", recording=recording, production_batch=production_batch, **kwargs)
    gpu, memory = memory_of(recording)
    table = checklist_table(
        frame,
        items,
        production_batch=production_batch,
        memory_bytes=memory,
        target=target_of(gpu, target_gpu),
    )
    return Checklist(table, items, frame)
