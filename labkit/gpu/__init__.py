"""The GPU core, in rooms by concept. Modules that need CuPy import it themselves; importing a package
here imports no CuPy, so ``labkit.gpu.checks.reference`` works without a GPU.

* `device`: the seam the strategies and the `Runner` reach a GPU through (real or simulated),
  `memory` (allocations, guarded buffers) and `numerics` (storage formats);
* `host`: the machine around the GPU: `lock` (one measurement per GPU), `contention` and
  `conditions` (what the GPU was doing), `spread` (a class's GPUs), `isolated` (steps in a process
  that can be stopped);
* `cudnn`: frontend graphs and their plans: `frontend` (a graph's definition and planning),
  `conv_graph` (a built graph), `checked_plans`, `bound` (one plan ready to launch), `operands`,
  `graph_cache`, `saved_plans`, `compiled_plans`, `builds` and `build_pool` (runtime-compiled plans
  built in worker processes), `buildlog` (cuDNN's own log), `unfused` (the epilogue as separate
  kernels);
* `checks`: right results: `reference` (float64 convolutions), `plan_checks`, `reference_runs`,
  `verify`, `wrong_plans`;
* `timing`: `measure`, `collector`, `autotune`, `kernel_warmup`, `trace` (CUPTI), `ranges` (NVTX);
* `workspaces`: `workspace` (the strategies), `runner`, `workloads`, `concurrency` (the
  shared-scratchpad race), `strategy_check`;
* `classic`: the classic API, `cudnn_library` and `legacy`.
"""
