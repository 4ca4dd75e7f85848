"""The machine around the GPU: whose turn it is and what else was running. `lock` gives one
measurement at a time per GPU across processes and users, `contention` (NVML's per-process
utilisation) and `conditions` (clocks, power, temperature, throttling) say what the GPU was doing
while labkit measured, `spread` picks the GPU of a multi-GPU host each learner's server gets, and
`isolated` runs steps in a worker process that can be stopped from outside, and `context` makes or
asks after a process's CUDA context without CuPy. Nothing here builds or runs a convolution.
"""
