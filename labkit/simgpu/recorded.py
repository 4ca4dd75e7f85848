"""What a simulated GPU knows: every number it uses, read from one recording, each with its source.

`Recorded` answers three questions and nothing else: which plans a convolution has (and their
workspaces), what one call of a plan runs (its kernels, their durations, and the host time to
launch it), and what a host call costs (cudaMalloc of so many bytes, an event, a pool request).
Each answer is a recorded measurement, or one of the derivations in `SOURCES`; a number the
recording lacks raises `labkit.NotRecorded`, which says what a GPU run would have to record.

Besides the lesson recordings (data/recordings/<gpu>/), a GPU run of ``python -m labkit bench
sim-fidelity --calibrate`` measures the seam's own calls on that GPU into
data/bench/sim_costs_<gpu slug>.csv (`CALIBRATED` names its rows); where that file holds a number it
is used first. Sizes in bytes, times in microseconds.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import pandas as pd

from ..env import gpu_slug
from ..errors import NotRecorded
from ..gpu.workspaces.workloads import ONE_CONV
from ..spec import ConvSpec
from ..store import recordings
from .calibration import CALIBRATE, CALIBRATED, Calibration  # noqa: F401  (CALIBRATED: its rows' kinds)

#: allocation costs are looked up by size in units of this many bytes (CuPy rounds every request to it)
SIZE_UNIT = 512
#: the driver's pool reserves memory in chunks of this many bytes (strategies.csv: async_pool's
#: peak_bytes 33,554,432 for one 25,763,987 B workspace; 100,663,296 = 32 + 64 MiB on growing_batch)
ASYNC_CHUNK = 32 << 20
#: where each kind of number comes from (file, columns, derivation)
SOURCES = {
    "kernels": "kernels.csv: per plan its kernels (kernel, role, launches_per_call, kernel_us) and host_us, "
    "the host time to launch one call (measured inside lesson 10's trace session, CUPTI attached)",
    "replay": "plans.csv: gpu_us, a plan's GPU time per call by CUDA-graph replay (the plans chart's), "
    "where the calibration has none: a plan's traced kernels are scaled to it, in their recorded shares "
    "(one traced call can run more than a replayed call: eng1's 412 us setup kernel)",
    "runner_launch": "strategies.csv, workload one_conv: median_us less strategy_us_per_call (the host time "
    "of one Runner.run less the strategy's own), median over the strategies that allocate nothing in "
    "the timed pass (alloc_calls=0): the launch time of one_conv's convolution, untraced",
    "race": "race.csv: plan_index and workspace_bytes; race_timeline.csv, launch=python: one call's kernels "
    "(stream 1's first kernels_per_call rows, each kernel's median dur_us) and the host's launch span "
    "(first to last cudaLaunchKernel) over the calls",
    "network": "network_report.csv: table=plans gpu_us and workspace_bytes per plan (one span per call: its "
    "kernels are not recorded), table=layers heuristic_plan_index, table=strategies host_us_per_call of "
    "the preallocated pass (a network's mean host time per call)",
    "cudaMalloc": "strategy_timeline.csv, strategy malloc_per_call, name=cudaMalloc: dur_us, for the size "
    "strategies.csv gives as malloc_per_call's peak_bytes on one_conv; else strategies.csv "
    "warmup_alloc_us_total where a strategy's warm-up made one cudaMalloc (warmup_alloc_calls=1) of "
    "peak_bytes",
    "cudaFree": "strategy_timeline.csv, strategy malloc_per_call, name=cudaFree: end_us less the end of the "
    "last kernel before it (cudaFree first waits for the device)",
    "cudaStreamSynchronize": "strategy_timeline.csv, name=cudaStreamSynchronize: end_us less the end of the "
    "last kernel before it (the call's own time once the stream is idle)",
    "caching_pool": "strategies.csv, strategy cupy_pool: alloc_us_total / alloc_calls of the timed pass (a "
    "pool request and its free), median over the workloads",
    "async_pool": "strategies.csv, strategy async_pool: alloc_us_total / alloc_calls of the timed pass "
    "(cudaMallocAsync and its cudaFreeAsync), median over the workloads",
    "async_pool_grow": "strategies.csv, strategy async_pool: warmup_alloc_us_total less (warmup_alloc_calls "
    "- 1) timed-pass pairs, on a workload whose peak_bytes is one chunk for its largest workspace "
    "(scratchpad_per_stream's peak_bytes): the one request that made the pool reserve that chunk",
    "graph_node": "race_timeline.csv, launch=graph, name=cudaGraphLaunch: dur_us over the graph's kernels",
    "calibration": "data/bench/sim_costs_<gpu>.csv: the seam's calls timed on the GPU (bench sim-fidelity "
    "--calibrate); `CALIBRATED` says what each row kind holds",
    "concurrency": "sim_costs call_gpu: gpu_us per call of k streams at once (streams=k), each replaying its "
    "own CUDA graph of the call; s_k = gpu_us(1) / gpu_us(k); the race's kernels: race_timeline.csv, "
    "launch=graph (their durations beside another stream's as alone: s_2 = 2)",
}


@dataclass(frozen=True)
class Kernel:
    """One kernel a call launches.

    Attributes:
        name: the kernel's name, as recorded.
        role: what it does in the call (e.g. "main convolution", "zeroing (memset)").
        us: its recorded duration, microseconds.
    """

    name: str
    role: str
    us: float


@dataclass(frozen=True)
class PlanRow:
    """A plan of a convolution, as recorded.

    Attributes:
        index: its index among the engine's plans.
        name: its engine config's name.
        workspace_bytes: the workspace it needs, bytes.
    """

    index: int
    name: str
    workspace_bytes: int


@dataclass(frozen=True)
class CallTiming:
    """What one call of a plan runs: its kernels in order and the host time to launch it.

    Attributes:
        kernels: the kernels, in launch order.
        host_us: host time to launch the call (microseconds).
        source: where both come from (a `SOURCES` key and the file).
        speedup: {k: s_k}, the GPU's throughput of k streams of this call at once against one
            (`SOURCES` "concurrency"); None when not measured.
        bind_us: host time to bind the plan to a new workspace address (0 where not measured).
    """

    kernels: Tuple[Kernel, ...]
    host_us: float
    source: str
    speedup: Optional[Dict[int, float]] = None
    bind_us: float = 0.0


def _units(nbytes: int) -> int:
    return -(-int(nbytes) // SIZE_UNIT)


def _own_time_after_idle(tl: pd.DataFrame, name: str) -> Dict[int, List[float]]:
    """Per API call ``name`` in a timeline: its end less the end of the last kernel that ended
    before it (its own time once the GPU was idle), grouped by strategy; {0: [...]}."""
    out: List[float] = []
    for _, sub in tl.groupby("strategy", sort=False):
        kernels = sub[sub.kind.isin(["kernel", "memset"])]
        for r in sub[sub.name == name].itertuples():
            before = kernels[kernels.end_us <= r.end_us].end_us
            idle_from = max(r.start_us, float(before.max()) if len(before) else r.start_us)
            out.append(r.end_us - idle_from)
    return {0: out}


#: the columns a recorded plan's row is read from (`PlanRow`); a table's other columns are left out
#: before its rows are walked (pandas' ``itertuples`` reads every column of every row it walks)
PLAN_COLUMNS = ("plan_index", "plan_name", "workspace_bytes")
#: ... and a recorded kernel's (`Kernel`, with the launches per call and the call's host time)
KERNEL_COLUMNS = ("kernel", "role", "kernel_us", "launches_per_call", "host_us")


class Recorded:
    """The numbers one recording holds, for a simulated GPU.

    Args:
        recording: a `labkit.store.recordings.Recording`, or the name of a shipped one.
        calibration: a sim_costs CSV's table; default data/bench/sim_costs_<gpu slug>.csv when it
            exists; False for none (the recording alone).
    """

    def __init__(self, recording, calibration=None):
        self.recording = recordings.named(recording) if isinstance(recording, str) else recording
        meta = self.recording.metadata
        self.gpu = str(meta.get("gpu") or self.recording.name)
        self.slug = gpu_slug(self.gpu)
        self.memory_bytes = int(meta.get("gpu_memory_bytes") or 0)
        self.label = f"simulated from the {self.gpu} recording"
        if calibration is None:
            path = self.recording.path.parent.parent / "bench" / f"sim_costs_{self.slug}.csv"
            calibration = pd.read_csv(path) if path.is_file() else None
        self.calibration = (
            Calibration(calibration, self.slug)
            if calibration is not None and calibration is not False
            else None
        )
        self._calls: Dict[Tuple[str, int], CallTiming] = {}
        self._solo: set = set()  # convolutions whose kernels ran beside another stream's at solo speed
        self._plans: Dict[str, Tuple[List[PlanRow], int, str]] = {}
        self._timings: Dict[Tuple[str, int], CallTiming] = {}
        self._replay: Dict[Tuple[str, str], float] = {}  # (label, plan name) -> GPU us per replayed call
        self._host: Dict[Tuple[str, int], List[float]] = {}
        self._launch: Dict[
            Tuple[str, int], Tuple[float, str]
        ] = {}  # (label, plan) -> (host us a call, source)
        self._read()

    def _table(self, name: str) -> Optional[pd.DataFrame]:
        return self.recording.table(name) if name in self.recording.experiments() else None

    # -- reading --
    def _read(self) -> None:
        k = self._table("kernels")
        if k is not None:
            for label, sub in k[k.status == "ok"].groupby("spec_label", sort=False):
                rows = sub.drop_duplicates("plan_index").sort_values("plan_index")[list(PLAN_COLUMNS)]
                plans = [
                    PlanRow(int(r.plan_index), str(r.plan_name), int(r.workspace_bytes))
                    for r in rows.itertuples()
                ]
                self._plans[label] = (plans, plans[0].index, "kernels.csv")
                for p, prow in sub[["plan_index", *KERNEL_COLUMNS]].groupby("plan_index", sort=False):
                    ks = [
                        Kernel(str(r.kernel), str(r.role), float(r.kernel_us))
                        for r in prow.itertuples()
                        for _ in range(max(1, round(float(r.launches_per_call))))
                    ]
                    self._timings[label, int(p)] = CallTiming(
                        tuple(ks), float(prow.host_us.iloc[0]), "kernels.csv"
                    )
        plans = self._table("plans")
        if plans is not None:
            for r in plans.loc[plans.status == "ok", ["request", "plan_name", "gpu_us"]].itertuples():
                spec = ConvSpec.from_dict(json.loads(r.request)["spec"])
                self._replay[spec.label, str(r.plan_name)] = float(r.gpu_us)
        _read_race(self)
        _read_network(self)
        _read_host_costs(self)

    # -- lookups --
    def plans(self, spec: ConvSpec) -> Tuple[List[PlanRow], int]:
        """A convolution's recorded plans, in the heuristic's order, and the default plan's index.

        Args:
            spec: the convolution.

        Returns:
            (plans, default index); `labkit.NotRecorded` when the recording has none of its plans.
        """
        got = self._plans.get(spec.label)
        if got is None:
            raise NotRecorded(
                f"plans for {spec.label} in the {self.gpu} recording",
                f"record its kernels on that GPU (`python -m labkit record --only kernels`, lesson 10) or "
                f"{CALIBRATE.format(slug=self.slug)}",
            )
        return got[0], got[1]

    def call(self, spec: ConvSpec, plan_index: int) -> CallTiming:
        """What one call of plan ``plan_index`` runs (`CallTiming`); `labkit.NotRecorded` if unknown.

        The calibration first (`CALIBRATED`): its launch time, its GPU time per call (the recorded
        kernels scaled to it, in their recorded proportions), its speed-up on several streams and its
        bind time; the recording for the rest.

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            The `CallTiming`, read once and kept.
        """
        key = (spec.label, int(plan_index))
        got = self._calls.get(key)
        if got is None:
            got = self._calls[key] = self._call(spec, int(plan_index))
        return got

    def _replayed_us(self, spec: ConvSpec, plan_index: int) -> Optional[float]:
        """The plans experiment's GPU time per call of this plan, by CUDA-graph replay (plans.csv).

        Args:
            spec: the convolution.
            plan_index: its plan's index.

        Returns:
            Microseconds per call; None where the recording has no such row.
        """
        plans = self._plans.get(spec.label)
        name = next((p.name for p in plans[0] if p.index == plan_index), None) if plans else None
        return self._replay.get((spec.label, name)) if name else None

    def _call(self, spec: ConvSpec, plan_index: int) -> CallTiming:
        timing = self._timings.get((spec.label, plan_index))
        kernels = timing.kernels if timing else None
        cal, sources = self.calibration, []
        launch = cal.launch(spec, plan_index) if cal else None
        by_streams = cal.gpu_by_streams(spec, plan_index) if cal else {}
        replay = self._replayed_us(spec, plan_index) if kernels else None
        if 1 in by_streams:  # the recorded kernels, in their shares of the measured time per call
            kernels = _in_shares_of(kernels, by_streams[1], plan_index)
            sources.append(f"sim_costs_{self.slug}.csv call_gpu (GPU time, kernels in their recorded shares)")
        elif replay is not None:
            kernels = _in_shares_of(kernels, replay, plan_index)
            sources.append("plans.csv gpu_us (GPU time per replayed call, kernels in their recorded shares)")
        elif kernels is None and cal and cal.one_call_gpu_us(spec, plan_index) is not None:
            kernels = (Kernel(f"plan {plan_index}", "whole call", cal.one_call_gpu_us(spec, plan_index)),)
        if kernels is None:
            raise NotRecorded(
                f"kernels of plan {plan_index} of {spec.label} in the {self.gpu} recording",
                f"{CALIBRATE.format(slug=self.slug)} with this convolution in its sequence",
            )
        if launch is not None:
            host = launch[0]
            sources.append(f"sim_costs_{self.slug}.csv {launch[1]} (launch)")
        elif (spec.label, plan_index) in self._launch:
            host, source = self._launch[spec.label, plan_index]
            sources.append(f"{source} (launch)")
        else:
            host = timing.host_us
        if timing is not None:
            sources.insert(0, f"{timing.source} (kernels)")
        speedup = {k: by_streams[1] / v for k, v in by_streams.items() if k > 1 and 1 in by_streams and v}
        if not speedup and spec.label in self._solo:
            speedup = {2: 2.0}  # race_timeline.csv: beside another stream at their solo speed
        bind_us = cal.bind_us(spec, plan_index) if cal else 0.0
        return CallTiming(tuple(kernels), float(host), ", ".join(sources), speedup or None, bind_us)

    def graph_launch_us(self, calls) -> float:
        """Host time of one cudaGraphLaunch of a graph of ``calls``: the calibration's
        (`Calibration.graph_launch_us`), else ``graph_node`` per kernel (`SOURCES`).

        Args:
            calls: the graph's calls, as (`labkit.ConvSpec`, plan index, kernels) triples.

        Returns:
            Microseconds; `labkit.NotRecorded` when a number is missing.
        """
        got = self.calibration.graph_launch_us([(s, p) for s, p, _ in calls]) if self.calibration else None
        return got if got is not None else sum(k for _, _, k in calls) * self.host_us("graph_node")

    def malloc_waits(self, nbytes: int) -> bool:
        """Whether cudaMalloc of ``nbytes`` waits for a busy stream (rule 6;
        `Calibration.malloc_waits`; False without a calibration).

        Args:
            nbytes: the cudaMalloc's size, bytes.

        Returns:
            Whether it waits.
        """
        return bool(self.calibration and self.calibration.malloc_waits(nbytes))

    def host_us(self, call: str, nbytes: int = 0) -> float:
        """The host time of one ``call`` (a `SOURCES` key or a CUDA call's name), of ``nbytes`` where
        its cost depends on the size (looked up in units of `SIZE_UNIT` bytes).

        Args:
            call: e.g. "cudaMalloc", "cudaEventRecord", "caching_pool".
            nbytes: the size, for allocations; 0 otherwise.

        Returns:
            The median recorded time, microseconds; `labkit.NotRecorded` when there is none.
        """
        samples = self._host.get((call, _units(nbytes) if nbytes else 0))
        if not samples:
            size = f" of {nbytes:,} B" if nbytes else ""
            what = f"host time of {call}{size} on the {self.gpu}"
            raise NotRecorded(what, CALIBRATE.format(slug=self.slug))
        return float(statistics.median(samples))

    def source(self, spec: ConvSpec) -> str:
        """Which file a convolution's plans come from.

        Args:
            spec: the convolution.

        Returns:
            The file (e.g. "kernels.csv", "network_report.csv resnet50"); "" when none holds them.
        """
        got = self._plans.get(spec.label)
        return got[2] if got else ""


def _in_shares_of(kernels, us: float, plan_index: int) -> tuple:
    """A call's recorded kernels scaled to take ``us`` together, each in its recorded share.

    Args:
        kernels: the recorded `Kernel` s (None or empty: none recorded).
        us: the call's GPU time, microseconds.
        plan_index: its plan's index (names the one span where no kernel is recorded).

    Returns:
        The scaled kernels; one "whole call" span of ``us`` where none was recorded.
    """
    total = sum(k.us for k in kernels) if kernels else 0.0
    if not total:
        return (Kernel(f"plan {plan_index}", "whole call", us),)
    return tuple(Kernel(k.name, k.role, k.us * us / total) for k in kernels)


def _read_race(self: "Recorded") -> None:
    """Lesson 06's race: its plan, its kernels and launch time (`SOURCES` "race")."""
    race, tl = self._table("race"), self._table("race_timeline")
    if race is None or tl is None:
        return
    label = str(race.spec_label.iloc[0])
    row = race.iloc[0]
    py = tl[(tl.launch == "python") & (tl.streams == 2)]
    s1 = py[(py.kind == "kernel") & (py.row == "stream 1")].sort_values("start_us")
    calls = int(py.runs.iloc[0]) // 2 if len(py) else 0
    if not calls or label in self._plans:
        return
    per_call = len(s1) // calls
    first = s1.head(per_call)
    med = s1.groupby("name").dur_us.median()
    ks = tuple(Kernel(str(r.name), str(r.role), float(med[r.name])) for r in first.itertuples())
    launches = py[(py.kind == "api") & py.name.str.startswith("cudaLaunch")]
    host = (float(launches.end_us.max()) - float(launches.start_us.min())) / (2 * calls)
    plan = PlanRow(int(row.plan_index), f"plan {int(row.plan_index)}", int(row.workspace_bytes))
    self._plans[label] = ([plan], plan.index, "race.csv")
    self._timings[label, plan.index] = CallTiming(ks, host, "race_timeline.csv")
    self._solo.add(label)
    graph = tl[(tl.launch == "graph") & (tl.streams == 2)]
    launches = graph[graph.name == "cudaGraphLaunch"]
    if len(launches):
        nodes = len(graph[graph.kind.isin(["kernel", "memset"])]) / len(launches)
        self._host[("graph_node", 0)] = [float(d) / nodes for d in launches.dur_us]


def _read_network(self: "Recorded") -> None:
    """The networks' layers: plans, one span per call, launch time (`SOURCES` "network")."""
    net = self._table("network_report")
    if net is None:
        return
    for request, sub in net.groupby("request", sort=False):
        host = sub[(sub.table == "strategies") & (sub.strategy == "preallocated")].host_us_per_call
        layers = sub[sub.table == "layers"].drop_duplicates("spec")
        heuristic = dict(zip(layers.spec, layers.heuristic_plan_index))
        plans = sub[(sub.table == "plans") & (sub.status == "ok")]
        for label, p in plans.groupby("spec", sort=False):
            if label in self._plans or label not in heuristic or not len(host):
                continue
            rows = p.sort_values("plan_index")[[*PLAN_COLUMNS, "gpu_us"]]
            self._plans[label] = (
                [
                    PlanRow(int(r.plan_index), str(r.plan_name), int(r.workspace_bytes))
                    for r in rows.itertuples()
                ],
                int(heuristic[label]),
                f"network_report.csv {json.loads(request).get('net')}",
            )
            for r in rows.itertuples():
                span = Kernel(
                    f"plan {r.plan_name}", "whole call (its kernels are not recorded)", float(r.gpu_us)
                )
                self._timings[label, int(r.plan_index)] = CallTiming(
                    (span,), float(host.iloc[0]), "network_report.csv"
                )


def _read_host_costs(self: "Recorded") -> None:
    """The host calls' times: the recording's, then the calibration's (`SOURCES`)."""
    tl, st = self._table("strategy_timeline"), self._table("strategies")
    h = self._host
    if st is not None:
        ok = st[(st.status == "ok") & (st.workload != "pressure")]
        quiet = ok[(ok.workload == "one_conv") & (ok.alloc_calls == 0) & (ok.strategy != "malloc_per_call")]
        if len(quiet) and ONE_CONV.label in self._plans:  # its default plan ran (no fallback)
            launch = statistics.median((quiet.median_us - quiet.strategy_us_per_call).tolist())
            self._launch[ONE_CONV.label, self._plans[ONE_CONV.label][1]] = (
                float(launch),
                "strategies.csv",
            )
        mpc = ok[(ok.strategy == "malloc_per_call") & (ok.workload == "one_conv")]
        if tl is not None and len(mpc):
            size = int(mpc.peak_bytes.iloc[0])
            m = tl[tl.strategy == "malloc_per_call"]
            h[("cudaMalloc", _units(size))] = [float(v) for v in m[m.name == "cudaMalloc"].dur_us]
            h[("cudaFree", _units(size))] = _own_time_after_idle(m, "cudaFree")[0]
        single = ok[
            ok.strategy.str.match(r"(preallocated|fixed_arena|keyed_cache|scratchpad)")
            & (ok.warmup_alloc_calls == 1)
        ]
        warm: Dict[Tuple[str, int], List[float]] = {}
        for r in single.itertuples():  # a size the timeline lacks: the warm-ups' single cudaMalloc
            warm.setdefault(("cudaMalloc", _units(r.peak_bytes)), []).append(float(r.warmup_alloc_us_total))
        for key, samples in warm.items():
            h.setdefault(key, samples)
        for kind, name in (("caching_pool", "cupy_pool"), ("async_pool", "async_pool")):
            rows = ok[(ok.strategy == name) & (ok.alloc_calls > 0)]
            pairs = (rows.alloc_us_total / rows.alloc_calls).tolist()
            if pairs:
                h[(kind, 0)] = [statistics.median(pairs)]
            if kind == "async_pool":
                sp = ok[ok.strategy == "scratchpad_per_stream"]
                largest = dict(zip(sp.workload, sp.peak_bytes))
                for r, pair in zip(rows.itertuples(), pairs):
                    one_chunk = -(-int(largest.get(r.workload, -1)) // ASYNC_CHUNK) * ASYNC_CHUNK
                    if r.warmup_alloc_calls >= 1 and r.peak_bytes == one_chunk:
                        grow = r.warmup_alloc_us_total - (r.warmup_alloc_calls - 1) * pair
                        h.setdefault(("async_pool_grow", _units(r.peak_bytes)), []).append(float(grow))
    if tl is not None:
        h[("cudaStreamSynchronize", 0)] = _own_time_after_idle(tl, "cudaStreamSynchronize")[0]
    if self.calibration is not None:  # measured for the simulator: first
        for call, nbytes, us in self.calibration.host_costs():
            h[(call, _units(nbytes) if nbytes == nbytes and nbytes else 0)] = [us]


_loaded: Dict[str, Recorded] = {}


def load(recording) -> Recorded:
    """The `Recorded` of a recording, read once per process (reading takes a second or two).

    Args:
        recording: a shipped recording's name or a `labkit.store.recordings.Recording`.

    Returns:
        The `Recorded`.
    """
    rec = recordings.named(recording) if isinstance(recording, str) else recording
    got = _loaded.get(str(rec.path))
    if got is None:
        got = _loaded[str(rec.path)] = Recorded(rec)
    return got
