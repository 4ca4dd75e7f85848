"""`Conv`: one convolution as a hands-on cell runs it on a `labkit.practice.Practice`.

Its plans come from the device (``device.graph``): live, labkit's cuDNN graph with every plan
checked against float64 first; simulated, the recording's plans. Its inputs are made once; each
call writes one of its output slots. `Conv.wrong_outputs` says how many of the outputs written since
the last look are wrong: live, off from the float64 reference by more than the dtype's tolerance (an
unwritten output is NaN, so it is wrong too; ``errors`` keeps each one's error); simulated, marked
corrupt by the simulator's sanitizer (a race, or a workspace too small, freed or never allocated).
Bytes, microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from ..errors import InvalidSpec
from ..gpu.buffers import numerics
from ..gpu.checks import reference
from ..simgpu.lesson_calls import FusedGraph
from .capped import CappedGraph, check_cap
from .fusion import Fused, check_epilogue


def _plan_label(plan) -> str:
    """How a message names a plan: its index, or what a simulated plan whose index is not recorded
    shows instead (`labkit.simgpu.conv.SimPlan.label`)."""
    return getattr(plan, "label", None) or str(plan.index)


@dataclass
class Pending:
    """A call queued while capturing: launched each time its graph is.

    Attributes:
        conv: what it runs (a `Conv`, or a `labkit.practice.layout.Conversion`).
        plan_index: its plan's index (-1 for a conversion's copies).
        output: the output slot it writes.
        workspace: its workspace's address (0 for none).
        flagged: the practice refused or named it when it was queued (the sanitizer's word on it is
            not repeated).
    """

    conv: object
    plan_index: int
    output: int
    workspace: int
    flagged: bool = False


def _whole(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidSpec(name, value, f"must be an int >= {low}")
    return value


def _graph(practice, spec, cap, epilogue: str = "none"):
    """The convolution's graph on ``practice``'s device: every plan, or those within ``cap`` bytes;
    with an epilogue, the fused graph (simulated: `labkit.simgpu.lesson_calls.FusedGraph`)."""
    if epilogue != "none":
        if cap is not None:
            raise InvalidSpec("workspace_cap", cap, "must be None for a fused graph")
        if practice.simulated:
            return FusedGraph(practice.device, spec, epilogue)
        return practice.device.graph(spec, epilogue)
    if cap is None:
        return practice.device.graph(spec)
    if practice.simulated:
        return CappedGraph(practice.device.graph(spec), cap)
    from ..gpu.cudnn import graph_cache  # heavy: imports CuPy (live only)

    return graph_cache.get_graph(spec, workspace_cap=cap)


class Conv:
    """A convolution on a `Practice`: ``.plans``, ``.plan``, ``.run(...)``, ``.wrong_outputs()``.

    Args:
        practice: the `labkit.practice.Practice`.
        spec: the `labkit.ConvSpec`.
        seed: the inputs' seed.
        outputs: how many output slots (each call writes the one it is given).
        workspace_cap: only the plans that need at most this many bytes (`labkit.practice.capped`);
            None for every plan.
        epilogue: "none", or the epilogue fused into one cuDNN graph with the convolution
            ("bias_relu": conv + bias + ReLU, lesson 04; `labkit.practice.fusion`).

    Attributes:
        spec: the convolution.
        plans: the plans that may run, in the heuristic's order (``.index``, ``.name``,
            ``.workspace_bytes``).
        plan: the heuristic's pick (its first plan that computes the right result).
    """

    def __init__(
        self, practice, spec, *, seed: int = 0, outputs: int = 1, workspace_cap=None, epilogue="none"
    ):
        self.practice, self.spec = practice, spec
        self.outputs = _whole("outputs", outputs, 1)
        self.workspace_cap = check_cap(workspace_cap)
        self.epilogue = check_epilogue(epilogue)
        self.graph = _graph(practice, spec, self.workspace_cap, self.epilogue)
        #: what its calls are written down as (a fused graph's label names its epilogue)
        self.logged = spec if self.epilogue == "none" else Fused(spec, self.epilogue)
        self.plans = list(self.graph.runnable)
        self.plan = self.graph.default_plan
        self.operands = practice.device.operands(spec, self.epilogue, seed=_whole("seed", seed, 0))
        self._slots = self._make_slots() if not practice.simulated else []
        self._bound: Dict[tuple, object] = {}
        self._written: List[int] = []  # output slots written since the last look
        self._sim_calls: list = []  # the simulator's records of those calls
        self._expected = None
        #: live: each output's relative error against float64 at the last look (NaN: never written)
        self.errors: List[float] = []

    def __repr__(self) -> str:
        cap = "" if self.workspace_cap is None else f" within {self.workspace_cap:,} B"
        plans = f"{len(self.plans)} plan{'' if len(self.plans) == 1 else 's'}"
        return f"<Conv {self.logged.label}: {plans}{cap}, heuristic's pick {_plan_label(self.plan)}>"

    def _make_slots(self) -> list:
        import cupy  # heavy: CuPy, live only

        first = self.operands.arrays[self.operands.output_role]
        slots = [first] + [cupy.empty_like(first) for _ in range(self.outputs - 1)]
        for s in slots[1:]:
            s.view(cupy.uint8)[...] = 0xFF  # NaN in every float format: an unwritten output is wrong
        cupy.cuda.get_current_stream().synchronize()
        return slots

    def _plan(self, plan):
        if plan is None:
            return self.plan
        index = plan if isinstance(plan, int) and not isinstance(plan, bool) else getattr(plan, "index", None)
        if index is None:
            raise InvalidSpec("plan", plan, "must be one of conv.plans (or its index)")
        return self.graph.plan(index)

    def run(self, workspace: int, *, stream, plan=None, output: int = 0) -> None:
        """Queue one call on ``stream``; it runs later, when the stream gets to it.

        Args:
            workspace: the workspace's address (from ``gpu.allocate``); at least the plan's
                ``workspace_bytes`` must lie there.
            stream: the stream (``gpu.stream()``, or a Runner's).
            plan: one of `plans` (or its index); default the heuristic's pick.
            output: the output slot it writes (0 to ``outputs - 1``).
        """
        p = self._plan(plan)
        if isinstance(output, bool) or not isinstance(output, int) or not 0 <= output < self.outputs:
            raise InvalidSpec("output", output, f"must be an int from 0 to {self.outputs - 1}")
        ptr = int(workspace or 0)
        what = f"a call of plan {_plan_label(p)} of {self.logged.label}"
        practice, raw = self.practice, getattr(stream, "raw", stream)
        before = len(practice.problems)
        runs = practice.workspace_ok(ptr, int(p.workspace_bytes), what)
        flagged = len(practice.problems) > before  # said already: the sanitizer's word on it is not repeated
        if practice.capturing is not None:
            if runs:
                self._bind(p.index, ptr, raw, output).run()
            practice.capturing.append(Pending(self, p.index, output, ptr, flagged))
            return
        first = len(practice.device.calls) if practice.simulated else 0
        t0 = practice.device.clock_us()
        if runs:
            self._bind(p.index, ptr, raw, output).run()
        host = practice.device.clock_us() - t0
        sim = practice.device.calls[first] if practice.simulated else None
        if sim is not None and flagged:
            practice.flagged_calls.add(sim.id)
        practice.log(self.logged, p, stream, ptr, output, sim=sim, host_us=host)
        self.ran(output, sim)

    def _bind(self, plan_index: int, ptr: int, raw_stream, output: int):
        key = (plan_index, ptr, int(raw_stream.ptr), output)
        b = self._bound.get(key)
        if b is None:
            arrays = dict(self.operands.arrays)
            if self._slots:
                arrays[self.operands.output_role] = self._slots[output]
            b = self._bound[key] = self.graph.bind(arrays, ptr, plan_index, raw_stream)
        return b

    def ran(self, output: int, sim_call=None) -> None:
        """Note that a call was launched, for `wrong_outputs` to look at.

        Args:
            output: the output slot it writes.
            sim_call: the simulator's record of it (`labkit.simgpu.SimCall`); None live.
        """
        self._written.append(output)
        if sim_call is not None:
            self._sim_calls.append(sim_call)

    def wrong_outputs(self) -> int:
        """How many of the outputs written since the last look are wrong; the host waits for the
        device first. Live, each slot looked at is poisoned again (NaN) for the next round.

        Returns:
            The count (a slot written twice is looked at once, live; simulated, each call counts).
        """
        self.practice.synchronize()
        self.errors = []
        if self.practice.simulated:
            bad = sum(bool(c.corrupt) for c in self._sim_calls)
            self._sim_calls, self._written = [], []
            return bad
        written, self._written = sorted(set(self._written)), []
        return sum(self._wrong(j) for j in written)

    def _wrong(self, j: int) -> bool:
        """Live: slot ``j`` against the float64 reference, then poisoned again."""
        import cupy  # heavy: CuPy, live only

        from ..gpu.cudnn import reference_runs  # heavy: imports CuPy
        from ..gpu.cudnn.frontend import logical_view, role_dtype  # heavy: CuPy, live only

        if self._expected is None:
            self._expected = reference_runs.expected(self.spec, self.operands)
        role = self.operands.output_role
        slot = self._slots[j]
        got = logical_view(numerics.decode(slot, role_dtype(self.spec, role)), self.spec.layout)
        err = float(reference.relative_error(got, self._expected))
        self.errors.append(err)
        slot.view(cupy.uint8)[...] = 0xFF
        cupy.cuda.get_current_stream().synchronize()
        return not err <= reference.tolerance_for(self.spec)
