"""Where a panel's build spends its time (live, this GPU): cProfile of building the panel of each
experiment named, in one process, after ``import labkit`` (run `python -m labkit fill --quick`
first to see a build answered from this GPU's recording).

    python3 scripts/probe_panel_build.py algorithms network_report
"""
import cProfile
import io
import pstats
import sys
import time

from labkit.present import widgets


def main(names):
    for name in names:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        p = widgets.panel(name)
        prof.disable()
        took = (time.perf_counter() - t0) * 1000
        print(f"== {name}: built in {took:.0f} ms (first paint {p.first_paint_ms:.0f} ms); {p.status.value[-160:]}")
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(28)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main(sys.argv[1:] or ["algorithms", "network_report"])
