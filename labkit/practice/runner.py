"""`PracticeRunner`: the `labkit.gpu.workspaces.runner.Runner` of a hands-on cell, its calls written down by
its `labkit.practice.Practice` (so a check sees what ran between two events)."""

from __future__ import annotations

from ..errors import InvalidSpec
from ..gpu.workspaces.runner import CallRecord, Runner
from ..spec import ConvSpec


class PracticeRunner(Runner):
    """A `Runner` on a new stream of ``practice``'s GPU; each call is logged (`Practice.log`).

    Args:
        practice: the `labkit.practice.Practice`.
        strategy: a workspace strategy made on that GPU.
        **options: the Runner's options (``fallback``, ``seed``).
    """

    def __init__(self, practice, strategy, **options):
        if getattr(strategy, "device", None) is not practice.device:
            raise InvalidSpec(
                "strategy",
                strategy,
                f"must be made on this GPU ({practice.label}): make it in the hands-on cell",
            )
        super().__init__(strategy, **options)
        self.practice = practice
        practice.runners.append(self)

    def run(self, spec: ConvSpec, plan_index=None, epilogue: str = "none") -> CallRecord:
        """`Runner.run`, written down.

        Args:
            spec: the convolution.
            plan_index: the plan; default the Runner's choice.
            epilogue: its epilogue.

        Returns:
            The `CallRecord` (``.plan_index``, ``.workspace_bytes``).
        """
        dev = self.practice.device
        first = len(dev.calls) if self.practice.simulated else 0
        t0 = dev.clock_us()
        rec = super().run(spec, plan_index, epilogue)
        host = dev.clock_us() - t0
        sim = dev.calls[first] if self.practice.simulated and len(dev.calls) > first else None
        plan = dev.graph(spec, epilogue).plan(rec.plan_index)
        self.practice.log(spec, plan, self.stream, None, sim=sim, host_us=host)
        return rec
