"""The named choices a user makes, as plain data (no sympy: the CLI validates
its input with these before any expression is built).
"""
RECOMPUTE = ("none", "selective", "full")  #: activation recompute policies (Korthikanti §5)
FLOAT_ACTIVATION_DTYPES = ("bf16", "fp16", "fp32", "fp8")  #: storage dtypes of float activations
ZERO_STAGES = (0, 1, 2, 3)  #: ZeRO stages over the data-parallel ranks (Rajbhandari et al. §5)
