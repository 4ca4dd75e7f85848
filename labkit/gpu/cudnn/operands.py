"""`Operands`: the device tensors one convolution of a `ConvSpec` runs on.

Seeded random inputs (every role a direction reads, plus ``b``/``z`` for a fused epilogue), their
exact float64 values in logical NCHW order (what cuDNN reads, for checking results against the
reference), and the output poisoned with NaN bit patterns so an element cuDNN did not write
cannot pass a check. They are written on the current stream and complete before the constructor
(and `Operands.poison_output`) returns, so a convolution on any stream finds them written: a
non-blocking stream, such as a `labkit.gpu.workspaces.runner.Runner`'s, does not wait for the default one.
Tensors are held in storage order for the spec's layout (`storage_shape`); sizes are in bytes
(``nbytes``; an `OutOfMemory` names the bytes asked for and free).
"""

from __future__ import annotations

from typing import Dict

import cupy
import numpy

from ...errors import OutOfMemory
from ...spec import ConvSpec
from ..buffers import memory, numerics
from .frontend import OUTPUT_ROLE, check_epilogue, logical_view, role_dtype, role_shapes, storage_shape


class Operands:
    """The device tensors one convolution runs on.

    The inputs are seeded random values (``exact`` holds their float64 values, logical NCHW, as cuDNN
    reads them); the output is poisoned with NaN bit patterns, so an unwritten element cannot pass a
    check.

    Args:
        spec: the convolution.
        epilogue: one of `labkit.gpu.cudnn.frontend.EPILOGUES`; adds ``b`` (and ``z``).
        seed: the inputs' seed (each role gets its own, derived from it).
    """

    def __init__(self, spec: ConvSpec, epilogue: str = "none", *, seed: int = 0):
        self.spec, self.epilogue = spec, check_epilogue(spec, epilogue)
        self.output_role = OUTPUT_ROLE[spec.direction]
        self.arrays: Dict[str, cupy.ndarray] = {}
        self.exact: Dict[str, cupy.ndarray] = {}
        self.seeds: Dict[str, int] = {}
        failed = None
        try:
            for i, (role, shape) in enumerate(role_shapes(spec, epilogue).items()):
                dtype = role_dtype(spec, role)
                sshape = storage_shape(shape, spec.layout)
                if role == self.output_role:
                    arr = memory.empty(sshape, numerics.storage_dtype(dtype), f"{role} tensor")
                    arr.view(cupy.uint8)[...] = 0xFF  # NaN in every float format
                    self.arrays[role] = arr
                    continue
                self.seeds[role] = seed * 16 + i
                storage, exact = numerics.random_inputs(sshape, dtype, cupy, seed=self.seeds[role])
                self.arrays[role] = storage
                self.exact[role] = logical_view(exact, spec.layout)
        except cupy.cuda.memory.OutOfMemoryError:
            failed = (role, 8 * int(numpy.prod(sshape)))  # the float64 copy is the largest part
        except OutOfMemory as exc:
            failed = (role, exc.requested_bytes)
        except Exception:
            self._drop()
            raise
        if failed is not None:  # raised outside the except block: no traceback keeps tensors alive
            self._drop()
            raise OutOfMemory(f"{failed[0]} tensor of {spec.label}", failed[1], memory.free_bytes())
        cupy.cuda.get_current_stream().synchronize()  # written before any stream reads them

    def _drop(self) -> None:
        self.arrays.clear()
        self.exact.clear()
        cupy.get_default_memory_pool().free_all_blocks()

    def unrounded(self, role: str) -> cupy.ndarray:
        """A role's input before rounding to the dtype, regenerated from its seed.

        It is what an ideal, infinitely precise convolution would have been given.

        Args:
            role: an input's role, a key of ``seeds``.

        Returns:
            The values in float64, logical NCHW.
        """
        storage_shape_ = self.arrays[role].shape
        values = numerics.unrounded_values(storage_shape_, self.seeds[role], cupy)
        return logical_view(values, self.spec.layout)

    @property
    def nbytes(self) -> int:
        """Device bytes the tensors take (the float64 copies not counted)."""
        return sum(int(a.nbytes) for a in self.arrays.values())

    def output(self) -> cupy.ndarray:
        """The written tensor.

        Returns:
            Its values in float64, logical NCHW.
        """
        arr = self.arrays[self.output_role]
        return logical_view(numerics.decode(arr, role_dtype(self.spec, self.output_role)), self.spec.layout)

    def poison_output(self, *, wait: bool = True) -> None:
        """Fill the output with 0xFF bytes (NaN in every float format): an unwritten element fails a check.

        Args:
            wait: the fill completes before this returns, so it cannot land on the output of a
                convolution that another stream runs next. False leaves it on the current stream:
                for a caller whose convolution runs there too (`labkit.gpu.cudnn.reference_runs`).
        """
        self.arrays[self.output_role].view(cupy.uint8)[...] = 0xFF
        if wait:
            cupy.cuda.get_current_stream().synchronize()
