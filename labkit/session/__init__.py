"""Answering a request in a notebook session. Never imports presentation (tests/test_layers.py).

* `lessons`: this session's results (from memory, this GPU's recording, a shipped recording or a
  measurement), the mode banner and lesson texts;
* `prefetch`: the background worker that measures neighbouring values ahead;
* `warmup`: a fresh kernel's first-use costs, paid while the learner reads;
* `handson`: hands-on cells, where the learner writes code against the real API.
"""
