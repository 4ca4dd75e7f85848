"""Where a panel's build spends its time (this GPU, live; or recorded): a lesson's first cell
(``import labkit``, ``lessons.banner()``: it starts the warm-up thread, `labkit.session.warmup`),
then ``--read`` seconds of a learner reading (default 0), then each panel named, under cProfile:
when the cell got the panel back (its first paint) and when it was whole.

    python3 scripts/probe_panel_build.py [--read S] algorithms network_report
"""
import argparse
import cProfile
import io
import pstats
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--read", type=float, default=0.0, help="seconds between the first cell and the first panel")
    ap.add_argument("panels", nargs="*", default=["algorithms", "network_report"])
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from labkit import lessons, widgets  # noqa: F401  (the lesson's first cell)
    from labkit.session import warmup

    lessons.banner()
    print(f"== first cell: {(time.perf_counter() - t0) * 1000:.0f} ms", flush=True)
    time.sleep(args.read)
    print(f"   warm-up after {args.read:g} s of reading: {warmup.seconds}", flush=True)
    for name in args.panels:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        p = widgets.panel(name)
        shown = (time.perf_counter() - t0) * 1000
        p.wait()
        prof.disable()
        took = (time.perf_counter() - t0) * 1000
        print(f"== {name}: shown at {shown:.0f} ms, whole at {took:.0f} ms; {p.status.value[-160:]}", flush=True)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(28)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])
    print(f"   warm-up at the end: {warmup.seconds}")


if __name__ == "__main__":
    main()
