"""Architecture inventories: what a layer saves, holds and multiplies.

``ARCHITECTURES`` maps a name (``derive --arch NAME``) to a module that
provides ``saved_tensors()``, ``parameters()`` and ``matmuls()``.
"""
from . import gpt

ARCHITECTURES = {"gpt": gpt}
