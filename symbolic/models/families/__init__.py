"""The families read by their own modules, one per HF ``model_type`` (see :mod:`.base`).

The earlier sixteen are read by :mod:`symbolic.models.hf` itself; the families
below are each a module, registered here by ``MODEL_TYPE``.
"""
from . import (cohere, falcon, glm4, gptj, granite, granitemoe, lfm2, llama4, nemotron, olmoe, phi, phimoe,
               qwen3_next, stablelm, starcoder2)

#: model_type -> the family's module (``DEFAULTS``, ``SOURCE``, ``TITLE``, ``read``), in listing order
READERS = {module.MODEL_TYPE: module for module in (phi, starcoder2, stablelm, granite, nemotron, glm4, cohere, olmoe,
                                                       granitemoe, gptj, falcon, phimoe, llama4, lfm2,
                                                       qwen3_next)}

#: Families this version does not model, each with what modelling it would need: their configs are refused in
#: one line that says so (``symbolic.models.hf``), never billed as a stand-in.
NOT_MODELLED = {
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba"), "a state-space model: its layer is a selective scan "
                    "(in-projection, causal conv1d, the Δ, B, C projections, the scan's saved states), not "
                    "attention and an MLP; a scan part would be needed"),
    "jamba": "a hybrid of Mamba and attention layers with MoE: the scan part and a per-layer kind would be needed",
    **dict.fromkeys(("rwkv", "rwkv5", "rwkv6"), "a recurrent (RWKV) model: its time-mix recurrence would need a part "
                    "of its own"),
    **dict.fromkeys(("t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "longt5", "switch_transformers"),
                    "an encoder–decoder: an encoder stack, cross-attention in each decoder layer and two sequence "
                    "lengths would be needed"),
}
