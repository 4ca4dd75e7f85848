"""The workspace strategies and what runs them. `workspace` holds the strategies (the ways a
framework can hand cuDNN its scratch memory) and the `Strategy` a learner subclasses, `runner`
runs convolutions with workspaces from a strategy (`Runner`, falling back to smaller plans),
`workloads` holds the workloads the strategies are compared on, `concurrency` the race of
convolutions on concurrent streams sharing one scratchpad, and `strategy_check` checks a strategy
somebody wrote beside the built-in ones.
"""
