"""Tiny and published configs of every family the reader knows, and HF's own parameter count of them."""
from __future__ import annotations

import random

#: One tiny config per family: the fields a published config.json of the family carries, small.
TINY: dict[str, dict] = {
    "gpt2": {"n_layer": 2, "n_embd": 48, "n_head": 4, "n_positions": 40, "vocab_size": 101},
    "gpt_neox": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "intermediate_size": 80,
                 "vocab_size": 101, "max_position_embeddings": 64},
    "llama": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64},
    "mistral": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 16},
    "mixtral": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 40, "vocab_size": 101, "max_position_embeddings": 64, "num_local_experts": 4,
                "num_experts_per_tok": 2},
    "qwen2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64},
    "qwen2_moe": {"num_hidden_layers": 3, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 24, "shared_expert_intermediate_size": 56,
                  "mlp_only_layers": [1]},
    "qwen3": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "qwen3_moe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 24, "head_dim": 20},
    "gemma": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 1,
              "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "gemma2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "gemma3_text": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "phi3": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "pad_token_id": 0},
    "olmo2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64},
    "deepseek_v2": {"num_hidden_layers": 3, "hidden_size": 48, "num_attention_heads": 4, "intermediate_size": 80,
                    "vocab_size": 101, "max_position_embeddings": 64, "n_routed_experts": 4,
                    "num_experts_per_tok": 2, "moe_intermediate_size": 24, "n_shared_experts": 2,
                    "first_k_dense_replace": 1, "q_lora_rank": None, "kv_lora_rank": 12, "qk_nope_head_dim": 8,
                    "qk_rope_head_dim": 4, "v_head_dim": 10},
    "deepseek_v3": {"num_hidden_layers": 3, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 4,
                    "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
                    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                    "n_shared_experts": 1, "first_k_dense_replace": 1, "q_lora_rank": 16, "kv_lora_rank": 12,
                    "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 10, "n_group": 2, "topk_group": 1},
    # the families read by their own modules (symbolic.models.families)
    "phi": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "intermediate_size": 80,
            "vocab_size": 101, "max_position_embeddings": 64},
    "starcoder2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64},
    "stablelm": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 4,
                 "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
                 "partial_rotary_factor": 0.5},
    "granite": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
                "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625,
                "logits_scaling": 8.0},
    "nemotron": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "glm4": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64, "head_dim": 20},
    "cohere": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64},
    "olmoe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 24, "vocab_size": 101, "max_position_embeddings": 64, "num_experts": 4,
              "num_experts_per_tok": 2},
    "granitemoe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 24, "vocab_size": 101, "max_position_embeddings": 64, "num_local_experts": 4,
                   "num_experts_per_tok": 2, "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                   "attention_multiplier": 0.015625, "logits_scaling": 6.0},
    "gptj": {"n_layer": 2, "n_embd": 48, "n_head": 4, "n_inner": 80, "rotary_dim": 6, "vocab_size": 101,
             "n_positions": 64},
    "falcon": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "vocab_size": 101,
               "max_position_embeddings": 64, "ffn_hidden_size": 80},
    "phimoe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 24, "vocab_size": 101, "max_position_embeddings": 64, "num_local_experts": 4,
               "num_experts_per_tok": 2},
    # (h, a, g, d, E, k, f_e, f) = (48, 4, 2, 20, 3, 1, 14, 22): d ≠ h/a; layers 0, 2 MoE, 1 dense; layer 3 NoPE
    "llama4_text": {"num_hidden_layers": 4, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 20, "intermediate_size": 14, "intermediate_size_mlp": 22, "vocab_size": 101,
                    "max_position_embeddings": 64, "num_local_experts": 3, "num_experts_per_tok": 1,
                    "moe_layers": [0, 2], "attention_chunk_size": 16},
    # (h, a, g, d, E, k, f_e) = (56, 4, 2, 18, 4, 2, 22): d ≠ h/a; layer 0 sliding (window 3 < s), layer 1 full
    "gpt_oss": {"num_hidden_layers": 2, "hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 18, "intermediate_size": 22, "vocab_size": 101, "max_position_embeddings": 64,
                "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 3},
    # issue 40's dense families: (h, a, g, d_h, f) of their own, d_h ≠ h/a
    "smollm3": {"num_hidden_layers": 2, "hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 18, "intermediate_size": 44, "vocab_size": 97, "max_position_embeddings": 64},
    "arcee": {"num_hidden_layers": 2, "hidden_size": 52, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 18, "intermediate_size": 46, "vocab_size": 97, "max_position_embeddings": 64},
    "seed_oss": {"num_hidden_layers": 2, "hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 22, "intermediate_size": 44, "vocab_size": 97, "max_position_embeddings": 64},
    "ernie4_5": {"num_hidden_layers": 2, "hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 1,
                 "head_dim": 18, "intermediate_size": 44, "vocab_size": 97, "max_position_embeddings": 64},
    "apertus": {"num_hidden_layers": 2, "hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 18, "intermediate_size": 44, "vocab_size": 97, "max_position_embeddings": 64},
    # (h, a, g, d, E, k, f_e, f) = (48, 4, 2, 20, 4, 2, 14, 22): d ≠ h/a; layer 0 dense, layer 1 MoE; 2 groups
    "glm4_moe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 20, "intermediate_size": 22, "vocab_size": 101, "max_position_embeddings": 64,
                 "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 14, "n_shared_experts": 1,
                 "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1, "routed_scaling_factor": 2.5},
    # (h, a, g, d, E, k, f_e, f) = (48, 4, 2, 20, 6, 2, 14, 22): d ≠ h/a; layer 0 dense, layer 1 MoE; 2 shared
    "dots1": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 20, "intermediate_size": 22, "vocab_size": 101, "max_position_embeddings": 64,
              "n_routed_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 14, "n_shared_experts": 2,
              "first_k_dense_replace": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
              "max_window_layers": 64},
    # (h, a, g, d, E, k, f_e) = (48, 4, 2, 20, 4, 2, 14): d ≠ h/a; rotary on half of each head
    "minimax_m2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 20, "intermediate_size": 14, "vocab_size": 101, "max_position_embeddings": 64,
                   "num_local_experts": 4, "num_experts_per_tok": 2, "partial_rotary_factor": 0.5},
    # (h, a, g, d, E, k, f_e, f) = (48, 4, 2, 20, 4, 2, 14, 22): d ≠ h/a; layer 0 dense, layer 1 MoE; 1 shared
    "ernie4_5_moe": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "head_dim": 20, "intermediate_size": 22, "vocab_size": 101, "max_position_embeddings": 64,
                     "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 14, "moe_num_shared_experts": 1,
                     "moe_layer_start_index": 1, "moe_layer_end_index": -1, "moe_layer_interval": 1},
    # issue 40's windowed families: (h, a, g, d, f) = (44, 4, 2, 18, 52) (OLMo-3: h = 40, d = h/a; Cohere 2: h = 40, d = 12), a window
    # of 4 keys that cuts at the traced s
    "ministral": {"num_hidden_layers": 2, "hidden_size": 44, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 18, "intermediate_size": 52, "vocab_size": 97, "max_position_embeddings": 64,
                  "sliding_window": 4},
    "olmo3": {"num_hidden_layers": 2, "hidden_size": 40, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 52, "vocab_size": 97, "max_position_embeddings": 64, "sliding_window": 4},
    "cohere2": {"num_hidden_layers": 2, "hidden_size": 40, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 12, "intermediate_size": 52, "vocab_size": 97, "max_position_embeddings": 64, "sliding_window": 4},
    "exaone4": {"num_hidden_layers": 2, "hidden_size": 44, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 18, "intermediate_size": 52, "vocab_size": 97, "max_position_embeddings": 64,
                "sliding_window": 4},
    # Gemma 3n: (h, a, g, d_h, f, n_u, r_l, h_p, V_p) = (48, 4, 2, 20, 40, 3, 6, 12, 61), d_h ≠ h/a; three sliding
    # layers (window ≥ s: no mask), the last KV-shared, the first sparse: the measured layer (index 1) is plain
    "gemma3n_text": {"num_hidden_layers": 3, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "head_dim": 20, "intermediate_size": 40, "vocab_size": 101, "max_position_embeddings": 64,
                     "vocab_size_per_layer_input": 61, "hidden_size_per_layer_input": 12, "laurel_rank": 6,
                     "altup_num_inputs": 3, "num_kv_shared_layers": 1, "sliding_window": 64,
                     "layer_types": ["sliding_attention"] * 3, "activation_sparsity_pattern": [0.95, 0.0, 0.0]},
    # (h, a, g, d_h, f) = (48, 4, 2, 20, 80); Mamba2 (n_m, d_m, d_s, g_m, p_c, Q) = (8, 8, 6, 2, 2, 4), y·silu(z)
    "falcon_h1": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 20, "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
                  "mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_d_state": 6, "mamba_n_groups": 2,
                  "mamba_d_conv": 3, "mamba_chunk_size": 4, "embedding_multiplier": 5.66, "key_multiplier": 0.39,
                  "attention_out_multiplier": 0.94, "ssm_in_multiplier": 1.25, "ssm_out_multiplier": 0.24,
                  "mlp_multipliers": [0.88, 0.59], "ssm_multipliers": [0.35, 0.25, 0.35, 0.5, 0.35]},
    # (h, a, g, d_h, E, k, f_e, f_s) = (48, 4, 2, 20, 4, 2, 24, 40), no rotary; Mamba2 (n_m, d_m, d_s, g_m, p_c, Q) =
    # (8, 6, 6, 2, 2, 4); layer 0 attention, layer 1 (the measured one) Mamba. use_cache false: transformers 5.24
    # fails to build a cache of Mamba layers alone (get_seq_length), which a one-layer Mamba model would need
    "granitemoehybrid": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "head_dim": 20, "intermediate_size": 24, "shared_intermediate_size": 40, "vocab_size": 101,
                         "max_position_embeddings": 64, "num_local_experts": 4, "num_experts_per_tok": 2,
                         "mamba_n_heads": 8, "mamba_expand": 1, "mamba_d_state": 6, "mamba_n_groups": 2,
                         "mamba_d_conv": 3, "mamba_chunk_size": 4, "layer_types": ["attention", "mamba"],
                         "position_embedding_type": "nope", "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                         "attention_multiplier": 0.015625, "logits_scaling": 6.0, "use_cache": False},
    # (h, a, g, d_h, f) = (48, 4, 2, 20, 80), half of each head rotary; Mamba2 (n_m, d_m, d_s, g_m, p_c, Q) =
    # (8, 6, 6, 2, 2, 4); layer 0 attention, layer 1 (the measured one) Mamba
    "bamba": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 20, "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
              "attn_layer_indices": [0], "mamba_n_heads": 8, "mamba_expand": 1, "mamba_d_state": 6,
              "mamba_n_groups": 2, "mamba_d_conv": 3, "mamba_chunk_size": 4, "use_cache": False},
    # (h, a, g, d_h, f) = (48, 4, 2, 20, 80), no rotary, relu² MLP blocks; Mamba2 (n_m, d_m, d_s, g_m, p_c, Q) =
    # (8, 6, 6, 2, 2, 4); block 0 attention, block 1 (the measured one) Mamba. layer_types: transformers builds as
    # many blocks as it lists (num_hidden_layers is ignored), and the traces resize it
    "nemotron_h": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 20, "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
                   "layer_types": ["full_attention", "linear_attention"], "mamba_num_heads": 8, "mamba_head_dim": 6,
                   "ssm_state_size": 6, "n_groups": 2, "conv_kernel": 3, "chunk_size": 4, "use_cache": False},
    # (h, a, g, d, f, K_c) = (48, 4, 2, 20, 53, 3): layer 0 attention, layer 1 (the measured) a short convolution;
    # f = int(2·80/3) = 53 unrounded (no block_ffn_dim_multiplier)
    "lfm2": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 20, "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 64,
             "layer_types": ["full_attention", "conv"], "block_ffn_dim_multiplier": None},
    # (h, a, g, d, H_k, H_v, D_k, D_v, K_c, E, k, f_e, f_s) = (48, 4, 2, 20, 2, 4, 8, 6, 4, 4, 2, 24, 32): layer 1
    # (the measured) a gated DeltaNet with two value heads per key head, both layers MoE
    "qwen3_next": {"num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 20, "intermediate_size": 80, "vocab_size": 101, "max_position_embeddings": 256,
                   "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                   "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 24, "shared_expert_intermediate_size": 32,
                   "layer_types": ["full_attention", "linear_attention"]},
}


def tiny(model_type: str, **changes) -> dict:
    raw = {"model_type": model_type, **TINY[model_type], **changes}
    return {key: value for key, value in raw.items() if value is not None or key == "q_lora_rank"}


def random_config(model_type: str, rng: random.Random) -> dict:
    """A tiny config of ``model_type`` with random widths, flags flipped at random."""
    raw = tiny(model_type)
    heads = rng.choice([2, 4, 6])
    kv = rng.choice([d for d in (1, 2, 3, 6) if heads % d == 0])
    raw.update(num_hidden_layers=rng.randint(2, 4), vocab_size=rng.randint(50, 130))
    raw.pop("n_layer", None)
    width = heads * rng.choice([4, 6, 8])
    if model_type == "gpt2":
        raw.update(n_layer=raw.pop("num_hidden_layers"), n_embd=width, n_head=heads, n_positions=rng.randint(8, 64),
                   n_inner=rng.choice([None, 2 * width]), tie_word_embeddings=rng.choice([True, False, None]))
        return {key: value for key, value in raw.items() if value is not None}
    for alias in ("n_embd", "n_head"):  # gptj's spellings of hidden_size and the heads (its attribute_map):
        raw.pop(alias, None)            # one field may be given once (models.hf_fields refuses two values)
    raw.update(hidden_size=width, num_attention_heads=heads, intermediate_size=rng.randint(8, 90))
    if model_type not in ("gpt_neox",):
        raw["num_key_value_heads"] = kv
    if "head_dim" in raw or model_type in ("llama", "qwen2", "olmo2"):
        raw["head_dim"] = rng.choice([None, rng.randint(3, 12) * 2]) if model_type not in ("gemma", "gemma2",
                                                                                            "gemma3_text", "qwen3",
                                                                                            "ministral") \
            else rng.randint(3, 12) * 2
    raw["tie_word_embeddings"] = rng.choice([True, False, None])
    for flag in ("attention_bias",):
        if model_type in ("llama", "qwen3", "qwen3_moe", "olmo2", "gemma", "gemma2", "gemma3_text", "deepseek_v2",
                          "deepseek_v3", "gpt_neox"):
            raw[flag] = rng.choice([True, False])
    if model_type == "llama":
        raw["mlp_bias"] = rng.choice([True, False])
    if model_type == "gpt_neox":
        raw["use_parallel_residual"] = rng.choice([True, False])
    if model_type == "qwen2_moe":
        raw.update(qkv_bias=rng.choice([True, False]), shared_expert_intermediate_size=rng.choice([0, 30, 48]),
                   decoder_sparse_step=rng.choice([1, 2]), mlp_only_layers=rng.choice([[], [0]]),
                   norm_topk_prob=rng.choice([True, False]))
    if model_type == "qwen3_moe":
        raw.update(decoder_sparse_step=rng.choice([1, 2]), mlp_only_layers=rng.choice([[], [1]]))
    if model_type in ("qwen2_moe", "qwen3_moe", "mixtral", "deepseek_v2", "deepseek_v3"):
        experts = rng.choice([4, 6, 8])
        key = {"mixtral": "num_local_experts", "deepseek_v2": "n_routed_experts",
               "deepseek_v3": "n_routed_experts"}.get(model_type, "num_experts")
        raw[key] = experts
        raw["num_experts_per_tok"] = rng.choice([1, 2])
        if model_type != "mixtral":
            raw["moe_intermediate_size"] = rng.randint(6, 30)
    if model_type == "llama4_text":
        layers = raw["num_hidden_layers"]
        raw.update(head_dim=rng.randint(3, 12) * 2, num_local_experts=rng.choice([2, 3, 4]),
                   num_experts_per_tok=rng.choice([1, 2]), intermediate_size_mlp=rng.randint(8, 40),
                   attention_bias=rng.choice([True, False]), use_qk_norm=rng.choice([True, False]),
                   moe_layers=rng.choice([None, [0], list(range(layers))]),
                   interleave_moe_layer_step=rng.choice([1, 2]),
                   no_rope_layers=rng.choice([None, [0] * layers, [1, 0] * (layers // 2) + [1] * (layers % 2)]))
    if model_type in ("smollm3", "arcee", "seed_oss", "apertus"):  # issue 40's dense families: their flags
        raw["attention_bias"] = rng.choice([True, False])
    if model_type in ("smollm3", "arcee", "seed_oss"):
        raw["mlp_bias"] = rng.choice([True, False])
    if model_type == "seed_oss":  # SeedOssAttention reads config.head_dim as given: null fails there
        raw.update(head_dim=rng.randint(3, 12) * 2, attention_out_bias=rng.choice([True, False]))
    if model_type == "ernie4_5":
        raw["use_bias"] = rng.choice([True, False])
    if model_type in ("arcee", "apertus"):
        raw["hidden_act"] = rng.choice(["relu2", "xielu" if model_type == "apertus" else "silu"])
    if model_type == "gemma3n_text":
        layers = raw["num_hidden_layers"]
        raw.update(head_dim=rng.randint(3, 12) * 2, layer_types=None, num_kv_shared_layers=rng.choice([0, 1]),
                   activation_sparsity_pattern=[rng.choice([0.0, 0.95]) for _ in range(layers)],
                   attention_bias=rng.choice([True, False]), altup_num_inputs=rng.choice([2, 3, 4]),
                   laurel_rank=rng.randint(2, 9), hidden_size_per_layer_input=rng.randint(2, 14),
                   vocab_size_per_layer_input=rng.randint(20, 70))
    if model_type in ("granitemoehybrid", "bamba"):  # the mixer's heads divide mamba_expand·h, its groups the heads
        heads_m = rng.choice([n for n in (2, 3, 4, 6) if width % n == 0])
        raw.update(mamba_n_heads=heads_m, mamba_n_groups=rng.choice([n for n in (1, 2, 3) if heads_m % n == 0]),
                   mamba_proj_bias=rng.choice([True, False]))
        if model_type == "bamba":
            raw.update(attn_layer_indices=rng.choice([None, [0], [1, 2]]), head_dim=rng.randint(2, 6) * 4)
        else:
            raw.update(num_local_experts=rng.choice([0, 3]),
                       layer_types=[rng.choice(["mamba", "attention"]) for _ in range(raw["num_hidden_layers"])])
    if model_type == "nemotron_h":  # one block kind per layer: transformers builds as many as listed
        raw["layer_types"] = [rng.choice(["linear_attention", "full_attention", "mlp"])
                              for _ in range(raw["num_hidden_layers"])]
        raw["tie_word_embeddings"] = False  # never tied by transformers (the reader refuses true)
    if model_type == "lfm2":
        layers = raw["num_hidden_layers"]
        raw.pop("layer_types")
        raw.update(full_attn_idxs=rng.choice([None, [0], list(range(1, layers, 2)), []]),
                   conv_bias=rng.choice([True, False]), conv_L_cache=rng.choice([2, 3, 5]),
                   block_auto_adjust_ff_dim=rng.choice([True, False]),
                   block_ffn_dim_multiplier=rng.choice([None, 1.0, 1.5]), block_multiple_of=rng.choice([8, 256]),
                   tie_embedding=rng.choice([True, False, None]))
    if model_type == "qwen3_next":
        raw.pop("layer_types")
        key_heads = rng.choice([1, 2, 3])
        raw.update(full_attention_interval=rng.choice([1, 2, 4]), linear_num_key_heads=key_heads,
                   linear_num_value_heads=key_heads * rng.choice([1, 2]), linear_key_head_dim=rng.randint(2, 9),
                   linear_value_head_dim=rng.randint(2, 9), linear_conv_kernel_dim=rng.choice([2, 4]),
                   num_experts=rng.choice([0, 3, 6]), num_experts_per_tok=rng.choice([1, 2]),
                   moe_intermediate_size=rng.randint(6, 30), shared_expert_intermediate_size=rng.choice([0, 20]),
                   decoder_sparse_step=rng.choice([1, 2]), mlp_only_layers=rng.choice([[], [0]]),
                   attention_bias=rng.choice([True, False]), norm_topk_prob=rng.choice([True, False]))
    if model_type in ("deepseek_v2", "deepseek_v3"):
        raw.update(q_lora_rank=rng.choice([None, 14]), kv_lora_rank=rng.randint(5, 16),
                   qk_nope_head_dim=rng.randint(2, 8) * 2, qk_rope_head_dim=rng.choice([2, 4, 6]),
                   v_head_dim=rng.randint(3, 9), first_k_dense_replace=rng.choice([0, 1, 2]),
                   n_shared_experts=rng.choice([1, 2]))
        raw["num_key_value_heads"] = heads
        if model_type == "deepseek_v3":
            raw.update(n_group=2, topk_group=1)
            raw[key] = rng.choice([4, 8])
    return {key: value for key, value in raw.items() if value is not None or key == "q_lora_rank"}


def hf_parameter_count(raw: dict) -> int:
    """transformers' ``sum(p.numel())`` of the causal LM built from ``raw`` on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()  # token ids outside a tiny vocabulary: irrelevant to the count

    from symbolic.models.hf import family_of

    raw = dict(raw)
    model_type = family_of(raw)  # Kimi-K2 (kimi_k2): HF's DeepseekV3 built from the same fields
    raw.pop("model_type")
    for key in ("_symbolic", "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map"):
        raw.pop(key, None)
    cfg = AutoConfig.for_model(model_type, **raw)
    if getattr(cfg, "pad_token_id", None) is not None and cfg.pad_token_id >= cfg.vocab_size:
        cfg.pad_token_id = None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


#: A second set of dimensions per family (other widths, heads, groups, experts), for the traces.
SECOND: dict[str, dict] = {
    "gpt2": {"n_embd": 40, "n_head": 5, "n_positions": 24},
    "gpt_neox": {"hidden_size": 60, "num_attention_heads": 6, "intermediate_size": 36, "rotary_pct": 0.5},
    "llama": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36},
    "mistral": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 1, "intermediate_size": 36,
                "head_dim": 8},
    "mixtral": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 28,
                "num_local_experts": 3, "num_experts_per_tok": 1},
    "qwen2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 6, "intermediate_size": 36},
    "qwen2_moe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "num_experts": 5,
                  "num_experts_per_tok": 3, "moe_intermediate_size": 14, "shared_expert_intermediate_size": 30,
                  "norm_topk_prob": True},
    "qwen3": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 36,
              "head_dim": 14},
    "qwen3_moe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "num_experts": 5,
                  "num_experts_per_tok": 3, "moe_intermediate_size": 14, "head_dim": 8, "norm_topk_prob": True},
    "gemma": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 6, "intermediate_size": 36,
              "head_dim": 14},
    "gemma2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
               "head_dim": 14, "attn_logit_softcapping": None},
    "gemma3_text": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 36,
                    "head_dim": 14},
    "phi3": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
             "partial_rotary_factor": 0.5},
    "olmo2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36},
    "deepseek_v2": {"hidden_size": 60, "num_attention_heads": 6, "q_lora_rank": 18, "kv_lora_rank": 10,
                    "qk_nope_head_dim": 6, "qk_rope_head_dim": 2, "v_head_dim": 8, "n_routed_experts": 5,
                    "num_experts_per_tok": 3, "norm_topk_prob": True},
    "deepseek_v3": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 6, "q_lora_rank": None,
                    "kv_lora_rank": 10, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4, "v_head_dim": 8,
                    "n_routed_experts": 8, "num_experts_per_tok": 3, "n_group": 4, "topk_group": 2,
                    "n_shared_experts": 2},
    "phi": {"hidden_size": 60, "num_attention_heads": 6, "intermediate_size": 36, "head_dim": 12,
            "partial_rotary_factor": 0.5, "tie_word_embeddings": True},
    "starcoder2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
                   "head_dim": 14, "use_bias": False},
    "stablelm": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
                 "use_qkv_bias": True, "use_parallel_residual": True, "partial_rotary_factor": 0.4},
    "granite": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
                "head_dim": 14, "attention_bias": True, "mlp_bias": True},
    "nemotron": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
                 "head_dim": 14, "partial_rotary_factor": 1.0, "attention_bias": True, "mlp_bias": True},
    "glm4": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
             "head_dim": 14, "partial_rotary_factor": 0.75, "attention_bias": False},
    "cohere": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 36,
               "head_dim": 14, "attention_bias": True, "tie_word_embeddings": False},
    "olmoe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 14,
              "num_experts": 5, "num_experts_per_tok": 3, "norm_topk_prob": True, "attention_bias": True,
              "clip_qkv": 8.0},
    "granitemoe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 14,
                   "head_dim": 14, "num_local_experts": 5, "num_experts_per_tok": 3, "attention_bias": True},
    "gptj": {"n_embd": 60, "n_head": 6, "n_inner": None, "rotary_dim": 4, "tie_word_embeddings": True},
    "falcon": {"hidden_size": 60, "num_attention_heads": 6, "new_decoder_architecture": True, "num_kv_heads": 2,
               "bias": True, "ffn_hidden_size": None, "tie_word_embeddings": False},
    # Phi-3.5-MoE's published input_jitter_noise (0.01): the two in-place noise multiplies
    "phimoe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 14,
               "head_dim": 14, "num_local_experts": 5, "attention_bias": True, "lm_head_bias": True,
               "input_jitter_noise": 0.01},
    # (h, a, g, d, E, k, f_e, f) = (60, 6, 3, 14, 4, 2, 10, 26); every layer MoE, with attention bias
    "llama4_text": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                    "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 10,
                    "intermediate_size_mlp": 26, "moe_layers": None, "attention_bias": True},
    # (h, a, g, d, E, k, f_e) = (72, 6, 3, 10, 5, 3, 16); no attention bias; the published swiglu_limit off
    # the default; sliding first (window 4 < s)
    "gpt_oss": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
                "intermediate_size": 16, "num_local_experts": 5, "num_experts_per_tok": 3, "attention_bias": False,
                "swiglu_limit": 3.0, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
    # SmolLM3: a NoPE layer measured (every 2nd layer NoPE), with biases
    "smollm3": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 10,
                "intermediate_size": 30, "no_rope_layer_interval": 2, "attention_bias": True, "mlp_bias": True},
    "arcee": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
              "intermediate_size": 30, "attention_bias": True, "mlp_bias": True},
    # Seed-OSS without its dropouts (the first set keeps its defaults, 0.1 each), with O's bias
    "seed_oss": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
                 "intermediate_size": 30, "attention_dropout": 0.0, "residual_dropout": 0.0,
                 "attention_out_bias": True, "mlp_bias": True},
    "ernie4_5": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 10,
                 "intermediate_size": 30, "use_bias": True, "tie_word_embeddings": False},
    "apertus": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
                "intermediate_size": 30, "attention_bias": True},
    # (h, a, g, d, E, k, f_e) = (60, 6, 3, 14, 8, 3, 10): qk-norm, attention bias, 4 groups, 2 shared, no renorm
    "glm4_moe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                 "n_routed_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 10, "n_shared_experts": 2,
                 "n_group": 4, "topk_group": 2, "use_qk_norm": True, "attention_bias": True, "norm_topk_prob": False,
                 "partial_rotary_factor": 0.75},
    # (h, a, g, d, E, k, f_e) = (60, 6, 3, 14, 8, 3, 10): attention bias on Q, K, V and O, 4 groups, no renorm
    "dots1": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
              "n_routed_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 10, "n_shared_experts": 1,
              "n_group": 4, "topk_group": 2, "attention_bias": True, "norm_topk_prob": False},
    # (h, a, g, d, E, k, f_e) = (60, 6, 3, 14, 5, 3, 10): the released files' rotary_dim (6 of 14 features)
    "minimax_m2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                   "num_local_experts": 5, "num_experts_per_tok": 3, "intermediate_size": 10,
                   "partial_rotary_factor": None, "rotary_dim": 6},
    # (h, a, g, d, E, k, f_e) = (60, 6, 3, 14, 5, 3, 10): use_bias (Q, K, V, O, MLPs, the output layer), 2 shared
    "ernie4_5_moe": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                     "moe_num_experts": 5, "moe_k": 3, "moe_intermediate_size": 10, "moe_num_shared_experts": 2,
                     "use_bias": True},
    # (h, a, g, d, f) = (66, 6, 3, 10, 38) (OLMo-3: h = 72, d = h/a; Cohere 2: h = 72, d = 14), a window of 3 keys
    "ministral": {"hidden_size": 66, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
                  "intermediate_size": 38, "sliding_window": 3, "tie_word_embeddings": True},
    "olmo3": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 3, "intermediate_size": 38,
              "sliding_window": 3, "attention_bias": True},
    "cohere2": {"hidden_size": 72, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 14,
                "intermediate_size": 38,
                "sliding_window": 3, "attention_bias": True, "tie_word_embeddings": False},
    "exaone4": {"hidden_size": 66, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 10,
                "intermediate_size": 38, "sliding_window": 3},
    # (h, a, g, d_h, f, n_u, r_l, h_p, V_p) = (60, 6, 3, 14, 36, 4, 4, 10, 53): full layers, biases, SiLU, the
    # active stream not scaled, untied
    "gemma3n_text": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                     "intermediate_size": [36, 36, 36], "altup_num_inputs": 4, "laurel_rank": 4,
                     "hidden_size_per_layer_input": 10, "vocab_size_per_layer_input": 53, "attention_bias": True,
                     "hidden_activation": "silu", "altup_correct_scale": False, "tie_word_embeddings": False,
                     "layer_types": ["full_attention"] * 3},
    # (h, a, g, d_h, f) = (60, 6, 3, 14, 36); Mamba2 (n_m, d_m, d_s, g_m, p_c, Q) = (6, 12, 5, 3, 3, 3); the gated
    # RMSNorm after the gate; biases on every projection, none on the conv
    "falcon_h1": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                  "intermediate_size": 36, "mamba_d_ssm": 72, "mamba_n_heads": 6, "mamba_d_state": 5,
                  "mamba_n_groups": 3, "mamba_d_conv": 4, "mamba_chunk_size": 3, "mamba_rms_norm": True,
                  "mamba_norm_before_gate": False, "mamba_proj_bias": True, "projectors_bias": True,
                  "mamba_conv_bias": False, "attention_bias": True, "mlp_bias": True},
    # (h, a, g, d_h, f_s) = (60, 6, 3, 14, 26), rotary, no experts (the shared MLP alone); Mamba2 (n_m, d_m, d_s, g_m,
    # p_c, Q) = (6, 20, 5, 3, 3, 3), mamba_expand 2; biases on the projections, none on the conv
    "granitemoehybrid": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                         "intermediate_size": 14, "shared_intermediate_size": 26, "num_local_experts": 0,
                         "mamba_n_heads": 6, "mamba_d_head": 20, "mamba_expand": 2, "mamba_d_state": 5,
                         "mamba_n_groups": 3, "mamba_d_conv": 4, "mamba_chunk_size": 3, "attention_bias": True,
                         "mamba_proj_bias": True, "mamba_conv_bias": False, "position_embedding_type": "rope"},
    # (h, a, g, d_h, f) = (60, 6, 3, 16, 36); Mamba2 (6, 20, 5, 3, 3, 3); biases on the projections and the MLP
    "bamba": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 16,
              "intermediate_size": 36, "mamba_n_heads": 6, "mamba_d_head": 20, "mamba_expand": 2, "mamba_d_state": 5,
              "mamba_n_groups": 3, "mamba_d_conv": 4, "mamba_chunk_size": 3, "attention_bias": True, "mlp_bias": True,
              "mamba_proj_bias": True, "mamba_conv_bias": False},
    # (h, a, g, d_h, f) = (60, 6, 3, 14, 36); Mamba2 (6, 10, 5, 3, 3, 3); biases on the mixer's projections and MLP
    "nemotron_h": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                   "intermediate_size": 36, "mamba_num_heads": 6, "mamba_head_dim": 10, "ssm_state_size": 5,
                   "n_groups": 3, "conv_kernel": 4, "chunk_size": 3, "use_bias": True, "mlp_bias": True,
                   "use_conv_bias": False},
    # (h, a, g, d, f, K_c) = (60, 6, 3, 14, 80, 4): biased conv, f = 16·ceil(int(1.3·int(2·90/3))/16), untied
    "lfm2": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
             "intermediate_size": 90, "conv_bias": True, "conv_L_cache": 4, "block_multiple_of": 16,
             "block_ffn_dim_multiplier": 1.3, "tie_embedding": False},
    # (h, a, g, d, H_k, H_v, D_k, D_v, K_c, E, k, f_e, f_s) = (60, 6, 3, 14, 3, 3, 10, 12, 3, 5, 3, 14, 30): one value
    # head per key head (no repeat), attention biases, half the head rotated, top-k weights not renormalised
    "qwen3_next": {"hidden_size": 60, "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 14,
                   "intermediate_size": 36, "linear_num_key_heads": 3, "linear_num_value_heads": 3,
                   "linear_key_head_dim": 10, "linear_value_head_dim": 12, "linear_conv_kernel_dim": 3,
                   "num_experts": 5, "num_experts_per_tok": 3, "moe_intermediate_size": 14,
                   "shared_expert_intermediate_size": 30, "norm_topk_prob": False, "attention_bias": True,
                   "partial_rotary_factor": 0.5},
}


def declared_layer(raw: dict, attention: str, backend: str = "cpu", dense: bool = False, nope: bool = False,
                   seq: int | None = None):
    """The bill's declared layer of ``raw`` for HF ``attention`` (:func:`symbolic.trace.hf_family_declared`)."""
    from symbolic.trace import hf_family_declared

    return hf_family_declared(raw, attention, backend, dense, nope, seq)
