"""What a device buffer is, below everything that fills one: `memory` (allocations that turn
out-of-memory into `OutOfMemory`, guarded and poisoned buffers, snapshots of what the device holds;
needs CuPy), `numerics` (each dtype's storage format, exact encode and decode, on NumPy or CuPy
arrays) and `sizes` (a request's byte count, checked; no CuPy). It sits just above `host`: the
float64 reference, cuDNN's operands and workspaces, the classic API's inputs and the device seam
all hold their data in these buffers, so none of them is below it.
"""
