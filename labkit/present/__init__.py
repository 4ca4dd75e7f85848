"""Presentation: what a learner sees and touches. Never imports the command line.

* `widgets`: the lesson panels, each made of parts in `panel`;
* `check`: exercise checks;
* `compare` and `compare_check`: one call across GPUs;
* `netreport`: a whole network's report (`labkit.report`).
"""
