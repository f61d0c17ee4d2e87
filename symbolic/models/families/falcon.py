"""Falcon (HF ``model_type`` falcon), with rotary positions or ALiBi, as ``modeling_falcon.py`` of transformers 5.24.0.

FalconAttention: one fused query_key_value (FalconLinear, ``bias``): a + 2 heads of width h/a
with ``multi_query`` (one K/V head), 3h without (``num_kv_heads`` does not change it), (a + 2g)
heads with ``new_decoder_architecture`` (g = ``num_kv_heads``, K and V broadcast to a heads and
copied); Q, K, V reshaped into per-head copies, rotary (none with ``alibi``), then SDPA or the
eager path (softmax in the activation dtype), the output permuted and reshaped (a copy) for
``dense``. FalconDecoderLayer: ``parallel_attn`` with one norm
(``input_layernorm``) or, in the new architecture, two (``ln_attn``, ``ln_mlp``, both reading x);
sequential otherwise. FalconMLP: dense_h_to_4h → gelu → dense_4h_to_h (``ffn_hidden_size``,
null: 4h), ``bias``. ``alibi``: no rotary; the bias is folded into one (b, a, s, s) mask per model
(stated with its size), and under SDPA a multi-head layer's K is a view of the fused output.
"""
from ..config import Recipe
from .base import Read, math_path_gap, source

MODEL_TYPE = "falcon"
TITLE = "Falcon"
SOURCE = source(MODEL_TYPE)

#: configuration_falcon.py's defaults of the fields read
DEFAULTS = {"num_kv_heads": None, "num_ln_in_parallel_attn": None, "alibi": False, "new_decoder_architecture": False,
            "multi_query": True, "parallel_attn": True, "bias": False, "max_position_embeddings": 2048,
            "ffn_hidden_size": None, "activation": "gelu", "tie_word_embeddings": True}


def read(fields) -> Read:
    alibi = fields.flag("alibi")
    heads = fields.heads
    new = fields.flag("new_decoder_architecture")
    kv = fields.count("num_kv_heads", heads)
    if new:
        norms = fields.count("num_ln_in_parallel_attn", 2)
        residual = ("parallel" if norms == 2 else "parallel_shared") if fields.flag("parallel_attn") else "sequential"
        kv_heads = kv
    else:
        residual = "parallel_shared" if fields.flag("parallel_attn") else "sequential"
        # FalconAttention.__init__ (modeling_falcon.py:230-235): without new_decoder_architecture the fused QKV
        # is h + 2·h/a wide with multi_query, else 3h — every head has its own K and V, whatever num_kv_heads says
        kv_heads = 1 if fields.flag("multi_query") else heads
    if new and not fields.flag("parallel_attn"):
        fields.refuse("parallel_attn", False, "Falcon's new_decoder_architecture with parallel_attn")
    bias = fields.flag("bias")
    recipe = Recipe(MODEL_TYPE, norm="layernorm", residual=residual, qkv_bias=bias, o_bias=bias, fused_qkv=True,
                    mlp="plain", activation=fields.activation("activation"), mlp_bias=bias, falcon_core=True,
                    kv_materialized=new, kv_indexed=new or kv_heads == 1, alibi=alibi)
    seq = fields.count("max_position_embeddings")
    notes = ()
    if alibi:
        # FalconModel.forward (modeling_falcon.py:740-775): build_alibi_tensor, then the bias divided by
        # sqrt(h/a) and masked into one (b, a, s, s) additive mask handed to every layer
        notes += (f"alibi: no rotary positions and no parameters; the ALiBi bias is folded into one (b, a, s, s) "
                  f"additive mask per step (FalconModel.forward), which every layer's SDPA keeps for backward: "
                  f"2·a·b·s² bytes once per model, not in the layers' terms — {2 * heads * seq * seq:,} B at "
                  f"s = {seq:,} (max_position_embeddings), b = 1 (traced; eager attention does not keep it)",)
    if not new and not fields.flag("multi_query") and kv != heads:
        # modeling_falcon.py:241, :313, :320: forward reshapes the a heads of K and V into num_kv_heads heads
        notes += (f"num_kv_heads = {kv} with multi_query false and new_decoder_architecture false: HF's "
                  f"FalconAttention builds the fused QKV 3h wide (all {heads} heads have their own K and V, as billed) "
                  f"but its forward reshapes K and V into {kv} heads and fails (a shape error) unless num_kv_heads = "
                  f"num_attention_heads; set num_kv_heads to {heads} (or null) to train it",)
    if kv_heads == 1 and heads > 1 and not new:
        formula, value = math_path_gap(recipe, {"a": heads, "h": fields.hidden, "g": 1, "s": seq, "b": 1})
        notes += (f"attention is counted as a fused kernel with one K/V head; HF's FalconAttention hands SDPA that one "
                  "head without enable_gqa, and torch takes its math path (traced on CPU: fp32 Q, K and V expanded to "
                  f"a heads, the fp32 s×s probabilities), {formula} bytes per layer more, {value:,} B per layer at "
                  f"s = {seq:,} (max_position_embeddings), b = 1; which kernel a GPU runs depends on its backend",)
    return Read(recipe, ffn=fields.count("ffn_hidden_size", 4 * fields.hidden), kv_heads=kv_heads, seq=seq,
                notes=notes)
