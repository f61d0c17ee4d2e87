"""The families read by their own modules, one per HF ``model_type`` (see :mod:`.base`).

The earlier sixteen are read by :mod:`symbolic.models.hf` itself; the families
below are each a module, registered here by ``MODEL_TYPE``.
"""
from . import (cohere, falcon, glm4, gpt_oss, gptj, granite, granitemoe, lfm2, llama4, nemotron, olmoe, phi, phimoe,
               qwen3_next, stablelm, starcoder2)
from . import (apertus, arcee, cohere2, dots1, ernie4_5, ernie4_5_moe, exaone4, glm4_moe, minimax_m2, ministral, olmo3,
               seed_oss, smollm3)
from . import gemma3n_text
from . import bamba, falcon_h1, granitemoehybrid, nemotron_h

#: model_type -> the family's module (``DEFAULTS``, ``SOURCE``, ``TITLE``, ``read``), in listing order
READERS = {module.MODEL_TYPE: module for module in (phi, starcoder2, stablelm, granite, nemotron, glm4, cohere, olmoe,
                                                       granitemoe, gptj, falcon, phimoe, llama4)}
# issue 40's families (2025–26)
READERS.update({module.MODEL_TYPE: module for module in (smollm3, arcee, seed_oss, ernie4_5, apertus, gpt_oss,
                                                         glm4_moe, dots1, minimax_m2, ernie4_5_moe, ministral, olmo3,
                                                         cohere2, exaone4, lfm2, qwen3_next)})
READERS[gemma3n_text.MODEL_TYPE] = gemma3n_text  # Gemma 3n's text model (``gemma3n`` read through text_config)
READERS.update({module.MODEL_TYPE: module for module in (falcon_h1, granitemoehybrid, bamba, nemotron_h)})  # Mamba2 hybrids

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
