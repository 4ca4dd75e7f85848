"""Answering a request in a notebook session. Never imports presentation (tests/test_layers.py).

* `lessons`: what the notebooks call, by one name (results, texts, summaries);
* `results`: this session's results (from memory, this GPU's recording, a shipped recording or a
  measurement);
* `texts`: the mode banner (where a lesson's numbers come from), the mode note, the lesson list,
  the labkit source a lesson shows;
* `prefetch`: the background worker that measures neighbouring values ahead;
* `warmup`: a fresh kernel's first-use costs, paid while the learner reads;
* `handson`: hands-on cells, where the learner writes code against the real API;
* `first_use`: the modules a notebook imports by short name (``check``, ``lessons``, ``widgets``),
  imported on first use.
"""
