"""`Runner`: runs convolutions with workspaces from a strategy, falling back to smaller plans.

A `Runner` asks its `labkit.gpu.workspaces.workspace.Strategy` for each call's workspace, never hands cuDNN
fewer bytes than the plan asked for (it raises `WorkspaceTooSmall` when a strategy offers less), and
under memory pressure (`OutOfMemory`, `ArenaTooSmall`) falls back to the next plan with a smaller
workspace, as PyTorch and TensorFlow do; each call's `CallRecord` says which plan ran and why.
Only plans checked against float64 run (`ConvGraph.runnable`): when the heuristic's pick
computes wrong results, its next correct plan runs and the record says so (``heuristic_wrong``).

The runner reaches the GPU through its strategy's device (`labkit.gpu.device`): on this machine's
GPU it runs cuDNN; on a simulated one (`labkit.simgpu`) the same calls replay a recording. Sizes
in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ...errors import ArenaTooSmall, InvalidSpec, LabkitError, OutOfMemory
from ...spec import ConvSpec
from ...store.keys import Request
from .workspace import Strategy


class WorkspaceTooSmall(LabkitError):
    """A strategy handed out fewer bytes than the plan needs (e.g. a cache key without dtype or layout).

    Args:
        strategy: the strategy's name.
        req: the request it answered.
        got: the bytes it handed out (``got``; the plan's need is ``needed``).
    """

    def __init__(self, strategy: str, req: Request, got: int):
        self.got, self.needed = got, req.nbytes
        super().__init__(
            f"{strategy} handed out {got:,} B for plan {req.plan_name!r} of {req.spec.label}, which needs "
            f"{req.nbytes:,} B; labkit refused to run it (cuDNN would write past the buffer)"
        )


@dataclass
class CallRecord:
    """What one `Runner.run` did.

    Attributes:
        spec: the convolution.
        plan_index: the plan used.
        workspace_bytes: its workspace.
        fell_back_from: the plan it fell back from for want of workspace; None if none.
        reasons: why each plan before it could not get its workspace.
        heuristic_wrong: "" unless the heuristic's first choice computes wrong results and the
            default plan is its next correct one (`ConvGraph.fell_through`).
    """

    spec: ConvSpec
    plan_index: int
    workspace_bytes: int
    fell_back_from: Optional[int] = None
    reasons: List[str] = field(default_factory=list)
    heuristic_wrong: str = ""


def _candidates(cg, first: int, fallback: bool):
    """Plan ``first``, then (``fallback``) the other plans that compute the right result, in the
    heuristic's order: listed only when the first one's workspace cannot be had."""
    yield cg.plans[first]
    if fallback:
        yield from (p for p in cg.runnable if p.index != first)


class Runner:
    """Runs convolutions with workspaces from a strategy on one stream.

    Plan choices made under memory pressure are never stored as the spec's choice (`choices` holds
    only unconstrained picks). Inputs are made once per spec and reused.

    Args:
        strategy: the workspace strategy (`labkit.gpu.workspaces.workspace`); the runner uses its device.
        stream: a stream of the strategy's device (a CuPy stream on a GPU); default a new
            non-blocking one, owned by the runner.
        fallback: when the chosen plan's workspace cannot be had (`OutOfMemory`, `ArenaTooSmall`), try
            the remaining plans in heuristic order among those needing less, and record it.
        seed: the inputs' seed.
        operands: a dict the caller keeps, (spec key, epilogue) -> `labkit.gpu.cudnn.operands.Operands`,
            filled here and left alone by `close` (several runners in turn over the same specs make
            them once).
    """

    def __init__(
        self,
        strategy: Strategy,
        stream=None,
        *,
        fallback: bool = True,
        seed: int = 0,
        operands: Optional[Dict[tuple, object]] = None,
    ):
        if not isinstance(strategy, Strategy):
            raise InvalidSpec("strategy", strategy, "must be a labkit.workspace.Strategy")
        self.strategy, self.fallback, self.seed = strategy, bool(fallback), seed
        self.device = strategy.device
        self._owns_stream = stream is None
        self.stream = self.device.stream() if stream is None else stream
        self.device.prepare_stream(self.stream)  # now, not under memory pressure later
        self.choices: Dict[tuple, int] = {}
        self._owns_operands = operands is None
        self._operands: Dict[tuple, object] = {} if operands is None else operands
        self._bound: Dict[tuple, object] = {}
        self.fallbacks = 0

    def operands(self, spec: ConvSpec, epilogue: str = "none"):
        """The operands of a convolution, made on first use.

        Args:
            spec: the convolution.
            epilogue: its epilogue.

        Returns:
            The device's operands (`labkit.gpu.cudnn.operands.Operands` on a GPU).
        """
        k = (spec.key, epilogue)
        ops = self._operands.get(k)
        if ops is None:
            ops = self._operands[k] = self.device.operands(spec, epilogue, seed=self.seed)
        return ops

    def choose(self, cg, plan_index: Optional[int] = None) -> int:
        """The plan to try first: given, else the stored unconstrained choice, else the default.

        The default is the heuristic's first choice that computes the right result.

        Args:
            cg: the built graph.
            plan_index: the plan asked for; None for the choice.

        Returns:
            The plan's index; `WrongResult` for a given plan whose result is wrong.
        """
        if plan_index is not None:
            return cg.plan(plan_index).index
        chosen = self.choices.get(cg.key)
        if chosen is None:
            chosen = self.choices[cg.key] = cg.default_plan.index
        return chosen

    def run(self, spec: ConvSpec, plan_index: Optional[int] = None, epilogue: str = "none") -> CallRecord:
        """Run one convolution, enqueued on the stream (not synchronised).

        Args:
            spec: the convolution.
            plan_index: the plan; default `choose`'s.
            epilogue: its epilogue.

        Returns:
            A `CallRecord`; the smallest plan's error when no plan's workspace could be had.
        """
        cg = self.device.graph(spec, epilogue)
        first = self.choose(cg, plan_index)
        reasons, limit, last_error = [], None, None
        for plan in _candidates(cg, first, self.fallback):
            if limit is not None and plan.workspace_bytes >= limit:
                continue
            req = Request(spec, plan.index, plan.name, plan.workspace_bytes, int(self.stream.ptr), epilogue)
            try:
                ptr, got = self.strategy.get(req)
            except (OutOfMemory, ArenaTooSmall) as exc:
                if not self.fallback:
                    raise
                reasons.append(str(exc))
                last_error = exc
                limit = plan.workspace_bytes if limit is None else min(limit, plan.workspace_bytes)
                continue
            if got < req.nbytes:
                self.strategy.put(req, ptr)
                raise WorkspaceTooSmall(self.strategy.name, req, got)
            try:
                self._bind(cg, spec, epilogue, plan.index, ptr).run()
            finally:
                self.strategy.put(req, ptr)
            wrong = cg.fell_through if plan_index is None else ""
            if plan.index != first:
                self.fallbacks += 1
                return CallRecord(spec, plan.index, plan.workspace_bytes, first, reasons, wrong)
            return CallRecord(spec, plan.index, plan.workspace_bytes, heuristic_wrong=wrong)
        raise last_error  # no plan's workspace could be had: the smallest plan's failure

    def _bind(self, cg, spec, epilogue, plan_index, ptr):
        k = (cg.key, plan_index, ptr)
        b = self._bound.get(k)
        if b is None:
            if len(self._bound) > 4096:
                self._bound.clear()
            b = self._bound[k] = cg.bind(self.operands(spec, epilogue).arrays, ptr, plan_index, self.stream)
        return b

    def close(self) -> None:
        """Close the strategy, free the inputs/outputs this runner made (not the caller's
        ``operands``), and (when the runner
        made its own stream) destroy that stream's cuDNN handle."""
        self.stream.synchronize()
        self._bound.clear()
        if self._owns_operands:
            self._operands.clear()
        self.strategy.close()
        if self._owns_stream:
            self.device.release_stream(self.stream)
        self.device.release_cached()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
