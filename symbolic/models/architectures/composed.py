"""Decoder layers composed from parts, one recipe per family (HF transformers 5.24.0).

A :class:`~symbolic.models.config.Recipe` names the parts of a family's
layer; :func:`inventories` composes :mod:`.parts` into the three inventories
the ledgers sum — parameters, saved tensors, matmuls — in the papers' letters
plus the recipe's own (``d_h`` head width, ``L_d`` dense layers, ``L_n`` NoPE layers, ``L_c`` conv layers, ``f_s``
shared-expert width, MLA's ``r_q``, ``r_kv``, ``d_n``, ``d_r``, ``d_v``).

The papers' layers are recipes too: :mod:`.gpt` (Korthikanti's GPT layer:
the ``paper`` attention kernel and dropout on each block's output) and
:mod:`.llama` call :func:`layer` with their recipe and a
:class:`~.parts.Wording` that names the terms in the paper's words — one
wiring, one set of parts, for every family.

The families and their recipes are read from ``config.json`` files by
:mod:`symbolic.models.hf`; the tests hold each recipe's parameter count to
``sum(p.numel())`` of the model transformers builds on the meta device, and
its saved tensors to what autograd keeps in the real decoder layer.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from sympy import Expr, Integer

from ...core.dims import E, L, L_a, L_c, L_l, L_s, P, a, b, d_h, d_n, d_r, d_v, f, f_e, f_s, g, h, r_kv, r_q, s
from ...core.tensors import Axis, Group, Inventory, SavedTensor
from ..config import ConfigError, Recipe
from . import expert_parts, gemma3n_parts, mixers, parts
from .conventions import CUDA, conventions

#: The routers of the MoE families (saved-tensor conventions of their HF blocks).
ROUTERS = {
    "mixtral": parts.Router("mixtral", renormalize=True, weight_dtype="fp32"),
    "qwen2_moe": parts.Router("qwen2_moe", renormalize=False, weight_dtype="bf16"),
    "qwen2_moe_norm": parts.Router("qwen2_moe_norm", renormalize=True, weight_dtype="bf16"),
    "qwen3_moe": parts.Router("qwen3_moe", renormalize=False, weight_dtype="bf16"),
    "qwen3_moe_norm": parts.Router("qwen3_moe_norm", renormalize=True, weight_dtype="bf16"),
    # DeepseekV2TopkRouter ignores norm_topk_prob; its group-limited top-k masks the scores (a bool mask kept)
    "deepseek_v2": parts.Router("deepseek_v2", renormalize=False, weight_dtype="fp32", logits_fp32=True),
    "deepseek_v2_group": parts.Router("deepseek_v2_group", renormalize=False, weight_dtype="fp32", logits_fp32=True,
                                      extra=(parts._tokens("moe/group_mask", E, "mask",
                                                           note="group-limited top-k: masked_fill keeps the mask"),)),
    "deepseek_v3": parts.Router("deepseek_v3", score="sigmoid", renormalize=False, weight_dtype="fp32",
                                logits_fp32=True, correction_bias="buffer"),
    "deepseek_v3_norm": parts.Router("deepseek_v3_norm", score="sigmoid", renormalize=True, weight_dtype="fp32",
                                     logits_fp32=True, correction_bias="buffer"),
    # GraniteMoeTopKRouter (models.families.granitemoe): softmax over the k chosen logits (fp32), no
    # renormalisation, weights cast back to the activation dtype
    "granitemoe": parts.Router("granitemoe", renormalize=False, weight_dtype="bf16", topk_first=True),
    # OlmoeTopKRouter (models.families.olmoe): softmax in fp32, top-k, renormalised when norm_topk_prob
    "olmoe": parts.Router("olmoe", renormalize=False, weight_dtype="bf16"),
    "olmoe_norm": parts.Router("olmoe_norm", renormalize=True, weight_dtype="bf16"),
    # PhimoeTopKRouter (models.families.phimoe): sparsemixer in training mode, weights in the activation dtype
    "phimoe": parts.Router("phimoe", score="sparsemixer", renormalize=False, weight_dtype="bf16", sparsemixer=True),
    "phimoe_jitter": parts.Router("phimoe_jitter", score="sparsemixer", renormalize=False, weight_dtype="bf16",
                                  sparsemixer=True, input_jitter=True),
    # Llama4Router (models.families.llama4): top-k then sigmoid; every token through every expert
    "llama4": parts.Router("llama4", score="sigmoid", renormalize=False, weight_dtype="bf16", dense_experts=True),
    # GptOssTopKRouter (models.families.gpt_oss): linear with bias, top-k, softmax over the k in bf16;
    # GptOssExperts: biases and the clamped SwiGLU
    "gpt_oss": parts.Router("gpt_oss", renormalize=False, weight_dtype="bf16", topk_first=True, bias=True,
                            score_dtype="bf16", experts="clamped_swiglu"),
    # GLM-4.5's and dots.llm1's routers (models.families.glm4_moe, dots1) are DeepSeek-V3's, line for line:
    # they use "deepseek_v3" and "deepseek_v3_norm" above.
    # MiniMaxM2TopKRouter (models.families.minimax_m2): logits in the activation dtype, sigmoid in fp32, top-k of
    # the scores plus the correction bias, the k weights renormalised in fp32
    "minimax_m2": parts.Router("minimax_m2", score="sigmoid", renormalize=True, weight_dtype="fp32",
                               correction_bias="buffer"),
    # Ernie4_5_MoeTopKRouter (models.families.ernie4_5_moe): fp32 logits, softmax, top-k of the scores plus
    # moe_statics' correction bias (a parameter), the k weights over clamp(sum, moe_norm_min), cast back
    "ernie4_5_moe": parts.Router("ernie4_5_moe", renormalize=True, weight_dtype="bf16", logits_fp32=True,
                                 correction_bias="parameter",
                                 extra=(parts._tokens("moe/routing_weight_sum_unclamped", 1, "fp32",
                                                      note="the k weights' sum before clamp(min=moe_norm_min), "
                                                      "kept by the clamp"),)),
}


def head_width(recipe: Recipe) -> Expr:
    """The width of one attention head: the config's head_dim (d_h) or h/a."""
    return d_h if recipe.head_dim else h / a


def _attention(recipe: Recipe, kernel: str, layer_input: bool, kv_heads: Expr = g, mask_dtype: str = "mask",
               per_head: bool = False, conv=None) -> parts.Part:
    if recipe.attention == "mla":
        projections = parts.mla_projections(r_q, r_kv, d_n, d_r, d_v, recipe.q_lora, recipe.o_bias)
        return (projections + parts.mla_saved(r_q, r_kv, d_n, d_r, d_v, recipe.q_lora)
                + parts.attention_core(d_n + d_r, a, kernel, value_width=d_v, output_copy=True,
                                       value_storage=a * (d_n + d_v))
                + parts.Part(matmuls=(parts._linear("attention/output", a * d_v, h, parts.MLA_SOURCE),)))
    width = head_width(recipe)
    qk_kind = "rmsnorm" if recipe.norm.startswith("layernorm") else recipe.norm
    rotary = parts.NOTHING
    if recipe.rotary_tables:  # GLM-4, GPT-J: cos, sin repeat_interleave'd in every layer, kept by the multiplies
        # each (1, s, d_r): HF's position_ids are cache_position.unsqueeze(0), broadcast over the batch
        names = ("cos", "sin") if recipe.rotary_tables == 2 else \
            tuple(f"{name}_{i}" for i in range(recipe.rotary_tables // 2) for name in ("cos", "sin"))
        # ERNIE 4.5 (rotary_fp32): the tables stay fp32 and Q, K are rotated in fp32 (modeling_ernie4_5.py:169-182)
        rotary = parts.Part(saved=tuple(
            SavedTensor(f"attention/rotary_{name}", (s, d_r), "fp32" if recipe.rotary_fp32 else "bf16",
                        Axis.SEQUENCE, 0, Group.BODY, parts.HF,
                        f"{name} rebuilt by repeat_interleave in the layer, kept by the rotary multiplies: "
                        "one per position, shared by the batch") for name in names))
    rope, nope = parts.rope_share(recipe.nope_layers)
    projections = (parts.attention_projections(width, kv_heads, recipe.qkv_bias, recipe.o_bias, recipe.fused_qkv,
                                               layer_input=layer_input)
                   + (parts.l2_qk_norm(width, kv_heads, rope) if recipe.qk_norm == "l2" else
                      parts.qk_norm(recipe.qk_norm, width, kv_heads, qk_kind, conv)))
    if recipe.attn_temperature:  # Llama 4: on the NoPE layers only
        projections = projections + parts.temperature_scales(nope if recipe.nope_layers else Integer(1))
    if recipe.clip_qkv:  # OLMoE: query_states.clamp_(...) on each projection's output, before the reshape
        projections = projections + parts.Part(saved=tuple(
            parts._split(f"attention/{name}_clamp_input", n, note="clamp_ is in place: autograd keeps a copy of "
                         "its input (the projection's output) for the clamp's mask in backward")
            for name, n in (("query", a * width), ("key", kv_heads * width), ("value", kv_heads * width))))
    if recipe.gated_attention:  # Qwen3-Next: Q's projection twice as wide, half of it the output gate
        projections = mixers.gated_query(projections, width)
    core_heads = a if recipe.kv_materialized or kernel == "masked" else kv_heads
    core = parts.attention_core(width, core_heads, "fused" if kernel == "masked" else kernel,
                                output_copy=recipe.rotary_cat, softcap=recipe.softcap, mask_dtype=mask_dtype,
                                per_head=per_head, dropout=recipe.attention_dropout,
                                window_share=_window_share(recipe, kernel, conv))
    if kernel == "masked":
        core = core + _window_mask()
    # Falcon's softmax(dtype=bf16), Llama 4's plain softmax: the probabilities kept once, in bf16
    if (recipe.falcon_core or recipe.softmax_bf16) and kernel == "explicit":
        core = parts.Part(core.params, tuple(t for t in core.saved if t.name != "attention/softmax_output"),
                          core.matmuls)
    if recipe.alibi and kernel == "fused" and not recipe.kv_indexed:
        # Falcon's alibi, multi-head (modeling_falcon.py:265-267, 318-321): no rotary, so K reaches SDPA as a view
        # of the fused Q|K|V output and the kernel keeps that whole storage (3·a·d_h per token) where the rotary
        # path keeps K's own copy (traced)
        core = parts.Part(core.params, tuple(
            replace(t, shape=t.shape[:-1] + (3 * t.shape[-1],),
                    note="K without rotary: a view of the fused Q|K|V output, whose whole storage SDPA keeps")
            if t.name == "attention/key" else t for t in core.saved), core.matmuls)
    if recipe.falcon_core and kernel == "fused" and not recipe.alibi:
        # SDPA keeps the (b, 1, s, s) additive mask Falcon passes it; with alibi the mask is one (b, a, s, s)
        # tensor per model, not per layer (stated by the family's reader)
        core = core + parts.Part(saved=(SavedTensor(
            "attention/mask", (b, s, s), "bf16", Axis.NONE, None, Group.BODY, parts.HF,
            "the additive causal mask FalconAttention passes to SDPA, kept by its backward (traced: per layer)"),))
    if recipe.sinks:  # gpt-oss: a learned logit per head in the softmax (its eager path's softmax over s + 1)
        core = parts.attention_sinks(core, kernel)
    if recipe.kv_indexed:  # qkv[..., [-2], :] and [-1]: the index lists are int64 tensors indexing keeps
        core = core + parts.Part(saved=(SavedTensor(
            "attention/kv_index", (Integer(2),), "int64", Axis.NONE, None, Group.BODY, parts.HF,
            "the two one-element index tensors that pick K and V out of the fused output: per layer"),))
    if recipe.scores_fp32 and kernel == "explicit":  # GPT-J: matmul(q.float(), k.float().T) keeps fp32 Q and K
        core = parts.Part(core.params, tuple(
            replace(t, dtype="fp32", note=t.note + ", upcast to fp32 for the scores")
            if t.name in ("attention/query", "attention/key") else t for t in core.saved), core.matmuls)
    gate = mixers.output_gate(width) if recipe.gated_attention else parts.NOTHING
    return projections + rotary + core + gate + parts.attention_output(width, recipe.o_bias)


def _window_share(recipe: Recipe, kernel: str, conv) -> Expr:
    """The layers whose attention multiplies only within the sliding window: L_w/L on the fused kernel on CUDA
    (flash-attn's native window_size, what the bill counts); none where the window is a mask (HF's eager and
    SDPA paths, and every traced CPU path: FlopCounterMode counts the full s×s)."""
    from ...core.dims import L, L_w
    if not recipe.window or kernel != "fused" or conv is None or conventions(conv).name != "cuda":
        return Integer(0)
    return L_w / L


def _window_mask() -> parts.Part:
    """What HF's SDPA path keeps on a windowed layer once the window's mask is materialised (s ≥ w:
    masking_utils.py ``_ignore_causal_mask_sdpa`` skips the mask only below the window): with a mask,
    ``use_gqa_in_sdpa`` is false (integrations/sdpa_attention.py:40-48), so K and V are repeated to a heads
    before the kernel (the ``masked`` kernel's K, V at a heads), and the boolean mask is converted to an
    additive bf16 (b, 1, s, s) tensor in each layer's call, which the kernel keeps (traced)."""
    return parts.Part(saved=(SavedTensor(
        "attention/window_mask", (b, s, s), "bf16", Axis.NONE, None, Group.BODY, parts.HF,
        "the sliding-window mask as SDPA's additive bf16 attn_mask, converted in each layer and kept by its "
        "backward (traced: per layer)"),))


def _mlp_block(recipe: Recipe, layer_input: bool = False, ffn: Expr = f) -> parts.Part:
    if recipe.moe == "none":
        return parts.mlp(recipe.mlp, ffn, recipe.activation, recipe.mlp_bias, recipe.fused_gate_up,
                         layer_input=layer_input)
    moe_share, dense_share = parts.dense_share(recipe.dense_layers)
    block = expert_parts.moe(ROUTERS[recipe.moe], f_e, f_s if recipe.shared else None, recipe.shared_gate, moe_share,
                      activation=recipe.activation, shared_bias=recipe.mlp_bias)
    if recipe.dense_layers:
        block = block + parts.mlp("gated", ffn, recipe.activation, recipe.mlp_bias, share=dense_share)
    return block


def layer(recipe: Recipe, kernel: str = "fused", backend=CUDA, ffn: Expr = f, kv_heads: Expr = g,
          dropout: bool = False, wording: parts.Wording = parts.HF_WORDING) -> parts.Part:
    """One decoder layer of ``recipe``: its norms, attention and MLP parts in the recipe's residual
    wiring. ``kernel``: ``fused`` SDPA/FlashAttention, ``explicit`` eager attention, ``math``, SDPA's
    fp32 fallback, which CPU takes for MLA, ``masked``, HF's SDPA path on a windowed layer once its
    mask is materialised (s ≥ w: K, V repeated to a heads, the mask kept), or ``paper``, the attention
    Korthikanti §4.1 counts.
    ``ffn``: the MLP width (f; the papers' GPT: 4h). ``kv_heads``: key/value heads (g; MHA: a).
    ``dropout``: dropout on each block's output before its residual add (Megatron's GPT; its mask
    dtype the backend's). ``wording``: the names and citations of the inventory (the paper layers')."""
    if recipe.altup:  # Gemma 3n: a layer of its own wiring (AltUp streams, LAuReL, per-layer inputs)
        return parts.cite(_gemma3n_layer(recipe, kernel, ffn, kv_heads), wording)
    conv = conventions(backend)
    kind = recipe.norm

    def norm(prefix, layer_input=False, keep_input=True):
        part = parts.norm(prefix, kind, conv=conv, layer_input=layer_input)
        if not keep_input:  # the norm reads a storage another term already declares (GPT-NeoX's two norms of x)
            part = parts.Part(part.params, tuple(t for t in part.saved if not t.name.endswith("_input")))
        return part

    def attention(layer_input=False):
        part = _attention(recipe, kernel, layer_input, kv_heads, conv.dropout_mask, wording.per_head, conv)
        # a hybrid's other kinds of layer mix tokens otherwise: each kind a share of the layer's terms, letter/L
        others = ((L_c, mixers.short_conv(recipe.conv_bias, conv, layer_input=layer_input)) if recipe.short_conv
                  else None,
                  (L_l, mixers.gated_deltanet(conv, layer_input, recipe.final_state_cached)) if recipe.gated_deltanet
                  else None)
        others = [other for other in others if other is not None]
        if others:
            part = parts.scaled(part, (L - sum(letter for letter, _ in others)) / L)
            for letter, other in others:
                part = part + parts.scaled(other, letter / L)
        return part

    def drop(block):  # x + dropout(block(x)): the mask of the block's output
        if not (dropout or recipe.block_dropout):
            return parts.NOTHING
        return parts.block_dropout(f"{block}/dropout_mask", "attention" if block == "attention" else "MLP",
                                   conv.dropout_mask)

    def mlp():
        return _mlp_block(recipe, ffn=ffn)

    def mixer(share=Integer(1)):  # on a GPU backend the fused CUDA kernel's tensors, on CPU the torch path's
        return mixers.mamba2_mixer(recipe.mamba_gate, recipe.mamba_in_bias, recipe.mamba_conv_bias,
                                  recipe.mamba_out_bias, share, kernel="torch" if conv.name == "cpu" else "fused")

    if recipe.mamba == "parallel":  # Falcon-H1: x + mamba(n(x)) + attn(n(x)), then h + mlp(norm(h))
        wired = (norm("attention/norm", layer_input=True) + mixer() + attention() + norm("mlp/norm") + mlp())
        return parts.cite(wired, wording)
    if recipe.mamba == "layers":  # Granite-4.0-H: L_s layers x + mamba(n(x)), the others x + attn(n(x))
        wired = (norm("attention/norm", layer_input=True) + mixer(L_s / L)
                 + parts.shared_by(attention(), (L - L_s) / L) + norm("mlp/norm") + mlp())
        return parts.cite(wired, wording)
    if recipe.mamba == "blocks":  # Nemotron-H: x + block(norm(x)), the block a Mamba, attention or MLP one
        rest = (L - L_s - L_a) / L
        wired = (norm("attention/norm", layer_input=True) + mixer(L_s / L)
                 + parts.shared_by(attention(), L_a / L)
                 + parts.mlp(recipe.mlp, ffn, recipe.activation, recipe.mlp_bias, share=rest))
        return parts.cite(wired, wording)
    if recipe.residual == "parallel_shared":  # x + attn(ln(x)) + mlp(ln(x)): one norm, its output read twice
        shared = mlp()
        wired = (norm("attention/norm", layer_input=True) + attention() + drop("attention")
                 + parts.Part(shared.params, tuple(t for t in shared.saved if t.name != "mlp/input"), shared.matmuls)
                 + drop("mlp"))
    elif recipe.residual == "parallel":  # x + attn(ln1(x)) + mlp(ln2(x)): both norms keep the same x
        wired = (norm("attention/norm", layer_input=True) + attention() + drop("attention")
                 + norm("mlp/norm", keep_input=False) + mlp() + drop("mlp"))
    elif recipe.placement == "post":  # OLMo-2: x + norm(attn(x)), then h + norm(mlp(h))
        wired = (attention(layer_input=True) + norm("attention/post_norm") + drop("attention")
                 + mlp() + norm("mlp/post_norm") + drop("mlp"))
    elif recipe.placement == "sandwich":  # Gemma-2/3: x + post(attn(pre(x))), h + post(mlp(pre(h)))
        wired = (norm("attention/norm", layer_input=True) + attention() + norm("attention/post_norm")
                 + drop("attention") + norm("mlp/norm") + mlp() + norm("mlp/post_norm") + drop("mlp"))
    elif recipe.placement == "pre":  # x + attn(norm(x)), then h + mlp(norm(h))
        wired = (norm("attention/norm", layer_input=True) + attention() + drop("attention")
                 + norm("mlp/norm") + mlp() + drop("mlp"))
    else:
        raise ValueError(f"norm placement must be pre, post or sandwich, not {recipe.placement!r}")
    return parts.cite(wired, wording)


def model_side(recipe: Recipe, tied: bool, positions: Expr | None = None,
               wording: parts.Wording = parts.HF_WORDING) -> parts.Part:
    """The embedding and output side of a model of ``recipe``: word embedding, learned positions of
    ``positions`` rows (None: none), the final norm, an untied output layer, the logits."""
    side = parts.embeddings(tied, recipe.norm, positions, logits_bias=recipe.logits_bias)
    if recipe.altup:  # Gemma 3n's per-layer embedding and its projection, the AltUp projections in and out
        from ...core.dims import V_p, h_p, n_u
        side = side + gemma3n_parts.gemma3n_model_side(n_u, h_p, V_p)
    return parts.cite(side, wording)


def _embeddings(recipe: Recipe, tied: bool, positions: str, table: bool) -> parts.Part:
    return model_side(recipe, tied, P if positions == "learned" and table else None)


def parameters(recipe: Recipe, tied: bool = False, positions: str = "rope", table: bool = False) -> Inventory:
    """Every parameter of a model of ``recipe``: its layer (× L) and the embedding/output side."""
    body = layer(recipe)
    return Inventory(body.params + _embeddings(recipe, tied, positions, table).params)


def active_parameters(recipe: Recipe, tied: bool = False, positions: str = "rope", table: bool = False) -> Inventory:
    """The parameters a token goes through (seed 001 §07: N_active): k of the E experts."""
    from ...core.dims import E, k
    full = parameters(recipe, tied, positions, table)
    return Inventory(tuple(p if not p.name.startswith("layer/moe/experts_") else
                           type(p)(p.name, tuple(x.subs(E, k) if x.has(E) else x for x in p.shape), p.scope,
                                   p.source, "k experts (N_active)") for p in full))


def saved_tensors(recipe: Recipe, kernel: str = "fused", backend=CUDA) -> Inventory:
    """What one layer of ``recipe`` keeps for backward."""
    return Inventory(layer(recipe, kernel, backend).saved)


def matmuls(recipe: Recipe, kernel: str = "fused", backend=CUDA) -> Inventory:
    """One layer's matmuls and the logits (the bill's: the fused kernel on CUDA, a native sliding window
    multiplying only within it; ``backend`` cpu: the traced path, full s×s products)."""
    return Inventory(layer(recipe, kernel, backend).matmuls + model_side(recipe, True).matmuls)


@lru_cache(maxsize=None)
def inventories(recipe_key: tuple, tied: bool, positions: str, table: bool = False):
    """(parameters, saved tensors, matmuls) by the recipe's key (cached: inventories are immutable)."""
    recipe = Recipe.from_key(recipe_key)
    return parameters(recipe, tied, positions, table), saved_tensors(recipe), matmuls(recipe)


def structure_inventories(structure):
    """(parameters, saved tensors, matmuls) of a composed :class:`~symbolic.models.structure.Structure`."""
    if structure.recipe is None:
        raise ConfigError("a composed model needs its recipe (ModelConfig.recipe)")
    return inventories(structure.recipe.key(), structure.tied, structure.positions, structure.position_table)


class RecipeArchitecture:
    """A composed model's inventories under the interface of ``ARCHITECTURES`` modules
    (``saved_tensors()``, ``parameters(tied=, positions=)``, ``matmuls()``), so the named
    quantities (``derive QUANTITY --model``) read a composed layer in its own letters."""

    def __init__(self, recipe: Recipe, tied: bool, positions: str = "rope", table: bool = False):
        self.recipe, self.tied, self.positions, self.table = recipe, tied, positions, table

    def saved_tensors(self, backend=CUDA) -> Inventory:
        return saved_tensors(self.recipe, "fused", backend)

    def parameters(self, tied: bool | None = None, positions: str | None = None) -> Inventory:
        return parameters(self.recipe, self.tied if tied is None else tied, positions or self.positions, self.table)

    def matmuls(self) -> Inventory:
        return matmuls(self.recipe)


def register(model) -> str:
    """Put ``model``'s composed layer in ``ARCHITECTURES`` under the name of its family and
    recipe (``composed:<model_type>:<hash>``), and return the name."""
    import hashlib

    from .registry import ARCHITECTURES

    digest = hashlib.sha256(repr((model.recipe.key(), model.tied, model.positions)).encode()).hexdigest()[:8]
    name = f"composed:{model.recipe.family}:{digest}"
    ARCHITECTURES.setdefault(name, RecipeArchitecture(model.recipe, model.tied, model.positions,
                                                      bool(model.position_table)))
    return name


def _gemma3n_layer(recipe: Recipe, kernel: str, ffn: Expr = f, kv_heads: Expr = g) -> parts.Part:
    """Gemma3nTextDecoderLayer (transformers 5.24.0 models/gemma3n/modeling_gemma3n.py:1248-1322): AltUp's
    predict on the n_u streams; the active prediction through input_layernorm (its output read by LAuReL and
    by Q, K, V); Gemma3nTextAttention (:1150-1245: Q, K, V, O with ``attention_bias``, per-head q_norm and
    k_norm with weights, v_norm without, RoPE on Q and K, scaling 1); post_attention_layernorm; (active +
    attention + LAuReL)/√2; pre_feedforward_layernorm, Gemma3nTextMLP (:938-973, gated, the Gaussian top-k on
    the sparse layers), post_feedforward_layernorm, the residual; AltUp's correct; the per-layer input.
    KV-shared layers (share L_kv/L, :1165, :1210-1211) have no k_proj, v_proj, k_norm, v_norm and compute no
    K, V: they read the last earlier layer of their type's K and V — on the fused kernel (native GQA, no
    copy) they keep nothing of them; HF's eager path copies them to a heads (repeat_kv), which that layer keeps,
    unless g = a (``kv_shared_unrepeated``: repeat_kv returns them). ``kv_heads``: g. Each layer is billed its slice of the model-level per-layer inputs
    (:func:`gemma3n_parts.per_layer_input_slice`)."""
    from ...core.dims import L, L_kv, L_sp, h_p, n_u, r_l

    width = head_width(recipe)
    own = (L - L_kv) / L if recipe.kv_shared_layers else Integer(1)
    sparse = L_sp / L if recipe.sparse_layers else Integer(0)
    q, kv = a * width, kv_heads * width
    params = [*parts._linear_params("attention/query", h, q, recipe.qkv_bias, gemma3n_parts.GEMMA3N),
              *parts._linear_params("attention/key", h, kv, recipe.qkv_bias, gemma3n_parts.GEMMA3N,
                                    share=own),
              *parts._linear_params("attention/value", h, kv, recipe.qkv_bias, gemma3n_parts.GEMMA3N,
                                    share=own),
              *parts._linear_params("attention/output", q, h, recipe.o_bias, gemma3n_parts.GEMMA3N)]
    projections = parts.Part(
        tuple(params),
        (parts._tokens("attention/qkv_input", h, note="input_layernorm's output: the Q, K, V projections' and "
                       "LAuReL's input", source=gemma3n_parts.GEMMA3N),),
        (parts._linear("attention/query", h, q, gemma3n_parts.GEMMA3N),
         parts._linear("attention/key", h, kv, gemma3n_parts.GEMMA3N, batch=own),
         parts._linear("attention/value", h, kv, gemma3n_parts.GEMMA3N, batch=own)))
    norms = (gemma3n_parts.gemma3n_norm("attention/query_norm", width, a, heads=True)
             + gemma3n_parts.gemma3n_norm("attention/key_norm", width, kv_heads, share=own, heads=True)
             + gemma3n_parts.gemma3n_norm("attention/value_norm", width, kv_heads, with_scale=False, share=own, heads=True))
    core = parts.attention_core(width, kv_heads, kernel)
    # a shared layer's K, V are the producer's storages: the fused kernel reads them as they are (native GQA), and
    # eager's repeat_kv copies them to a heads unless g = a (then it returns them)
    if recipe.kv_shared_layers and (kernel == "fused" or recipe.kv_shared_unrepeated):
        core = parts.Part(core.params, tuple(
            replace(t, shape=(own, *t.shape), split_dim=t.split_dim + 1,
                    note=t.note + "; the KV-shared layers read the producer's (nothing kept)")
            if t.name in ("attention/key", "attention/value") else t for t in core.saved), core.matmuls)
    attention = projections + norms + core + parts.attention_output(width, recipe.o_bias)
    mlp = parts.mlp("gated", ffn, recipe.activation)
    if recipe.sparse_layers:
        mlp = mlp + gemma3n_parts.gaussian_topk(ffn, sparse)
    return (gemma3n_parts.altup(n_u, recipe.altup_correct_scale)
            + gemma3n_parts.gemma3n_norm("attention/norm", h) + gemma3n_parts.laurel(r_l) + attention
            + gemma3n_parts.gemma3n_norm("attention/post_norm", h) + gemma3n_parts.gemma3n_norm("mlp/norm", h) + mlp
            + gemma3n_parts.gemma3n_norm("mlp/post_norm", h) + gemma3n_parts.per_layer_input(h_p, recipe.activation)
            + gemma3n_parts.per_layer_input_slice(h_p))
