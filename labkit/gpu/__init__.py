"""The GPU core, in rooms by concept, each importing only the rooms listed before it (bottom to
top; tests/test_gpu_rooms.py holds the order). Modules that need CuPy import it themselves;
importing a package here imports no CuPy, so ``labkit.gpu.checks.reference`` works without a GPU.

* `host`: the machine around the GPU: `lock` (one measurement per GPU), `contention` and
  `conditions` (what the GPU was doing), `spread` (a class's GPUs), `isolated` (steps in a process
  that can be stopped);
* `buffers`: what a device buffer is: `memory` (allocations, guarded buffers), `numerics` (storage
  formats), `sizes` (a request's byte count, checked);
* `checks`: what a right result is: `reference` (float64 convolutions, tolerances) and
  `plan_checks` (the verdict book);
* `classic`: the classic API, `cudnn_library` and `legacy`;
* `cudnn`: frontend graphs and their plans: `frontend` (a graph's definition and planning),
  `conv_graph` (a built graph), `checked_plans` and `reference_runs` (each plan admitted after one
  run against float64), `bound` (one plan ready to launch), `operands`, `graph_cache`,
  `saved_plans`, `compiled_plans`, `builds` and `build_pool` (runtime-compiled plans built in
  worker processes), `buildlog` (cuDNN's own log), `unfused` (the epilogue as separate kernels);
* `audits`: checks of plans from outside their admission: `verify` (one plan on fresh inputs),
  `wrong_plans` (the plans cuDNN gets wrong, with their smallest reproductions);
* `timing`: `measure`, `collector`, `autotune` (`stops`: its bounds, no CuPy), `kernel_keys`,
  `trace` (CUPTI), `ranges` (NVTX);
* `device`: the seam the strategies and the `Runner` reach a GPU through (real or simulated):
  `base` (its interface), `cuda` (this GPU), and the device in use (`current`, `use`);
* `workspaces`: `workspace` (the strategies), `runner`, `workloads`, `concurrency` (the
  shared-scratchpad race), `strategy_check`, `labels`;
* `report_steps` and `worker_warmup`, above every room: the network report's steps, run in its
  worker process, and that worker made ready before its first step;
* `kernel_warmup`, above every room: compiles at set-up the kernels a first visit would, of all of
  them.
"""
