"""Right results: a plan is timed, chosen, cached or saved only after its output matched a float64
reference. `reference` computes convolutions in float64 (NumPy on the CPU or CuPy on the GPU, no
cuDNN), `plan_checks` keeps the verdicts (one per convolution and plan; bookkeeping only, no CuPy),
`reference_runs` runs a built graph's plans once and compares their outputs, `verify` checks one
plan on fresh random inputs, and `wrong_plans` keeps the plans cuDNN gets wrong with their
smallest reproductions.
"""
