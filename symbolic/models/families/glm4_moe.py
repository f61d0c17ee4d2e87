"""GLM-4.5 / GLM-4.5-Air (HF ``model_type`` glm4_moe), as ``modeling_glm4_moe.py`` of transformers 5.24.0
builds it.

Glm4MoeDecoderLayer (:395-440): pre-RMSNorm (Llama's), sequential; layer i has Glm4MoeMoE iff
i >= ``first_k_dense_replace`` (:402-405), else a dense Glm4MoeMLP of ``intermediate_size`` (f; the
first L_d layers). Glm4MoeAttention (:174-250): Q, K, V with ``attention_bias``, O without; heads
of the file's ``head_dim`` (a field the config class does not declare: ``getattr``, else h // a,
floored, :181 — the defaults' 4096 // 96 = 42); ``use_qk_norm``: Qwen3's RMSNorm over each head's
width on Q and K (:198-221); rotary on the first ``partial_rotary_factor``·d_h features (0.5 by
default, configuration_glm4_moe.py ``__post_init__``), split, rotated and put back by ``torch.cat``
(:138-171), so Q and K reach the kernel laid out per head. Glm4MoeMoE (:371-392):
Glm4MoeTopkRouter (:269-307) — fp32 logits, sigmoid, the ``e_score_correction_bias`` buffer added
to choose, grouped top-k (``n_group``, ``topk_group``), the k weights gathered from the sigmoid,
renormalised when ``norm_topk_prob``, times ``routed_scaling_factor`` — DeepSeek-V3's router line
for line; Glm4MoeExperts' eager loop
of E experts of ``moe_intermediate_size`` (:331-368); one shared MLP of
``moe_intermediate_size``·``n_shared_experts`` (:381-383).
"""
from ..config import Recipe
from .base import Read, head_width, rotary_factor, source

MODEL_TYPE = "glm4_moe"
TITLE = "GLM-4.5 (MoE)"
SOURCE = source(MODEL_TYPE)
EXPERTS = "n_routed_experts"  #: the experts count's field (attribute_map: num_local_experts)

#: configuration_glm4_moe.py's defaults of the fields read
DEFAULTS = {"intermediate_size": 10944, "max_position_embeddings": 131072, "num_key_value_heads": 8,
            "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "use_qk_norm": False,
            "moe_intermediate_size": 1408, "num_experts_per_tok": 8, "n_shared_experts": 1, "n_routed_experts": 128,
            "routed_scaling_factor": 1.0, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
            "norm_topk_prob": True}

# Its routers are ``architectures.composed.ROUTERS["deepseek_v3"]`` and ``["deepseek_v3_norm"]``.


def sigmoid_moe(fields, family: str) -> tuple[dict, dict, tuple, list]:
    """The MoE of a family whose router is DeepSeek-V3's (sigmoid, correction bias, grouped top-k) and whose
    first ``first_k_dense_replace`` layers are dense: (recipe fields, letters' values, (E, k, f_e, n_shared),
    notes). Shared by GLM-4.5 and dots.llm1."""
    experts = fields.count("n_routed_experts")
    top_k = fields.count("num_experts_per_tok")
    expert_ffn = fields.count("moe_intermediate_size")
    for name, value in (("n_routed_experts", experts), ("num_experts_per_tok", top_k),
                        ("moe_intermediate_size", expert_ffn)):
        if value is None:  # dots1's config class leaves them None: HF cannot build its MoE without them
            fields.refuse(name, None, f"{family} with {name} given (a positive integer)")
    if top_k > experts:
        fields.refuse("num_experts_per_tok", top_k, f"at most n_routed_experts ({experts}) experts per token")
    shared = fields.value("n_shared_experts")
    # shared_experts = MLP(moe_intermediate_size * n_shared_experts): 0 builds it 0 wide, run and added as zeros
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        fields.refuse("n_shared_experts", shared, "n_shared_experts as a non-negative integer")
    notes = []
    groups, chosen = fields.value("n_group"), fields.value("topk_group")
    if groups is None or chosen is None:
        notes.append("n_group / topk_group null: HF's router cannot run it (view(-1, None, ...)); billed as one "
                     "group, whose top-k keeps the same tensors as any grouping (the grouping only picks indices)")
    else:
        groups, chosen = fields.count("n_group"), fields.count("topk_group")
        if experts % groups or experts // groups < 2:
            # the router views the scores as (n_group, E/n_group) and takes the top 2 of each group
            fields.refuse("n_group", groups, f"n_group dividing n_routed_experts ({experts}) into groups of 2 or "
                          "more experts")
        if chosen > groups:
            fields.refuse("topk_group", chosen, f"topk_group at most n_group ({groups})")
    first = fields.value("first_k_dense_replace")
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        fields.refuse("first_k_dense_replace", first, "first_k_dense_replace as a non-negative integer")
    dense = min(first, fields.layers)  # MoE iff layer_idx >= first_k_dense_replace: past L, every layer dense
    recipe = {"moe": "deepseek_v3_norm" if fields.flag("norm_topk_prob") else "deepseek_v3", "shared": True,
              "dense_layers": dense > 0}
    dims = {"f_s": expert_ffn * shared}
    if dense:
        dims["L_d"] = dense
        notes.append(f"{dense} of the {fields.layers} layers (the first {dense}) have a dense MLP (width "
                     f"{fields.count('intermediate_size')}) instead of the MoE: parameters, FLOPs and activations "
                     "over the whole model are exact; the inventory's layer is the layers' average, which bill and "
                     "timeline resolve stage by stage (each stage its own dense and MoE layers, layout.stages); plan "
                     "and solve price a stage at L/p average layers")
    sparse = fields.layers - dense
    if sparse:
        notes.append(f"the router's e_score_correction_bias ({experts} per MoE layer, {sparse} × {experts} = "
                     f"{sparse * experts:,} values) is an fp32 buffer in HF, not a parameter: stored in the "
                     "checkpoint, not trained by the optimizer, not counted in params")
        scale = fields.value("routed_scaling_factor")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            fields.refuse("routed_scaling_factor", scale, "routed_scaling_factor as a number")
    return recipe, dims, (experts, top_k, expert_ffn, shared), notes


def read(fields) -> Read:
    rotary_factor(fields, 0.5)  # checked: the rotary width changes no kept tensor (cos, sin are the model's)
    moe, dims, numbers, notes = sigmoid_moe(fields, MODEL_TYPE)
    recipe = Recipe(MODEL_TYPE, qkv_bias=fields.flag("attention_bias"), activation=fields.activation(),
                    qk_norm="head" if fields.flag("use_qk_norm") else "none", rotary_cat=True, **moe)
    return Read(recipe, ffn=fields.count("intermediate_size"),
                kv_heads=fields.count("num_key_value_heads", fields.heads),
                seq=fields.count("max_position_embeddings"), head_dim=head_width(fields), dims=dims,
                moe=numbers, notes=tuple(notes))
