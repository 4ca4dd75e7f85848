"""Checks of cuDNN's plans from outside their admission: `verify` runs one plan of a convolution
on fresh random inputs against float64 (``check_plan``), and `wrong_plans` keeps the plans cuDNN
gets wrong with their smallest reproductions (what a maintainer reports, re-checked by ``python -m
labkit wrong-plans``). It sits above `cudnn`, whose graphs it builds and runs; a plan's own
admission (one run against float64 before it is handed out) is `labkit.gpu.cudnn.checked_plans`
and `labkit.gpu.cudnn.reference_runs`, so a change to plan building stays in `cudnn`.
"""
