"""What a fresh kernel's first panel costs, one piece after another in one thread (no warm-up
thread, so no piece waits for the GIL behind another): labkit's imports, the GPU question
(`labkit.env.mode`), each of the warm-up's steps (`labkit.session.warmup`: pandas, plotly's
figures and widget class, the GPU's set-up), then the panels named, built with nothing left to
import. The sum is the GIL-bound work a panel built at once after the first cell waits for.

    python3 scripts/probe_import_costs.py [panel ...]      # default: algorithms network_report
    python3 -X importtime scripts/probe_import_costs.py 2> importtime.txt
"""

import sys
import time


def main(argv=None):
    panels = (argv if argv is not None else sys.argv[1:]) or ["algorithms", "network_report"]
    costs = {}
    t0 = time.perf_counter()

    def took(name):
        nonlocal t0
        now = time.perf_counter()
        costs[name] = (now - t0) * 1000
        t0 = now

    import labkit  # noqa: F401
    from labkit import check, env, lessons, widgets  # noqa: F401
    from labkit.session import warmup

    took("labkit's imports")
    live = env.mode().live
    took("the GPU question (env.mode)")
    skipped = warmup._skip_iri_grammar()
    warmup._tables()
    took("pandas")
    warmup._figures()
    took("plotly's figures and FigureWidget class")
    if skipped:
        warmup._unskip_iri_grammar()
    if live:
        warmup._gpu()
        took("the GPU's set-up (CUDA context, cuDNN handle)")
    for name in panels:
        p = widgets.panel(name)
        p.wait()
        took(f"panel {name}")
    width = max(map(len, costs))
    for name, ms in costs.items():
        print(f"{name:<{width}}  {ms:7.0f} ms")
    print(f"{'sum':<{width}}  {sum(costs.values()):7.0f} ms")


if __name__ == "__main__":
    main()
