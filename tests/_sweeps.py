"""Configurations the sweep's kernel tests evaluate: GPT shapes and layouts as int64 columns."""
from __future__ import annotations

import numpy as np

from symbolic.search.plan import Group

#: The sweep's dense groups: SP, recompute, ZeRO stage, pipeline schedule.
GROUPS = [Group(sp=sp, recompute=rc, zero=z, schedule=schedule)
          for sp in (False, True) for rc in ("none", "selective", "full") for z in (0, 1, 3)
          for schedule in ("1f1b", "none")]


def sweep_values(rng: np.random.Generator, n: int, odd: bool = False, floats: bool = False):
    """``n`` random configurations and their micro-batch counts (7 per data-parallel rank). ``odd``: sizes
    that do not divide evenly; ``floats``: the model's and the micro-batch's letters as float64 columns
    (p and d stay int64: the chunks in flight read them as whole numbers)."""
    heads = rng.choice([16, 32, 96], n)
    values = {"h": heads * 128, "a": heads, "L": rng.choice([24, 48, 96], n), "V": rng.choice([50257, 51200], n),
              "s": rng.choice([1000, 2048, 4097] if odd else [1024, 2048], n), "b": rng.choice([1, 2, 4], n),
              "t": rng.choice([1, 3, 6, 7] if odd else [1, 2, 8], n),
              "p": rng.choice([1, 3, 5, 12] if odd else [1, 2, 8], n),
              "d": rng.choice([1, 3, 24] if odd else [1, 8, 64], n), "v": 1, "f": 0}
    if floats:
        values.update({k: values[k].astype(np.float64) for k in ("h", "a", "L", "V", "s", "b", "t")})
    return values, values["d"] * 7
