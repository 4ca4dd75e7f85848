"""Widget responsiveness: how long from moving a control to the figure holding the new data.

Builds every lesson's panel (and the lab panel), then, warm (after one change already made on
that panel), changes each control to each value it offers (recorded mode: the recorded values
around the base, one factor at a time; live mode: a few values per control) through
``panel.set(...)``: the same observer a click runs. The latency is the wall time until ``set``
returns, checked to have changed the FigureWidget's trace data (or to show a no-data message).
Results are not cached between changes (``lessons.forget()`` before each), so recorded latency is
lookup + chart build + in-place update, and live latency includes the measurement itself.

Writes ``data/bench/widget_latency.csv`` (mode, gpu, panel, control, value, latency_ms); rows of
the other mode already in the file are kept, so one file holds a recorded and a live run. Prints
the table and a summary (median, p90, max per mode and per panel). Not a timed test.

    python scripts/bench_widgets.py            # the mode labkit picks
    LABKIT_MODE=recorded python scripts/bench_widgets.py
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLUMNS = ["mode", "gpu", "panel", "control", "value", "latency_ms"]
#: live mode: values tried per control (the recorded grid's, so the two modes are comparable)
LIVE_VALUES = {"N": [8, 64], "C": [128], "K": [128], "H": [28], "W": [28], "dtype": ["fp32", "bf16"],
               "layout": ["NCHW"], "direction": ["dgrad"], "workload": ["random_shapes"], "launch": ["python"],
               "streams": [4], "field": ["C=K"]}
LIVE_WARMUP = {"N": 16, "workload": "growing_batch", "streams": 3, "field": "H=W"}
LIVE_CONTROLS = ("N", "C", "H", "dtype", "layout", "direction", "workload", "launch", "streams", "field")


def _fingerprint(fig):
    return tuple((t.visible, tuple(t.x or ()) if t.x is not None else None, tuple(t.y or ()) if t.y is not None else None)
                 for t in fig.data)


def _values(panel, control, live: bool, per_control: int):
    if live:
        vals = [v for v in LIVE_VALUES.get(control, []) if v != panel._value(control)]
    else:
        vals = [v for v in panel.options(control) if v != panel._value(control)]
    return vals[:per_control]


def bench(per_control: int = 8, panels=None, verbose: bool = True):
    """Rows of (mode, gpu, panel, control, value, latency_ms)."""
    from labkit import env, lessons, widgets

    m = env.mode()
    live = m.live
    if live:
        gpu = env.environment().gpu_name
    else:
        from labkit import recordings

        gpu = recordings.current().metadata.get("gpu")
    classes = dict(widgets.PANELS, lab=widgets.LabPanel)
    names = panels or list(classes)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        p = classes[name]()
        build_ms = (time.perf_counter() - t0) * 1000
        controls = [c for c in p.controls if not live or c in LIVE_CONTROLS]
        # warm-up: one change on this panel (figure widget, first update path), not counted; live, to a
        # value that is not measured afterwards (cuDNN's and labkit's graph caches would make it a hit)
        warm = next(((c, v) for c in controls for v in _values(p, c, live, 1)), None)
        if live:
            warm = next(((c, v) for c, v in LIVE_WARMUP.items() if c in controls), warm)
        if warm:
            p.set(**{warm[0]: warm[1]})
            p.reset()
        if verbose:
            print(f"{name}: built in {build_ms:.0f} ms; controls {controls}", flush=True)
        for c in controls:
            for v in _values(p, c, live, per_control):
                lessons.forget()
                before = _fingerprint(p.fig)
                t = time.perf_counter()
                p.set(**{c: v})
                ms = (time.perf_counter() - t) * 1000
                changed = _fingerprint(p.fig) != before
                if not changed and p.error is None:
                    print(f"  warning: {name} {c}={v}: the figure did not change", flush=True)
                rows.append(dict(mode=m.name, gpu=gpu, panel=name, control=c, value=str(v), latency_ms=round(ms, 2)))
                if verbose:
                    extra = f"  ({p.error[:80]})" if p.error else ""
                    print(f"  {c}={v}: {ms:8.1f} ms{extra}", flush=True)
                lessons.forget()
                p.reset()
    return rows


def write(rows, path: Path) -> "object":
    """Replace the current mode's rows in ``path`` (keep the other mode's)."""
    import pandas as pd

    new = pd.DataFrame(rows, columns=COLUMNS)
    modes = set(new["mode"])
    if path.exists():
        old = pd.read_csv(path)
        old = old[~old["mode"].isin(modes)]
        new = pd.concat([old, new], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = new.sort_values(["mode", "panel", "control"], kind="stable")
    new.to_csv(path, index=False)
    return new


def summary(df) -> str:
    lines = []
    for mode, sub in df.groupby("mode"):
        lat = sorted(sub["latency_ms"])
        p90 = lat[min(len(lat) - 1, int(0.9 * len(lat)))]
        lines.append(f"{mode} on {sub['gpu'].iloc[0]}: {len(lat)} changes, median {statistics.median(lat):.1f} ms, "
                     f"p90 {p90:.1f} ms, max {lat[-1]:.1f} ms")
        per = sub.groupby("panel")["latency_ms"].median().sort_values()
        lines.append("  median per panel: " + ", ".join(f"{k} {v:.0f}" for k, v in per.items()) + " (ms)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "data" / "bench" / "widget_latency.csv"))
    ap.add_argument("--per-control", type=int, default=8, help="values tried per control (default 8)")
    ap.add_argument("--panels", nargs="*", help="only these panels (experiment names, or 'lab')")
    args = ap.parse_args(argv)
    rows = bench(args.per_control, args.panels)
    df = write(rows, Path(args.out))
    print(f"\nwrote {args.out} ({len(rows)} rows of this run)")
    print(summary(df))
    return 0


if __name__ == "__main__":
    sys.exit(main())
