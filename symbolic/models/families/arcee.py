"""Arcee (AFM-4.5B; HF ``model_type`` arcee), as ``modeling_arcee.py`` of transformers 5.24.0 builds it.

ArceeDecoderLayer (:270): Llama's — pre-RMSNorm, sequential; ArceeAttention (:202-): GQA with
``attention_bias`` on Q, K, V and O, heads of ``head_dim`` (h/a when null, configuration_arcee.py's
__post_init__); ArceeMLP (:50-61, Nemotron's MLP): up → ``hidden_act`` → down, no gate, ``mlp_bias``.
Its default activation is relu2 (configuration_arcee.py:67; activations.py ReLUSquaredActivation:
relu, then square): relu keeps its output, which square reads — one (s, b, f) tensor where a SwiGLU
layer keeps four (gate output, SiLU output, up output, their product) and has a third matrix.
configuration_arcee.py:90-95 refuses a hidden_size not divisible by the heads, whatever head_dim.
"""
from ..config import Recipe
from .base import Read, attention_dropout_note, dropout_rate, source

MODEL_TYPE = "arcee"
TITLE = "Arcee (AFM)"
SOURCE = source(MODEL_TYPE)

#: configuration_arcee.py's ArceeConfig defaults of the fields read
DEFAULTS = {"intermediate_size": 18432, "max_position_embeddings": 4096, "num_key_value_heads": None,
            "head_dim": None, "hidden_act": "relu2", "tie_word_embeddings": False, "attention_bias": False,
            "attention_dropout": 0.0, "mlp_bias": False}

#: the activations its plain MLP is modelled with (HF's ACT2FN names)
ACTIVATIONS = ("relu2", "relu", "silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast")


def read(fields) -> Read:
    if fields.hidden % fields.heads:
        fields.refuse("num_attention_heads", fields.heads, f"heads that divide hidden_size ({fields.hidden}), as "
                      "ArceeConfig.validate_architecture requires")
    bias = fields.flag("attention_bias")
    rate = dropout_rate(fields, "attention_dropout")
    recipe = Recipe(MODEL_TYPE, qkv_bias=bias, o_bias=bias, mlp="plain",
                    activation=fields.activation(known=ACTIVATIONS), mlp_bias=fields.flag("mlp_bias"),
                    attention_dropout=rate > 0)
    kv_heads = fields.count("num_key_value_heads", fields.heads)
    head_dim = fields.count("head_dim")
    seq = fields.count("max_position_embeddings")
    return Read(recipe, ffn=fields.count("intermediate_size"), kv_heads=kv_heads, seq=seq, head_dim=head_dim,
                notes=attention_dropout_note(recipe, rate, fields, kv_heads, head_dim, seq))
