"""The GPU core. Modules that need CuPy import it themselves; this package imports nothing, so
``labkit.gpu.reference`` works without a GPU.

* device: `device` (the seam the strategies and the `Runner` reach a GPU through, real or
  simulated), `memory` (allocations, guarded buffers), `numerics` (storage formats), `operands`
  (one convolution's tensors), `lock` (one measurement per GPU), `spread` (a class's GPUs);
* cuDNN graphs and plans: `engine` (the names callers use, from the modules below), `frontend` (a
  graph's definition and planning), `conv_graph` (a built graph), `graph_cache`, `saved_plans`,
  `bound` (one plan ready to launch), `builds` and `build_pool` (runtime-compiled plans built in
  worker processes), `buildlog` (cuDNN's own log);
* right results: `reference` (float64 convolutions), `reference_runs`, `plan_checks` and
  `checked_plans` (every plan checked against float64 before use), `verify`, `wrong_plans`;
* timing: `measure`, `autotune`, `isolated` (steps in a process that can be stopped),
  `kernel_warmup`, `conditions` and `contention` (what the GPU was doing), `trace` (CUPTI),
  `ranges` (NVTX);
* workspaces: `workspace` (the strategies), `runner`, `workloads`, `concurrency` (the
  shared-scratchpad race), `unfused` (the epilogue as separate kernels);
* the classic API: `cudnn_library` and `legacy`.
"""
