"""The command line, ``python -m labkit ...``.

`main` (the argument parser), `record` (record and fill), `bench` (benchmarks), `bench_summary`
(docs/benchmarks.md from data/bench).
"""
