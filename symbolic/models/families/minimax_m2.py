"""MiniMax-M2 (HF ``model_type`` minimax_m2), as ``modeling_minimax_m2.py`` of transformers 5.24.0 builds it.

MiniMaxM2DecoderLayer (:341-384): pre-RMSNorm (Llama's), sequential, every layer an MoE.
MiniMaxM2Attention (:276-338): Q, K, V, O without bias, heads of ``head_dim`` (128 by default);
an RMSNorm over all query features (a·d_h) and over all key features (g·d_h) straight after the
projections (:289-290, :307-308) — OLMo-2's full-width QK-norm; rotary on the first
``partial_rotary_factor``·d_h features (the released files' ``rotary_dim``, read as
rotary_dim/head_dim by configuration_minimax_m2.py ``convert_rope_params_to_dict``), split,
rotated and put back by ``torch.cat`` (:233-266), so Q and K reach the kernel laid out per head.
MiniMaxM2SparseMoeBlock (:107-128): MiniMaxM2TopKRouter (:46-65) — logits in the activation
dtype, ``sigmoid(logits.float())``, top-k of the scores plus the block's ``e_score_correction_bias``
buffer, the k weights gathered from the sigmoid and divided by their sum, in place, in fp32 —
and MiniMaxM2Experts' eager loop (:68-104) of E experts of ``intermediate_size``; no shared
expert (the released files' ``shared_intermediate_size`` is not read by HF).
"""
from ..config import Recipe
from .base import Read, expert_counts, no_attention_dropout, rotary_factor, source

MODEL_TYPE = "minimax_m2"
TITLE = "MiniMax-M2"
SOURCE = source(MODEL_TYPE)
EXPERTS = "num_local_experts"  #: the experts count's field (attribute_map: num_experts)

#: configuration_minimax_m2.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 1536, "max_position_embeddings": 196608, "num_key_value_heads": 8, "head_dim": 128,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_dropout": 0.0, "num_experts_per_tok": 8,
            "num_local_experts": 256, "router_jitter_noise": 0.0}

# Its router is ``architectures.composed.ROUTERS["minimax_m2"]``.


def read(fields) -> Read:
    experts, top_k = expert_counts(fields, "num_local_experts")
    jitter = fields.value("router_jitter_noise")
    if jitter not in (0, 0.0, None):
        # the block multiplies its input in place by a uniform noise tensor in training (:111-112)
        fields.refuse("router_jitter_noise", jitter, "router_jitter_noise 0 (the in-place noise multiply is not "
                      "modelled for MiniMax-M2)")
    no_attention_dropout(fields, 'MiniMax-M2')
    head_dim = fields.count("head_dim")
    rotary_dim = fields.value("rotary_dim")
    if rotary_dim is not None and (isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int)
                                   or not 0 < rotary_dim <= (head_dim or fields.hidden // fields.heads)):
        fields.refuse("rotary_dim", rotary_dim, "rotary_dim as a positive integer at most head_dim")
    rotary_factor(fields, 1.0)  # checked: the rotary width changes no kept tensor (cos, sin are the model's)
    recipe = Recipe(MODEL_TYPE, qk_norm="full", activation=fields.activation(), rotary_cat=True, moe="minimax_m2")
    expert_ffn = fields.count("intermediate_size")
    sparse = fields.layers
    notes = (f"the block's e_score_correction_bias ({experts} per layer, {sparse} × {experts} = {sparse * experts:,} "
             "values) is a buffer in HF, not a parameter: stored in the checkpoint, not trained by the optimizer, "
             "not counted in params",)
    modules = fields.raw.get("num_mtp_modules")
    if isinstance(modules, int) and not isinstance(modules, bool) and modules > 0 and fields.raw.get("use_mtp", True):
        # the released files' multi-token-prediction fields: MiniMaxM2ForCausalLM builds no such module
        notes += (f"{modules} multi-token-prediction module(s) (num_mtp_modules) are not built by HF and not counted "
                  "(parameters, activations, FLOPs)",)
    return Read(recipe, ffn=expert_ffn, kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_dim, moe=(experts, top_k, expert_ffn, 0),
                notes=notes)
