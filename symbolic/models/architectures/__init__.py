"""Architecture inventories: what a layer saves, holds and multiplies.

``ARCHITECTURES`` maps a name (``derive --arch NAME``) to a module that
provides ``saved_tensors()``, ``parameters()`` and ``matmuls()``, each callable
with no argument (symbolic defaults). ``INVENTORIES`` maps a
:class:`~symbolic.models.structure.Structure`'s ``arch`` to the builder of its
three inventories — the one place an arch is dispatched on. ``output`` is the
output side (final norm, logits, loss) and ``conventions`` the backend
conventions (CUDA/CPU).
"""
from . import composed, gpt, llama, moe
from .registry import ARCHITECTURES, INVENTORIES

ARCHITECTURES.update({"gpt": gpt, "llama": llama, "moe": moe})
INVENTORIES.update({"gpt": gpt.inventories, "llama": llama.inventories, "moe": moe.inventories,
                    "composed": composed.structure_inventories})
