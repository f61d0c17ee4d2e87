"""Architecture inventories: what a layer saves, holds and multiplies.

``ARCHITECTURES`` maps a name (``derive --arch NAME``) to a module that
provides ``saved_tensors()``, ``parameters()`` and ``matmuls()``, each callable
with no argument (symbolic defaults). ``output`` is the output side (final
norm, logits, loss) and ``conventions`` the backend conventions (CUDA/CPU).
"""
from . import gpt, llama, moe
from .registry import ARCHITECTURES

ARCHITECTURES.update({"gpt": gpt, "llama": llama, "moe": moe})
