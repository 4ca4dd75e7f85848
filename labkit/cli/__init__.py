"""The command line, ``python -m labkit ...``.

* `main`: the argument parser, and each command handed to its module;
* `record`: ``record`` and ``fill``;
* `bench`: benchmarks, and `bench_summary`: docs/benchmarks.md from data/bench;
* `classroom`: ``class server`` and ``class gpus``;
* `wrong_plans`: ``wrong-plans``.
"""
