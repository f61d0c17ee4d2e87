"""The inventories by name (``derive --arch NAME``), one dict.

The package fills in the paper layers (``gpt``, ``llama``, ``moe``);
:func:`.composed.register` adds a model's composed recipe under its own name.
A module of its own so that the paper layers can be composed from
:mod:`.composed` without an import circle through the package.
"""
ARCHITECTURES: dict = {}

#: A :class:`~symbolic.models.structure.Structure`'s ``arch`` -> the builder of its
#: (parameters, saved tensors, matmuls); filled in by the package.
INVENTORIES: dict = {}
