"""Letters, terms and exact numbers: the papers' dimension symbols, the term
types (saved tensors, parameters, matmuls), the guarded formula reader, exact
rounding and units, and the registry of named quantities.

The bottom of the pipeline: imports nothing of the rest of ``symbolic``.
"""
