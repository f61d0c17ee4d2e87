"""Apertus (HF ``model_type`` apertus), as ``modeling_apertus.py`` of transformers 5.24.0 builds it.

ApertusDecoderLayer (:269-310): pre-RMSNorm (``attention_layernorm``, ``feedforward_layernorm``),
sequential; ApertusAttention (:197-266): GQA of ``head_dim`` (h/a unless the file gives one),
``attention_bias`` on Q, K, V and O, an RMSNorm over each head's width on Q and K (``q_norm``,
``k_norm``, :222-223, applied before RoPE, :240-241: Qwen3's per-head QK-norm); ApertusMLP (:43-56):
up → xIELU → down, no gate and no biases. xIELU (``hidden_act`` xielu, built at :52-53 with two
learned scalars per layer) runs as transformers' Python path (activations.py:281-288) unless the
``xielu`` CUDA wheel is installed: its saved tensors are :func:`~..architectures.parts.xielu_part`'s.
The wheel's autograd function (github.com/nickjbrowning/XIELU at 6856ca9, xielu/cuda/src/xielu_impl.cu:453,
``save_for_backward({x, alpha_p, alpha_n})``) keeps only the input: the bill states the difference.
"""
from ..config import Recipe
from .base import Read, attention_dropout_note, dropout_rate, source

MODEL_TYPE = "apertus"
TITLE = "Apertus"
SOURCE = source(MODEL_TYPE)

#: configuration_apertus.py's ApertusConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 14336, "max_position_embeddings": 65536, "num_key_value_heads": None,
            "hidden_act": "xielu", "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0}

#: the activations its plain MLP is modelled with (HF's ACT2FN names)
ACTIVATIONS = ("xielu", "relu2", "relu", "silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast")


def read(fields) -> Read:
    bias = fields.flag("attention_bias")
    rate = dropout_rate(fields, "attention_dropout")
    activation = fields.activation(known=ACTIVATIONS)
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, qk_norm="head", mlp="plain", activation=activation,
                    attention_dropout=rate > 0)
    kv_heads = fields.count("num_key_value_heads", fields.heads)
    head_dim = fields.count("head_dim")
    seq = fields.count("max_position_embeddings")
    notes = attention_dropout_note(recipe, rate, fields, kv_heads, head_dim, seq)
    if activation == "xielu":
        f = fields.count("intermediate_size")
        notes += ("xIELU is counted as transformers runs it without the optional xielu CUDA wheel (its Python path, "
                  "traced): per element of the MLP width its input, α_p·x, expm1's output, the negative branch, the "
                  "x > 0 mask and its output, 11 bytes; with the wheel installed HF calls its XIELUAutograd, which "
                  "keeps only x and the two parameters (nickjbrowning/XIELU 6856ca9, xielu/cuda/src/xielu_impl.cu:453): "
                  f"7·s·b·f bytes per layer fewer than billed ({7 * f:,} B per token per layer) and 4 B of scalars",)
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=kv_heads, seq=seq, head_dim=head_dim,
                notes=notes)
