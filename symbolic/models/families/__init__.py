"""The families read by their own modules, one per HF ``model_type`` (see :mod:`.base`).

The earlier sixteen are read by :mod:`symbolic.models.hf` itself; the families
below are each a module, registered here by ``MODEL_TYPE``.
"""
from . import (bamba, cohere, falcon, falcon_h1, glm4, gptj, granite, granitemoe, granitemoehybrid, llama4, nemotron,
               nemotron_h, olmoe, phi, phimoe, stablelm, starcoder2)

#: model_type -> the family's module (``DEFAULTS``, ``SOURCE``, ``TITLE``, ``read``), in listing order
READERS = {module.MODEL_TYPE: module for module in (phi, starcoder2, stablelm, granite, nemotron, glm4, cohere, olmoe,
                                                       granitemoe, gptj, falcon, phimoe, llama4, falcon_h1,
                                                       granitemoehybrid, bamba, nemotron_h)}

#: Families this version does not model, each with what modelling it would need: their configs are refused in
#: one line that says so (``symbolic.models.hf``), never billed as a stand-in.
NOT_MODELLED = {
    **dict.fromkeys(("mamba", "falcon_mamba"), "a Mamba-1 state-space model: its layer is Mamba-1's selective "
                    "scan (a sequential scan over s with per-step states, x_proj and dt_proj), not the Mamba2 chunked "
                    "scan part falcon_h1, granitemoehybrid and bamba use; a Mamba-1 scan part would be needed"),
    "mamba2": ("a Mamba2 model without attention: its mixer is the Mamba2 scan part (falcon_h1, granitemoehybrid, "
               "bamba), but a layer without attention heads or an MLP (Mamba2Block: a norm and the mixer) is not "
               "modelled yet"),
    "jamba": "a hybrid of Mamba-1 and attention layers with MoE: a Mamba-1 scan part would be needed",
    **dict.fromkeys(("rwkv", "rwkv5", "rwkv6"), "a recurrent (RWKV) model: its time-mix recurrence would need a part "
                    "of its own"),
    **dict.fromkeys(("t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "longt5", "switch_transformers"),
                    "an encoder–decoder: an encoder stack, cross-attention in each decoder layer and two sequence "
                    "lengths would be needed"),
}
