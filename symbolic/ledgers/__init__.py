"""The ledgers — parameters, model states, activations, FLOPs — each a sum over
an inventory, returned as an exact sympy expression, and their named quantities.

May import the folders below it: core, models, layout.
"""
