"""The GPU core: device memory, numerics, the float64 reference, cuDNN graphs and plans
(engine, autotune), every plan checked against float64 before use (checked_plans, plan_checks,
reference_runs; the plans cuDNN gets wrong: wrong_plans), timing (measure), result checks
(verify), the classic algorithm API (legacy), the workspace strategies and the workloads they
run, and the shared-scratchpad race (concurrency). Modules that need CuPy import it themselves; this package imports nothing, so
``labkit.gpu.reference`` works without a GPU.
"""
