"""GPT-J (HF ``model_type`` gptj), as ``modeling_gptj.py`` of transformers 5.24.0 builds it.

GPTJBlock: one LayerNorm (``ln_1``) whose output feeds both blocks, x + attn(ln(x)) + mlp(ln(x));
GPTJAttention: heads of width h/a, Q, K, V and ``out_proj`` without biases, interleaved rotary
(``rotate_every_two``) on the first ``rotary_dim`` features of each head, its sin and cos
``repeat_interleave``'d in each call (one pair for K, one for Q), then ``torch.cat``; its eager
attention computes the scores from Q and K upcast to fp32; GPTJMLP: fc_in → ``activation_function``
(gelu_new) → fc_out with biases, width ``n_inner`` (null: 4h); ``ln_f``; ``lm_head`` with a bias.
"""
from ..config import Recipe
from .base import Read, source

MODEL_TYPE = "gptj"
TITLE = "GPT-J"
SOURCE = source(MODEL_TYPE)

#: configuration_gptj.py's defaults of the fields read (its attribute_map spells n_embd, n_head, n_layer,
#: n_positions for hidden_size, num_attention_heads, num_hidden_layers, max_position_embeddings)
DEFAULTS = {"n_inner": None, "n_positions": 2048, "rotary_dim": 64, "activation_function": "gelu_new",
            "tie_word_embeddings": False}


def read(fields) -> Read:
    width = fields.hidden // fields.heads
    rotary = fields.count("rotary_dim")
    if rotary is None or rotary > width or rotary % 2:
        # rotary_dim null rotates with a table of hidden_size features, which HF's heads of h/a cannot take
        fields.refuse("rotary_dim", fields.value("rotary_dim"), f"GPT-J with an even rotary_dim of at most the "
                      f"head width ({width})")
    if fields.value("head_dim") not in (None, width):
        fields.refuse("head_dim", fields.value("head_dim"), "GPT-J with heads of width n_embd/n_head")
    recipe = Recipe(MODEL_TYPE, norm="layernorm", residual="parallel_shared", mlp="plain",
                    activation=fields.activation("activation_function"), mlp_bias=True, logits_bias=True,
                    rotary_tables=4, scores_fp32=True)
    return Read(recipe, ffn=fields.count("n_inner", 4 * fields.hidden), kv_heads=fields.heads,
                seq=fields.count("max_position_embeddings", DEFAULTS["n_positions"]), dims={"d_r": rotary})
