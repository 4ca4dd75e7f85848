#!/usr/bin/env python3
"""The first-visit measurements of `scripts/gpu-classroom.sh` as a CSV (issue 28's "every panel
complete <= 100 ms" goal): each panel cell's time from the ``kernelcpu`` step's lines (a run per
``-- real kernel, MODE IDLE [VAR=value]`` header, then ``cpu: Panel: wall N ms, main thread CPU
M ms`` lines) and each lesson cell's time from the ``classnotebooks`` step's (a lesson run top to
bottom as "Run all": ``NAME.ipynb: ran in`` then ``cell I  N ms  SOURCE`` lines). Nothing is
measured here: it only copies what those logs say, with the GPU, the date and the commit given.

    python scripts/first_visit_csv.py --gpu "NVIDIA H200" --date 2026-11-25 --commit 03b699c LOG... \
        > data/bench/first_visit_h200.csv

Columns: gpu, date, labkit_commit, fill (how the class's shared recording was filled), source
(kernelcpu or classnotebooks), run (numbered per source across the logs given), mode, idle_s (seconds with no cell running before the panels; none: "Run all"),
prefetch (on/off), notebook, cell (the panel or the cell's first line), wall_ms, main_cpu_ms
(kernelcpu only), panel (whether the cell makes a panel).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys

HEADER = re.compile(r"^-- real kernel, (\w+) ([\d.]+)(?: (\S+))? \(mode")
CPU = re.compile(r"^cpu: (\w+): wall (\d+) ms, main thread CPU (\d+) ms")
NOTEBOOK = re.compile(r"^(\S+\.ipynb): ran in")
CELL = re.compile(r"^\s+cell\s+(\d+)\s+(\d+) ms\s+(.*)$")
COLUMNS = (
    "gpu",
    "date",
    "labkit_commit",
    "fill",
    "source",
    "run",
    "mode",
    "idle_s",
    "prefetch",
    "notebook",
    "cell",
    "wall_ms",
    "main_cpu_ms",
    "panel",
)


def rows_of(lines, common: dict, runs: dict):
    """The CSV rows of one log's lines; ``runs`` counts each source's runs (across logs)."""
    run = None
    for line in lines:
        if m := HEADER.match(line):
            runs["kernelcpu"] += 1
            run = dict(
                source="kernelcpu",
                run=runs["kernelcpu"],
                mode=m[1],
                idle_s=m[2],
                prefetch="off" if (m[3] or "") == "LABKIT_PREFETCH=0" else "on",
                notebook="",
            )
        elif m := NOTEBOOK.match(line):
            runs["classnotebooks"] += 1
            run = dict(
                source="classnotebooks",
                run=runs["classnotebooks"],
                mode="live",
                idle_s="none",
                prefetch="on",
                notebook=m[1],
            )
        elif run and run["source"] == "kernelcpu" and (m := CPU.match(line)):
            yield dict(common, **run, cell=m[1], wall_ms=int(m[2]), main_cpu_ms=int(m[3]), panel=True)
        elif run and run["source"] == "classnotebooks" and (m := CELL.match(line)):
            text = m[3].strip()
            yield dict(
                common,
                **run,
                cell=f"{m[1]}: {text}",
                wall_ms=int(m[2]),
                main_cpu_ms="",
                panel="widgets." in text and "Panel(" in text,
            )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument(
        "--fill", default="quick", help="how the shared recording was filled (the steps' default: quick)"
    )
    args = ap.parse_args(argv)
    out = csv.DictWriter(sys.stdout, COLUMNS)
    out.writeheader()
    runs = {"kernelcpu": 0, "classnotebooks": 0}
    for path in args.logs:
        with open(path, encoding="utf-8", errors="replace") as f:
            out.writerows(
                rows_of(
                    f, dict(gpu=args.gpu, date=args.date, labkit_commit=args.commit, fill=args.fill), runs
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
