"""Run every experiment once on small arguments and print its table (device smoke test)."""

import time
import traceback

import pandas as pd

from labkit import ConvSpec
from labkit import experiments as ex

pd.set_option("display.width", 250)
pd.set_option("display.max_columns", 30)
small = ConvSpec(N=8, C=64, H=28, W=28, K=64)
calls = [
    ("precision", lambda: ex.precision(small)),
    ("layout", lambda: ex.layout(small)),
    ("fusion", lambda: ex.fusion(small)),
    ("plans", lambda: ex.plans(small)),
    ("caps", lambda: ex.caps(small.replace(layout="NCHW"))),
    ("algorithms", lambda: ex.algorithms(small.replace(layout="NCHW"))),
    ("build_cost", lambda: ex.build_cost(small)),
    ("roofline", lambda: ex.roofline()),
    ("sweep", lambda: ex.sweep("C=K", (32, 64, 128), small)),
    ("workspace_sizes", lambda: ex.workspace_sizes(small)),
    ("strategies", lambda: ex.strategies("one_conv", 10)),
    ("race", lambda: ex.race("graph", 2, 256)),
]
for name, fn in calls:
    t0 = time.perf_counter()
    try:
        df = fn()
        print(
            f"== {name} ({time.perf_counter() - t0:.1f} s) attrs={ {k: df.attrs.get(k) for k in ('mode', 'gpu', 'cudnn_backend')} }"
        )
        print(df.to_string(max_colwidth=40))
    except Exception:
        print(f"== {name} FAILED ({time.perf_counter() - t0:.1f} s)")
        traceback.print_exc()
