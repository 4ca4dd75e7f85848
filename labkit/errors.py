"""Errors raised by labkit. Every one says what was wrong and which rule it broke.

All derive from :class:`LabkitError`, so a notebook can catch one class.
"""

from __future__ import annotations


class LabkitError(Exception):
    """Base class of every error labkit raises on purpose."""


class InvalidSpec(LabkitError, ValueError):
    """A convolution spec (or another argument) breaks a rule; raised before cuDNN sees it.

    Args:
        field: the argument's name (kept as ``field``).
        value: what was given (``value``).
        rule: what is required (``rule``).
    """

    def __init__(self, field: str, value, rule: str):
        self.field, self.value, self.rule = field, value, rule
        super().__init__(f"{field}={value!r}: {rule}")


class Unsupported(LabkitError):
    """cuDNN (or this GPU) cannot run this configuration.

    Args:
        what: the configuration, e.g. a spec's label (``what``).
        reason: cuDNN's own words (``reason``).
    """

    def __init__(self, what: str, reason: str):
        self.what, self.reason = what, reason
        super().__init__(f"{what} is not supported: {reason}")


class OutOfMemory(LabkitError, MemoryError):
    """A device allocation did not fit. Everything labkit took for the request was freed.

    Args:
        what: what the memory was for (``what``).
        requested_bytes: the size asked for, in bytes (``requested_bytes``).
        free_bytes: bytes the device had free then; None if unknown (``free_bytes``).
    """

    def __init__(self, what: str, requested_bytes: int, free_bytes: int | None):
        self.what, self.requested_bytes, self.free_bytes = what, int(requested_bytes), free_bytes
        free = "unknown" if free_bytes is None else f"{free_bytes:,} B ({free_bytes / 2**20:.1f} MiB)"
        super().__init__(
            f"out of device memory for {what}: asked {requested_bytes:,} B "
            f"({requested_bytes / 2**20:.1f} MiB), free {free}"
        )


class ArenaTooSmall(LabkitError):
    """A plan needs more workspace than the fixed arena holds (and fallback is off).

    Args:
        plan: the plan's name (``plan``).
        needed_bytes: the plan's workspace, in bytes (``needed_bytes``).
        arena_bytes: the arena's size, in bytes (``arena_bytes``).
    """

    def __init__(self, plan: str, needed_bytes: int, arena_bytes: int):
        self.plan, self.needed_bytes, self.arena_bytes = plan, int(needed_bytes), int(arena_bytes)
        super().__init__(
            f"plan {plan!r} needs {needed_bytes:,} B of workspace but the arena holds {arena_bytes:,} B; "
            "use a bigger arena or fallback=True to pick a plan that fits"
        )


class TimedOut(LabkitError):
    """A measuring step ran past its time budget and was stopped there.

    The measurement goes on without that step.

    Args:
        what: the step, e.g. "plan 6 (eng1) of fp16 NHWC fprop 16x240x28x28 -> 240 3x3 s2 p1 g240".
        phase: where it was when stopped: "capture", "replay", "build", ...
        seconds: how long it had run, in seconds.
        budget_s: its budget, in seconds.
    """

    def __init__(self, what: str, phase: str, seconds: float, budget_s: float):
        self.what, self.phase, self.seconds, self.budget_s = what, phase, float(seconds), float(budget_s)
        super().__init__(
            f"{what}: timed out after {self.seconds:.1f} s in {phase} (budget {self.budget_s:.1f} s)"
        )


class ModeError(LabkitError):
    """Live mode was asked for (LABKIT_MODE=live or a live-only call) but this machine cannot run it."""


class RecordedDataError(LabkitError):
    """A recording is missing, corrupt, of another schema version, or lacks the requested values.

    Args:
        message: what is wrong.
        path: the file (``path``), or None.
        row: the offending row where one applies (``row``), or None.
        nearest: field -> the recorded values nearest to the request, when a request fell outside
            the recorded grid (``nearest``), or None.
    """

    def __init__(self, message: str, path=None, row: int | None = None, nearest: dict | None = None):
        self.path, self.row, self.nearest, self.message = path, row, nearest, message
        at_row = f", row {row}" if row is not None else ""
        where = f" [{path}{at_row}]" if path else ""
        values = ", ".join(f"{k}={v}" for k, v in (nearest or {}).items())
        near = f"; nearest recorded: {values}" if nearest else ""
        super().__init__(f"{message}{where}{near}")


class WrongResult(Unsupported):
    """A plan computes wrong results for this convolution (run once and compared with the float64
    reference): labkit never times, chooses, caches or saves it. ``reason`` gives its error."""


class NotCapturable(LabkitError):
    """Work that CUDA does not allow inside a CUDA graph capture was asked for while a stream captures.

    Args:
        what: what was asked, e.g. "malloc_per_call's cudaFree" (``what``).
        rule: CUDA's rule, and what to do instead (``rule``).
    """

    def __init__(self, what: str, rule: str):
        self.what, self.rule = what, rule
        super().__init__(f"{what} cannot be captured in a CUDA graph: {rule}")


class NotRecorded(LabkitError):
    """A simulated GPU needs a number its recording does not hold; it never makes one up.

    Args:
        what: the number, e.g. "host time of cudaEventRecord".
        record: what a GPU run would have to record for it (``record``).
    """

    def __init__(self, what: str, record: str):
        self.what, self.record = what, record
        super().__init__(f"the recording has no {what}: {record}")


def status_row(exc: Exception) -> dict:
    """A row's status and reason for a labkit error.

    Args:
        exc: the error.

    Returns:
        ``status`` (wrong_result, unsupported, out_of_memory, timed_out or error) and ``reason``
        (its message, at most 300 characters).
    """
    kind = (
        "wrong_result"
        if isinstance(exc, WrongResult)
        else "unsupported"
        if isinstance(exc, Unsupported)
        else "out_of_memory"
        if isinstance(exc, OutOfMemory)
        else "timed_out"
        if isinstance(exc, TimedOut)
        else "error"
    )
    return {"status": kind, "reason": str(exc)[:300]}
