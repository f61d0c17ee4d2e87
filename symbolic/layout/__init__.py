"""How a model is split and stored: the layout a user asks for
(:mod:`.layout`), the strategies that rewrite an inventory (tensor, sequence,
context parallelism, recompute, pipeline schedules), the model-state recipes,
the training precision recipes (:mod:`.precision`) and the named choices.

May import ``symbolic.core`` and ``symbolic.models``.
"""
