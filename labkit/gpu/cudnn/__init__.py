"""cuDNN frontend graphs and their plans, from a `ConvSpec` to a plan ready to launch. `frontend`
defines and plans a graph (tensor layouts and roles, a handle per stream), `conv_graph` builds it
(`ConvGraph`), `checked_plans` hands out only plans that ran right once against float64 (run and
compared by `reference_runs`), `bound` binds one plan to device pointers (`BoundConv`), `operands`
holds the tensors it runs on;
`graph_cache` keeps built graphs in the process, `saved_plans` and `compiled_plans` keep chosen
plans and runtime-compiled kernels on disk, `builds` and `build_pool` build runtime-compiled plans
in worker processes, `buildlog` reads cuDNN's own log of a build, and `unfused` runs an epilogue as
separate CuPy kernels after the convolution. A change to how plans are built, cached or admitted
stays in this folder: it sits above `host`, `buffers` and `checks` (the float64 reference,
tolerances and the verdict book it admits plans by) and imports nothing above them.
"""
