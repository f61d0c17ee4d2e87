"""Model configurations: the frozen dataclass every reader produces, the
error bad input raises, and which architectures the engine itemises.

The built-in models are in :mod:`symbolic.models.builtin`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

#: The inventories (``ModelConfig.arch``) the bill itemises, and with it every
#: consumer of a ModelConfig (timeline, plan, solve), all through
#: :func:`symbolic.bill.derive.inventories`. The HF reader
#: (``symbolic.models.hf``) gives a model one of these arches, and otherwise
#: maps it onto the GPT layer and states what that approximates. Which
#: architectures exist is the models' knowledge: a test holds that each has an
#: inventory in ``symbolic.models.architectures.ARCHITECTURES``.
BILLED_ARCHITECTURES = ("gpt", "llama", "moe", "composed")


@dataclass(frozen=True)
class Recipe:
    """The parts a ``composed`` layer is made of (:mod:`symbolic.models.architectures.composed`).

    Structural only — no dimension values — so it keys the derivation cache.
    Each field names one part as HF transformers 5.24.0 builds it:

    family: the HF ``model_type`` read. norm: ``rmsnorm`` (weight h; HF's
    eager RMSNorm, x·rstd cast back, then × weight), ``rmsnorm_offset``
    (Gemma: computed in fp32, × (1 + weight), cast back), ``rmsnorm_fp32_weight`` (Nemotron-H: x·rstd
    and its product with the weight's fp32 copy in fp32, cast back), ``layernorm``
    (weight and bias h each), ``layernorm_1p`` (Nemotron: F.layer_norm with
    weight + 1, kept), ``layernorm_fp32`` (Cohere: in fp32, weight only). placement: ``pre`` (norm before attention and
    MLP), ``post`` (OLMo-2: the norms on the block outputs, before the
    residual add), ``sandwich`` (Gemma-2/3: both). residual: ``sequential``
    or ``parallel`` (GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x))) or
    ``parallel_shared`` (Phi-2, Cohere, StableLM: x + attn(ln(x)) + mlp(ln(x)), one norm).
    attention: ``gqa`` (MHA/GQA/MQA: a query heads, g key/value heads) or
    ``mla`` (DeepSeek's multi-head latent attention). head_dim: heads of
    width d_h (a config's ``head_dim``) rather than h/a. qkv_bias, o_bias:
    biases on Q/K/V and on the output projection. qk_norm: ``none``,
    ``head`` (RMSNorm over each head's d_h: Qwen3, Gemma-3) or ``full``
    (RMSNorm over all a·d_h query / g·d_h key features: OLMo-2) or ``l2``
    (Llama 4's weightless L2 norm over each head, on its RoPE layers only) or a LayerNorm over each head's d_h:
    ``head_layernorm`` (Phi), ``head_layernorm_each`` (StableLM, a weight per head),
    ``head_layernorm_fp32_each`` (Cohere's use_qk_norm: in fp32, a weight per head, no bias).
    fused_qkv: one Q|K|V matrix (Phi-3, GPT-NeoX): the same count.
    q_lora: MLA's queries through a rank-r_q bottleneck (else one h→a(d_n+d_r)).
    mlp: ``gated`` (gate, up, down) or ``plain`` (h→f→h). activation: HF's
    ``hidden_act``. mlp_bias: biases on the MLP linears. fused_gate_up: one
    gate|up matrix (Phi-3). moe: ``none`` or the router of a family
    (``qwen2_moe``, ``qwen3_moe``, ``deepseek_v2``, ``deepseek_v3``).
    shared: shared expert(s) of total width f_s. shared_gate: Qwen2-MoE's
    sigmoid gate (h→1) on them. dense_layers: L_d layers have a dense MLP of
    width f instead of the MoE (first_k_dense_replace, mlp_only_layers,
    decoder_sparse_step). softcap: Gemma-2's tanh soft-capping of the
    attention scores (``attn_logit_softcapping``). rotary_cat: Q and K are
    rebuilt by ``torch.cat`` of their rotary and pass-through parts (GPT-NeoX,
    Phi-3), so SDPA's output is laid out per head and copied for the output
    projection.
    """

    family: str
    norm: str = "rmsnorm"
    placement: str = "pre"
    residual: str = "sequential"
    attention: str = "gqa"
    head_dim: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: str = "none"
    fused_qkv: bool = False
    q_lora: bool = False
    mlp: str = "gated"
    activation: str = "silu"
    mlp_bias: bool = False
    fused_gate_up: bool = False
    moe: str = "none"
    shared: bool = False
    shared_gate: bool = False
    dense_layers: bool = False
    softcap: bool = False
    rotary_cat: bool = False
    #: the output layer has a bias of V (Phi-2's lm_head; HF ``nn.Linear(h, V, bias=True)``)
    logits_bias: bool = False
    #: RoPE's cos and sin rebuilt inside each layer's attention by ``repeat_interleave`` (GLM-4: one pair,
    #: 2; GPT-J: a pair for Q and one for K, 4), each (s, d_r) and kept by the rotary multiplies
    rotary_tables: int = 0
    #: eager attention upcasts Q and K to fp32 for the scores (GPT-J's eager_attention_forward), so the
    #: Q·Kᵀ matmul keeps them in fp32
    scores_fp32: bool = False
    #: Falcon's attention: eager softmax in the activation dtype (one bf16 s×s tensor, no fp32 one);
    #: under SDPA the additive (b, 1, s, s) mask it passes is kept per layer and the output needs no copy
    falcon_core: bool = False
    #: K and V copied out to a heads before the kernel (Falcon's new_decoder_architecture broadcast_to + flatten)
    kv_materialized: bool = False
    #: K and V taken from the fused output by index lists (``[..., [-2], :]``): each layer keeps the two
    #: one-element int64 indices (Falcon's multi_query and new_decoder_architecture)
    kv_indexed: bool = False
    #: Q, K and V clamped in place (OLMoE's ``clip_qkv``): each ``clamp_`` keeps a copy of its input
    clip_qkv: bool = False
    #: Llama 4's NoPE layers (``no_rope_layers``): L_n of the L layers have no rotary positions; the
    #: qk-norm (``l2``) is on the others only, the temperature tuning on these only
    nope_layers: bool = False
    #: Llama 4's ``attn_temperature_tuning``: Q scaled by an fp32 per-position scale on the NoPE layers
    attn_temperature: bool = False
    #: eager attention's softmax in the activation dtype, no fp32 copy (Llama 4's eager_attention_forward)
    softmax_bf16: bool = False
    #: Falcon's ``alibi``: no rotary; the ALiBi bias is folded into one (b, a, s, s) additive mask per model
    #: (not per layer), and under SDPA the multi-head layer's K is a view of the fused Q|K|V output
    alibi: bool = False
    #: gpt-oss's attention sinks: a learned logit per query head joins each score row's softmax (its eager
    #: path: a softmax over s + 1 in the activation dtype and the row max's index kept)
    sinks: bool = False
    #: RoPE's cos and sin kept in fp32 (``rotary_tables`` rebuilt in the layer in fp32, Q and K rotated in fp32
    #: and cast back: ERNIE 4.5's apply_rotary_pos_emb)
    rotary_fp32: bool = False
    #: dropout on each block's output before its residual add (Seed-OSS's ``residual_dropout`` on the output
    #: projection's and the MLP's output): its mask (the backend's dtype) per hidden feature and token
    block_dropout: bool = False
    #: dropout on the attention probabilities (``attention_dropout`` > 0 in training): eager keeps its mask and
    #: the dropped probabilities; SDPA's math path (CPU) its fp32 mask and the dropped fp32 probabilities; a fused
    #: kernel (FlashAttention-2) draws it in-kernel and keeps only its RNG state
    attention_dropout: bool = False
    #: sliding-window attention (:mod:`symbolic.models.windows`): L_w of the L layers attend to the w most recent
    #: keys. HF's eager and SDPA paths apply it as a mask (full s×s products); a kernel with a native window
    #: (flash-attn's window_size: the bill's fused kernel on CUDA) multiplies only within it
    window: bool = False
    #: Gemma 3n's layer (``gemma3n_text``): AltUp's predict/correct around a sandwich layer with LAuReL, QK and V
    #: norms, and the per-layer input (models.families.gemma3n_text); its MLP's activation is the config's
    altup: bool = False
    #: Gemma 3n's ``altup_correct_scale``: the active corrected stream × correct_output_scale (a clone kept)
    altup_correct_scale: bool = False
    #: Gemma 3n's KV-shared layers (``num_kv_shared_layers``): L_kv of the L layers reuse K and V
    kv_shared_layers: bool = False
    #: Gemma 3n's activation-sparse layers (``activation_sparsity_pattern`` > 0): L_sp of the L layers
    sparse_layers: bool = False
    #: Gemma 3n's KV-shared layers with g = a: repeat_kv returns the reused K, V themselves, so HF's eager path
    #: keeps no copy of them either
    kv_shared_unrepeated: bool = False
    #: Mamba2 mixers (:func:`~symbolic.models.architectures.mixers.mamba2_mixer`): ``parallel`` a mixer beside
    #: the attention in every layer, both reading the first norm's output, their outputs summed (Falcon-H1);
    #: ``layers`` L_s of the L layers run a mixer instead of the attention (Granite-4.0-H's ``layer_types``),
    #: shares L_s/L and (L − L_s)/L of the layer's terms; ``blocks`` each layer one block after one norm (Nemotron-H):
    #: L_s Mamba blocks, L_a attention blocks, the rest MLP blocks, shares L_s/L, L_a/L, (L − L_s − L_a)/L
    mamba: str = "none"
    #: the mixer's gated norm (``mixers.MAMBA_GATES``)
    mamba_gate: str = "silu"
    #: biases on the mixer's in_proj, its conv1d and its out_proj
    mamba_in_bias: bool = False
    mamba_conv_bias: bool = False
    mamba_out_bias: bool = False
    #: LFM2's hybrid layers: L_c of the L layers have its double-gated short convolution (in_proj → B, C, x;
    #: B·x; a depthwise causal conv1d of width K_c; C·conv; out_proj) in place of attention
    short_conv: bool = False
    #: LFM2's ``conv_bias``: biases on the short convolution's in_proj, conv and out_proj
    conv_bias: bool = False
    #: Qwen3-Next's gated attention: Q's projection doubled for a per-feature output gate, the attention's output
    #: multiplied by sigmoid(gate) before the output projection
    gated_attention: bool = False
    #: Qwen3-Next's hybrid layers: L_l of the L layers have its gated DeltaNet (linear attention) in place of attention
    gated_deltanet: bool = False
    #: HF's cache holds the gated DeltaNet's final state (the config's ``use_cache``, true by default): the last
    #: chunk's state update is kept, not only computed
    final_state_cached: bool = False

    def key(self) -> tuple:
        """The recipe as a tuple of (field, value) pairs: hashable and JSON-able. A field added
        after the first families (:data:`LATER_FIELDS`) is in it only when set, so the keys of the
        earlier recipes — the derivation cache's and the formula sheet's page names — stay as they were."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self)
                     if f.name not in LATER_FIELDS or getattr(self, f.name) != f.default)

    @classmethod
    def from_key(cls, key) -> "Recipe":
        return cls(**{name: value for name, value in key})


#: The :class:`Recipe` fields added with the families of issue 25 (left out of a key when unset).
LATER_FIELDS = ("logits_bias", "rotary_tables", "scores_fp32", "falcon_core", "kv_materialized",
                "kv_indexed", "clip_qkv", "nope_layers", "attn_temperature", "softmax_bf16", "alibi",
                "sinks", "rotary_fp32", "block_dropout", "attention_dropout", "window", "altup",
                "altup_correct_scale", "kv_shared_layers", "sparse_layers", "kv_shared_unrepeated",
                "mamba", "mamba_gate", "mamba_in_bias", "mamba_conv_bias", "mamba_out_bias",
                "short_conv", "conv_bias", "gated_attention", "gated_deltanet", "final_state_cached")


#: Stated ranges of a model's sizes (inclusive; issue 14). The largest published transformers are far
#: inside them (L ≈ 10^2, h ≈ 3·10^4, V ≈ 2.6·10^5, s ≈ 10^7); beyond them a config is refused, not
#: evaluated (10^30 layers would otherwise hang every consumer).
MODEL_LIMITS = {"layers": 10**5, "hidden": 10**7, "heads": 10**6, "vocab": 10**8, "seq": 10**8,
                "ffn": 10**8, "kv_heads": 10**6, "experts": 10**5, "experts_per_token": 10**5,
                "shared_experts": 10**5, "expert_ffn": 10**8}


class ConfigError(ValueError):
    """Bad user input; the message names the field and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    """A transformer model configuration.

    layers (L), hidden (h), heads (a), vocab (V), seq (s, also the learned
    position table's length). ffn: the MLP width; 0 means the GPT default 4h.
    tied: the output layer reuses the word embedding. positions: ``learned``
    or ``rope``. arch: the inventory in ``symbolic.models.architectures.ARCHITECTURES``
    that models it. kv_heads: key/value heads (0 means = heads, i.e. MHA).
    mlp: ``gelu`` (h -> f -> h) or ``swiglu`` (gate and up, then down).
    norm: ``layernorm`` or ``rmsnorm``. experts, experts_per_token,
    shared_experts, expert_ffn: mixture-of-experts fields (0 means dense).
    approximations: what the chosen inventory does not model of the source
    config, each a sentence a user must see next to the numbers.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    ffn: int = 0
    tied: bool = True
    positions: str = "learned"
    source: str = ""
    params_label: str = field(default="", compare=False)
    arch: str = "gpt"
    kv_heads: int = 0
    mlp: str = "gelu"
    norm: str = "layernorm"
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    expert_ffn: int = 0
    approximations: tuple[str, ...] = ()
    #: rows of the learned position table (GPT-2's n_positions); 0: sized by the
    #: training sequence s, as Narayanan et al.'s Eq 2 counts it (the papers' models)
    position_table: int = 0
    #: the parts of a ``composed`` layer (None for the gpt, llama and moe inventories)
    recipe: Recipe | None = None
    #: the values of the recipe's own letters (d_h, L_d, f_s, r_q, ...), as (letter, value) pairs
    dims: tuple[tuple[str, int], ...] = ()
    #: an HF config's ``max_position_embeddings`` (n_positions): the longest sequence its position
    #: table allows, not a training length; ``seq`` is then the stated default :func:`default_seq`.
    #: 0: ``seq`` is the model's own training length (the papers' models, a launch config's).
    max_positions: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab", "seq"):
            positive_int(name, getattr(self, name))
        if self.ffn:
            positive_int("ffn", self.ffn)
        own_width = self.recipe is not None and (self.recipe.head_dim or self.recipe.attention == "mla")
        if self.hidden % self.heads and not own_width:  # a head of width d_h needs no h/a
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}): "
                              "each head has width hidden/heads")
        check_ranges(self)
        if self.positions not in ("learned", "rope"):
            raise ConfigError(f"positions must be 'learned' or 'rope', not {self.positions!r}")

    def values(self) -> dict[str, int]:
        """The dimension values in the papers' letters."""
        values = {"L": self.layers, "h": self.hidden, "a": self.heads, "V": self.vocab, "s": self.seq,
                  "f": self.ffn or 4 * self.hidden}
        if self.arch != "gpt":  # the LLaMA/MoE inventories' letters (symbolic.core.dims)
            values["g"] = self.kv_heads or self.heads
        if self.experts:
            values.update(E=self.experts, k=self.experts_per_token, E_s=self.shared_experts,
                          f_e=self.expert_ffn or self.ffn)
        if self.position_table:
            values["P"] = self.position_table
        values.update(self.dims)
        return values


def positive_int(name: str, value) -> int:
    """``value`` as a positive int, or a :class:`ConfigError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        else:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value}")
    return value


def check_ranges(model: "ModelConfig") -> None:
    """Every size of ``model`` within :data:`MODEL_LIMITS`, or a :class:`ConfigError` naming it."""
    for name, limit in MODEL_LIMITS.items():
        value = getattr(model, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ConfigError(f"{name} = {value:.3g} is beyond the stated range (at most {limit:,}) "
                              if value > 10**15 else
                              f"{name} = {value:,} is beyond the stated range (at most {limit:,}); check the config")


def check_position_table(model: "ModelConfig", seq: int) -> None:
    """A learned position table has ``position_table`` rows (GPT-2's n_positions): a sequence
    longer than it has no position embedding, so the model cannot run it (issue 10 item 3).
    One :class:`ConfigError` naming the field, the limit and the fix; nothing for RoPE or for
    the papers' tables sized by s."""
    if model.position_table and seq > model.position_table:
        raise ConfigError(f"seq ({seq}) exceeds the learned position table of {model.name} "
                          f"({model.position_table} rows, n_positions): it cannot run longer sequences; "
                          f"choose --seq {model.position_table} or less")


#: The sequence length billed when neither ``--seq`` nor the model gives one (an HF config states only
#: its position table, the longest it allows): 4096, Llama-2's training length (Touvron et al. 2023
#: §2.2) and a common fine-tuning length, capped by the table. Never the table's maximum, which for
#: long-context models (131,072 for Llama-3.1) is what almost nobody trains at.
DEFAULT_SEQ = 4096


def default_seq(max_positions: int) -> int:
    """The stated default sequence length of a config whose table allows ``max_positions``."""
    return min(DEFAULT_SEQ, max_positions)


def seq_origin(model: "ModelConfig", given: int = 0) -> str:
    """Where the billed ``s`` comes from, as the layout line says it: ``""`` when ``--seq`` was given."""
    if given:
        return ""
    if model.max_positions:
        return (f"default: --seq not given; the position table allows {model.max_positions:,}"
                if model.seq < model.max_positions else "default: --seq not given; the position table's length")
    return "the model's training length"


def field_names() -> list[str]:
    return [f.name for f in fields(ModelConfig)]
