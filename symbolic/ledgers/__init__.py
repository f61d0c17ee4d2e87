"""The four ledgers — parameters, model states, activations, FLOPs — each a
sum over an inventory, returned as an exact sympy expression."""
