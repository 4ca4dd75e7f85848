"""The workspace strategies and what runs them. `workspace` holds the strategies (the ways a
framework can hand cuDNN its scratch memory) and the `Strategy` a learner subclasses, `runner`
runs convolutions with workspaces from a strategy (`Runner`, falling back to smaller plans),
`workloads` holds the workloads the strategies are compared on, `concurrency` the race of
convolutions on concurrent streams sharing one scratchpad, `strategy_check` checks a strategy
somebody wrote beside the built-in ones, and `labels` names strategies for charts. It is the top
room: a strategy allocates through the `device` seam, and the runner times and checks cuDNN's plans
with everything below.
"""
