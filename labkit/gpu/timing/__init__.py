"""Timing on the GPU. `measure` times a call with CUDA events (warm-up, repeats, the spread),
`collector` holds Python's garbage collector off while a CUDA graph is captured, `autotune` times
every plan of a graph and picks the fastest (`stops`: when it stops timing a plan and which plans
it times again, without CuPy), `kernel_keys` names a kernel the same way across traces, `trace`
records what the GPU and the CUDA API did (CUPTI), and `ranges` names labkit's steps on an Nsight
Systems timeline (NVTX). It sits above `cudnn` (autotune times its plans) and below `device`, whose
CUDA implementation captures CUDA graphs with `measure`.
"""
