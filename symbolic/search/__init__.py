"""Many layouts at once: ``plan`` ranks every valid layout of a GPU count,
``solve`` finds the largest micro-batch or sequence that fits.

May import the folders below it: core, models, layout, ledgers, bill, step.
"""
