"""How a model is split and stored: the layout a user asks for
(:mod:`.layout`), the strategies that rewrite an inventory (tensor, sequence,
context parallelism, recompute, pipeline schedules), the precision recipes of
the model states and the named choices.

May import ``symbolic.core`` and ``symbolic.models``.
"""
