"""What the simulated GPU reads besides the recording: a calibration table, measured on the same GPU
by ``python -m labkit bench sim-fidelity --calibrate`` (`labkit.cli.sim_calibrate`) into
data/bench/sim_costs_<gpu slug>.csv. `CALIBRATED` says what each kind of row holds; a row of
another kind is the host time of the CUDA call it names (by size where ``nbytes`` is given).
`labkit.simgpu.recorded.Recorded` reads it before the recording. Host and GPU microseconds, bytes.
"""

from __future__ import annotations

import statistics
from typing import Dict, Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from ..spec import ConvSpec

#: how to measure what is missing
CALIBRATE = (
    "run `python -m labkit bench sim-fidelity --calibrate` on that GPU "
    "(it writes data/bench/sim_costs_{slug}.csv)"
)
#: what the rows of a sim_costs CSV hold besides a host call's own time (``call``: a CUDA call's
#: name or a `labkit.simgpu.recorded.SOURCES` key, ``nbytes``: its size, ``host_us``: its median)
CALIBRATED = {
    "python_launch": "host_us: one Runner.run of spec_label's plan_index, back to back on one stream with a "
    "warm preallocated workspace (the median call)",
    "runner_launch": "host_us: one Runner.run after the stream was synchronised; gpu_us: that call between "
    "two events (its launch included)",
    "call_gpu": "gpu_us: GPU time per call of the plan with `streams` streams at once, each replaying its "
    "own CUDA graph of the call with its own workspace, the streams busy before and after",
    "bind": "host_us: binding the plan to a new workspace address (the Runner's first call there)",
    "graph_launch": "host_us: one launch through the seam of a CUDA graph of `graph_calls` calls of the "
    "plan (1 or 20)",
    "cudaMalloc_behind_busy_stream": "host_us: a cudaMalloc of nbytes while a stream is held busy for gpu_us",
}
COLUMNS = ("spec_label", "plan_index", "nbytes", "streams", "graph_calls", "host_us", "gpu_us")


class Calibration:
    """A sim_costs table, as the simulator asks it.

    Args:
        table: the CSV's rows (columns missing from an older table read NaN).
        slug: the GPU's slug, named in what a missing number asks to measure.
    """

    def __init__(self, table: pd.DataFrame, slug: str):
        self.table = table.copy()
        for col in COLUMNS:
            if col not in self.table:
                self.table[col] = float("nan")
        self.slug = slug
        # the simulator asks per call (a graph launch, a cudaMalloc): each kind's rows split once
        self._by_call = {str(call): rows for call, rows in self.table.groupby("call", sort=False)}
        self._graph_parts = self._graph_launch_parts()
        malloc = self.rows("cudaMalloc_behind_busy_stream").dropna(subset=["nbytes"])
        self._malloc = (
            malloc.nbytes.to_numpy(float),
            malloc.host_us.to_numpy(float),
            malloc.gpu_us.to_numpy(float),
        )

    def rows(
        self, call: str, spec: Optional[ConvSpec] = None, plan_index: Optional[int] = None
    ) -> pd.DataFrame:
        """The rows of one kind (for one convolution's plan).

        Args:
            call: the row kind (a `CALIBRATED` key or a CUDA call's name).
            spec: the convolution, or None for every row of that kind.
            plan_index: its plan's index (with ``spec``).

        Returns:
            The matching rows of the table (possibly none).
        """
        rows = self._by_call.get(call, self.table.iloc[:0])
        if spec is not None:
            rows = rows[(rows.spec_label == spec.label) & (rows.plan_index == plan_index)]
        return rows

    def host_costs(self) -> Iterator[Tuple[str, float, float]]:
        """Every row that is a host call's own time.

        Yields:
            (call, nbytes, host_us): the CUDA call's name, its size in bytes (NaN where none) and its
            median host time in microseconds.
        """
        for r in self.table.itertuples():
            if str(r.call) not in CALIBRATED:
                yield str(r.call), r.nbytes, float(r.host_us)

    def launch(self, spec: ConvSpec, plan_index: int) -> Optional[Tuple[float, str]]:
        """The host time of one Python launch of a plan: python_launch, else runner_launch.

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            (microseconds, the row kind it came from), or None where the table has neither.
        """
        for call in ("python_launch", "runner_launch"):
            rows = self.rows(call, spec, plan_index)
            if len(rows):
                return float(rows.host_us.iloc[0]), call
        return None

    def gpu_by_streams(self, spec: ConvSpec, plan_index: int) -> Dict[int, float]:
        """GPU time per call of a plan with k streams at once (call_gpu rows).

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            k -> microseconds per call; empty where not measured.
        """
        rows = self.rows("call_gpu", spec, plan_index)
        return {int(r.streams): float(r.gpu_us) for r in rows.itertuples() if r.gpu_us == r.gpu_us}

    def one_call_gpu_us(self, spec: ConvSpec, plan_index: int) -> Optional[float]:
        """runner_launch's GPU time of one call between two events (its launch included).

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            Microseconds, or None where not measured.
        """
        rows = self.rows("runner_launch", spec, plan_index)
        v = float(rows.gpu_us.iloc[0]) if len(rows) else float("nan")
        return v if v == v else None

    def bind_us(self, spec: ConvSpec, plan_index: int) -> float:
        """Host time of binding a plan to a new workspace address.

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            Microseconds; 0 where not measured (the recordings time calls already bound).
        """
        rows = self.rows("bind", spec, plan_index)
        return float(rows.host_us.iloc[0]) if len(rows) else 0.0

    def graph_launch_us(self, calls) -> Optional[float]:
        """Host time of one launch of a graph of ``calls`` ((spec, plan index) pairs): a fixed part
        (a graph of one call less its per-call part, the median over the convolutions) and, per call,
        what a graph of more calls of it took over a graph of one, per extra call (a call of a plan
        not measured: that per-call part's median over the convolutions measured).

        Args:
            calls: the graph's calls, as (`labkit.ConvSpec`, plan index) pairs.

        Returns:
            Microseconds (at least 0); None when the table has no graph_launch rows.
        """
        if self._graph_parts is None:
            return None
        total, per, median = self._graph_parts
        return max(0.0, total + sum(per.get((spec.label, plan), median) for spec, plan in calls))

    def _graph_launch_parts(self) -> Optional[Tuple[float, Dict[Tuple[str, int], float], float]]:
        """`graph_launch_us`'s parts, from the graph_launch rows.

        Returns:
            (the fixed part, (spec label, plan index) -> the per-call part, the per-call parts'
            median), microseconds; None when the table has no graph_launch rows.
        """
        rows = self.rows("graph_launch")
        if not len(rows):
            return None
        per, fixed = {}, []
        for (label, plan), sub in rows.groupby(["spec_label", "plan_index"]):
            by = dict(zip(sub.graph_calls.astype(int), sub.host_us))
            n = max(by)
            if 1 in by and n > 1:
                per[label, int(plan)] = (by[n] - by[1]) / (n - 1)
                fixed.append(by[1] - per[label, int(plan)])
        total = statistics.median(fixed) if fixed else 0.0
        median = statistics.median(per.values()) if per else 0.0
        return total, per, median

    def malloc_waits(self, nbytes: int) -> bool:
        """Whether cudaMalloc of ``nbytes`` waits for a busy stream: the cudaMalloc_behind_busy_stream
        row of the nearest size took the hold ahead of it (gpu_us) or longer.

        Args:
            nbytes: the cudaMalloc's size, bytes.

        Returns:
            Whether it waits; False where the table has no such row.
        """
        sizes, host_us, gpu_us = self._malloc
        if not len(sizes):
            return False
        i = np.abs(sizes - nbytes).argmin()
        return bool(gpu_us[i] == gpu_us[i] and host_us[i] >= gpu_us[i])
