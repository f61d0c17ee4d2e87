"""The families read by their own modules, one per HF ``model_type`` (see :mod:`.base`).

The earlier sixteen are read by :mod:`symbolic.models.hf` itself; the families
below are each a module, registered here by ``MODEL_TYPE``.
"""
from . import (cohere, falcon, glm4, gpt_oss, gptj, granite, granitemoe, lfm2, llama4, nemotron, olmoe, phi, phimoe,
               qwen3_next, stablelm, starcoder2)
from . import (apertus, arcee, cohere2, dots1, ernie4_5, ernie4_5_moe, exaone4, glm4_moe, minimax_m2, ministral, olmo3,
               seed_oss, smollm3)

#: model_type -> the family's module (``DEFAULTS``, ``SOURCE``, ``TITLE``, ``read``), in listing order
READERS = {module.MODEL_TYPE: module for module in (phi, starcoder2, stablelm, granite, nemotron, glm4, cohere, olmoe,
                                                       granitemoe, gptj, falcon, phimoe, llama4)}
# issue 40's families (2025–26)
READERS.update({module.MODEL_TYPE: module for module in (smollm3, arcee, seed_oss, ernie4_5, apertus, gpt_oss,
                                                         glm4_moe, dots1, minimax_m2, ernie4_5_moe, ministral, olmo3,
                                                         cohere2, exaone4, lfm2, qwen3_next)})

#: Families this version does not model, each with what modelling it would need: their configs are refused in
#: one line that says so (``symbolic.models.hf``), never billed as a stand-in.
NOT_MODELLED = {
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba"), "a state-space model: its layer is a selective scan "
                    "(in-projection, causal conv1d, the Δ, B, C projections, the scan's saved states), not "
                    "attention and an MLP; a scan part would be needed"),
    "jamba": "a hybrid of Mamba and attention layers with MoE: the scan part and a per-layer kind would be needed",
    **dict.fromkeys(("rwkv", "rwkv5", "rwkv6"), "a recurrent (RWKV) model: its time-mix recurrence would need a part "
                    "of its own"),
    **dict.fromkeys(("gemma3n", "gemma3n_text"), "Gemma 3n: its layer's AltUp (altup_num_inputs streams of h, "
                    "predicted and corrected by learned coefficients), LAuReL (a rank-laurel_rank residual), the "
                    "per-layer embeddings (a vocab_size_per_layer_input × L·hidden_size_per_layer_input table gated "
                    "into every layer), KV sharing (the last num_kv_shared_layers reuse earlier K and V) and the "
                    "Gaussian top-k activation sparsity of its first layers would each need a part"),
    **dict.fromkeys(("t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "longt5", "switch_transformers"),
                    "an encoder–decoder: an encoder stack, cross-attention in each decoder layer and two sequence "
                    "lengths would be needed"),
}
