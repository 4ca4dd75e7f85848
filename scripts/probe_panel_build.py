"""Where a panel's build spends its time (this GPU, live; or recorded): a lesson's first cell
(``import labkit``, ``lessons.banner()``: it starts the warm-up thread, `labkit.session.warmup`),
then ``--read`` seconds of a learner reading (default 0), then each panel named, under cProfile:
when the cell got the panel back (its first paint) and when it was whole. Each of these counts as a
running cell (`labkit.session.prefetch.Prefetcher.cell_started`), as IPython's events make it in a
notebook: the prefetch worker and the warm-up's cupyx step wait for the kernel to be idle.

    python3 scripts/probe_panel_build.py [--read S] [--plain] algorithms network_report
"""

import argparse
import cProfile
import io
import pstats
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--read", type=float, default=0.0, help="seconds between the first cell and the first panel"
    )
    ap.add_argument("--cell-profile", action="store_true", help="the first cell under cProfile too")
    ap.add_argument(
        "--plain", action="store_true", help="no cProfile: the times alone, as a learner waits them"
    )
    ap.add_argument("panels", nargs="*", default=["algorithms", "network_report"])
    args = ap.parse_args(argv)
    cell = cProfile.Profile() if args.cell_profile else None
    t0 = time.perf_counter()
    if cell:
        cell.enable()
    import labkit  # noqa: F401  (the lesson's first cell)
    from labkit import check, lessons, widgets  # noqa: F401
    from labkit.session import warmup
    from labkit.session.prefetch import PREFETCHER

    t1 = time.perf_counter()
    PREFETCHER.cell_started()  # each step a cell, as IPython's events tell labkit in a notebook
    lessons.banner()
    PREFETCHER.cell_finished()
    if cell:
        cell.disable()
    print(
        f"== first cell: {(time.perf_counter() - t0) * 1000:.0f} ms (imports {(t1 - t0) * 1000:.0f} ms)",
        flush=True,
    )
    if cell:
        _print_profile(cell, 40)
    cell_end = time.perf_counter() - getattr(warmup, "_t0", t0)  # (an older labkit: since the cell began)
    time.sleep(args.read)
    print(f"   warm-up after {args.read:g} s of reading: {warmup.seconds}", flush=True)
    for name in args.panels:
        prof = None if args.plain else cProfile.Profile()
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        PREFETCHER.cell_started()
        p = widgets.panel(name)
        shown = (time.perf_counter() - t0) * 1000
        p.wait()
        PREFETCHER.cell_finished()
        if prof:
            prof.disable()
        took = (time.perf_counter() - t0) * 1000
        print(
            f"== {name}: shown at {shown:.0f} ms, whole at {took:.0f} ms; {p.status.value[-160:]}", flush=True
        )
        if prof:
            _print_profile(prof, 28)
    warmup.wait(60)  # its cupyx step waits for an idle kernel: after the last panel
    print(f"   warm-up at the end: {warmup.seconds}")
    print(
        f"   warm-up steps (started, ended; s after the banner started them; the first cell ended at "
        f"{cell_end:.3f}): {getattr(warmup, 'timeline', None)}"
    )


def _print_profile(prof, lines):
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(lines)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:8000], flush=True)


if __name__ == "__main__":
    main()
