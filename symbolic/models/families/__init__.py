"""The families read by their own modules, one per HF ``model_type`` (see :mod:`.base`).

The earlier sixteen are read by :mod:`symbolic.models.hf` itself; the families
below are each a module, registered here by ``MODEL_TYPE``.
"""
from . import cohere, glm4, granite, nemotron, olmoe, phi, stablelm, starcoder2

#: model_type -> the family's module (``DEFAULTS``, ``SOURCE``, ``TITLE``, ``read``), in listing order
READERS = {module.MODEL_TYPE: module for module in (phi, starcoder2, stablelm, granite, nemotron, glm4, cohere, olmoe)}
