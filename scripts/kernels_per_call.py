"""Where host dispatch goes: for the ResNet-50 shapes of ``bench vs-torch``, the
autotuned plan's host time per launch next to how many kernels one cuDNN execute launches
(counted with torch.profiler, which sees every kernel of the process through CUPTI), and their
names. Writes data/bench/kernels_per_call_<gpu slug>.csv (with the GPU, the date and the commit).

    python scripts/kernels_per_call.py [--dtypes fp16 fp32] [--layouts NCHW NHWC]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", nargs="+", default=["fp32", "tf32", "fp16", "bf16"])
    p.add_argument("--layouts", nargs="+", default=["NCHW", "NHWC"])
    args = p.parse_args(argv)
    import cupy
    import pandas as pd
    import torch
    from torch.profiler import ProfilerActivity, profile

    from labkit import env
    from labkit.cli.record import git_commit
    from labkit.experiments import resnet50_shapes
    from labkit.gpu.buffers import memory
    from labkit.gpu.cudnn import frontend, graph_cache, operands
    from labkit.gpu.timing import autotune, measure

    env.require_live("counting kernels per call")
    torch.cuda.init()
    rows = []
    for shape, base in resnet50_shapes():
        for d in args.dtypes:
            for lay in args.layouts:
                spec = base.replace(dtype=d, layout=lay)
                cg = graph_cache.get_graph(spec)
                ops = operands.Operands(spec)
                best = autotune.autotune(cg, ops).best_index
                plan = cg.plan(best)
                ws = memory.alloc(plan.workspace_bytes, "workspace")
                stream = cupy.cuda.Stream(non_blocking=True)
                b = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
                host = measure.host_dispatch(b.run, stream).median_us
                calls = 10
                with stream:
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(calls):
                            b.run()
                        stream.synchronize()
                kernels = [e.name for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]
                names = collections.Counter(kernels)
                rows.append(
                    dict(
                        shape=shape,
                        dtype=d,
                        layout=lay,
                        plan=plan.name,
                        host_us=host,
                        kernels_per_call=len(kernels) / calls,
                        kernels="; ".join(f"{n[:60]} x{c // calls}" for n, c in names.most_common(4)),
                    )
                )
                print(rows[-1], flush=True)
                del b, ws, ops
                frontend.release_handle(stream)
        graph_cache.graphs.clear()
        cupy.get_default_memory_pool().free_all_blocks()
    df = pd.DataFrame(rows)
    df["gpu"] = env.environment().gpu_name
    df["date"] = datetime.date.today().isoformat()
    df["labkit_commit"] = git_commit()
    print(df.groupby(["layout", "dtype"])[["host_us", "kernels_per_call"]].median().to_string())
    print(df.groupby("kernels_per_call").host_us.describe()[["count", "50%", "min", "max"]].to_string())
    path = ROOT / "data" / "bench" / f"kernels_per_call_{env.gpu_slug(env.environment().gpu_name)}.csv"
    df.to_csv(path, index=False)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
