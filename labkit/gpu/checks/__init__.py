"""What a right result is, below the plans it judges: `reference` computes convolutions in float64
(NumPy on the CPU or CuPy on the GPU, no cuDNN) and the tolerance each dtype is held to
(``tolerance_for``), and `plan_checks` keeps the verdicts (the book: one per convolution and plan;
bookkeeping only, no CuPy). It sits below `cudnn`, which admits a plan only after its output
matched this reference (`labkit.gpu.cudnn.reference_runs`) and saves or reuses plans by these
verdicts; the checks that run plans themselves are `cudnn.reference_runs` and `labkit.gpu.audits`.
"""
