"""What a running measurement says and hears, at any layer.

* `progress`: the step it is in, a table so far, "waiting for the GPU";
* `cancel`: stop, because a newer request came or the time budget is spent.
"""
