"""ERNIE-4.5 MoE (HF ``model_type`` ernie4_5_moe), as ``modeling_ernie4_5_moe.py`` of transformers 5.24.0
builds it.

Ernie4_5_MoeDecoderLayer (:390-440): pre-RMSNorm (Llama's), sequential; layer i has the sparse
block iff (i + 1) % ``moe_layer_interval`` == 0 and ``moe_layer_start_index`` <= i <=
``moe_layer_end_index`` (:396-402; −1: the last layer, configuration_ernie4_5_moe.py
``__post_init__``), else a dense Ernie4_5_MoeMLP of ``intermediate_size`` (f; L_d of them).
``use_bias``: biases on Q, K, V, O (:222-225), on every dense and shared MLP linear (:73-75) and
on the output layer (:635). Ernie4_5_MoeAttention (:208-266): GQA, heads of the file's
``head_dim`` (else h // a, floored); rotary in full precision (:137-168): cos and sin, fp32, are
``repeat_interleave``'d in every layer (one pair, (s, d_h), kept by the multiplies), Q and K
rotated in fp32 (interleaved pairs, ``torch.stack``) and cast back. Ernie4_5_MoeSparseMoeBlock
(:360-387): Ernie4_5_MoeTopKRouter (:336-357) — fp32 logits (autocast off), softmax, top-k of the
scores plus ``moe_statics``' ``e_score_correction_bias`` (Ernie4_5_MoeStatics, :269-294: an fp32
parameter of E with ``requires_grad=False``, which HF's parameter count includes), the k weights
gathered from the softmax and divided by clamp(their sum, ``moe_norm_min``), cast back to the
activation dtype; Ernie4_5_MoeExperts' eager loop (:297-333) of E experts of
``moe_intermediate_size``; a shared MLP of ``moe_intermediate_size``·``moe_num_shared_experts``
when that count is positive (:369-371).
"""
from ..config import Recipe
from .base import Read, expert_counts, head_width, source

MODEL_TYPE = "ernie4_5_moe"
TITLE = "ERNIE-4.5 (MoE)"
SOURCE = source(MODEL_TYPE)
EXPERTS = "moe_num_experts"  #: the experts count's field (attribute_map: num_experts)

#: configuration_ernie4_5_moe.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 12288, "max_position_embeddings": 131072, "num_key_value_heads": 4,
            "hidden_act": "silu", "tie_word_embeddings": True, "use_bias": False, "moe_intermediate_size": 1536,
            "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
            "moe_layer_end_index": -1, "moe_layer_interval": 1}

# Its router is ``architectures.composed.ROUTERS["ernie4_5_moe"]``.


def moe_layers(fields) -> int:
    """How many layers Ernie4_5_MoeDecoderLayer builds with the sparse block."""
    values = {}
    for name in ("moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval"):
        value = fields.value(name)
        if isinstance(value, bool) or not isinstance(value, int):
            fields.refuse(name, value, f"{name} as an integer")
        values[name] = value
    start, end, interval = values["moe_layer_start_index"], values["moe_layer_end_index"], \
        values["moe_layer_interval"]
    if interval <= 0:
        fields.refuse("moe_layer_interval", interval, "moe_layer_interval as a positive integer")
    end = fields.layers - 1 if end == -1 else end
    return sum(1 for i in range(fields.layers) if (i + 1) % interval == 0 and start <= i <= end)


def read(fields) -> Read:
    experts, top_k = expert_counts(fields, "moe_num_experts", "moe_k")
    shared = fields.value("moe_num_shared_experts")
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        fields.refuse("moe_num_shared_experts", shared, "moe_num_shared_experts as a non-negative integer")
    head_dim = width = head_width(fields)
    if width % 2:
        # cos[..., :d/2].repeat_interleave(2) is one feature wider than an odd head: HF's rotary cannot run it
        fields.refuse("head_dim", width, "ERNIE-4.5 with heads of even width")
    sparse = moe_layers(fields)
    dense = fields.layers - sparse
    bias = fields.flag("use_bias")
    expert_ffn = fields.count("moe_intermediate_size")
    # no sparse layer (a start index past the layers): every layer dense, L_d = L, the MoE's share 0
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, mlp_bias=bias, logits_bias=bias,
                    activation=fields.activation(), rotary_tables=2, rotary_fp32=True, moe="ernie4_5_moe",
                    shared=shared > 0, dense_layers=dense > 0)
    dims = {"d_r": width}
    notes = []
    if shared:
        dims["f_s"] = expert_ffn * shared
    if dense:
        dims["L_d"] = dense
        notes.append(f"{dense} of the {fields.layers} layers have a dense MLP (width "
                     f"{fields.count('intermediate_size')}) instead of the MoE: parameters, FLOPs and activations "
                     "over the whole model are exact; a layer's terms are the layers' average, so under pipeline "
                     "parallelism (pp > 1) the stage holding the dense layers is not itemised apart")
    if sparse:
        notes.append(f"the router's e_score_correction_bias (moe_statics: {experts} per MoE layer, {sparse} × "
                     f"{experts} = {sparse * experts:,} values) is an fp32 parameter HF counts but never trains "
                     "(requires_grad=False): counted in params as HF counts it, so the bill's gradients and optimizer "
                     "states hold these values too")
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_dim, dims=dims,
                moe=(experts, top_k, expert_ffn, shared), notes=tuple(notes))
