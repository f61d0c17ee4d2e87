"""The mixture-of-experts layer: LLaMA attention, then a routed SwiGLU MLP.

Shazeer et al. 2017 (arXiv 1701.06538), Fedus et al. 2021 (Switch, arXiv
2101.03961 §2.1), Jiang et al. 2024 (Mixtral, arXiv 2401.04088 §2.1): a
router (h -> E logits), top-k routing with the k weights renormalised, E
experts of FFN width ``f_e`` each, and optional ``E_s`` shared experts every
token goes through (DeepSeekMoE, arXiv 2401.06066 §3.2). Saved tensors as
HuggingFace transformers 5.24.0 keeps them (the "eager" experts loop, traced
by the tests): ``MixtralSparseMoeBlock`` (:data:`MIXTRAL` routing) and
``Qwen2MoeSparseMoeBlock`` (:data:`QWEN2_MOE`: shared experts behind a
sigmoid gate, bf16 routing weights, renormalisation off by default).

Two counts of parameters (seed 001 §07): ``N_total`` (every expert) sizes the
model states, ``N_active`` (k experts per token) the FLOPs —
``parameters(active=True)``.

Tokens per expert depend on the routing. They are a shape entry,
``tokens_per_expert``, whose default is **balanced routing**:
``T_e = s·b·k/E`` (:data:`BALANCED`); pass the symbol ``T_e`` for the free
form, or a capacity factor ``c·s·b·k/E``. Every expert-side term is linear in
its token count, so the layer's total depends only on the sum over experts,
s·b·k — the same for any routing without dropped tokens; the per-expert
peak is what balance assumes.

Expert parallelism (:func:`expert_parallel`) splits the expert axis: each of
the ``e`` GPUs holds E/e experts and receives their tokens from all ``e``
ranks, so under balanced routing the activations per GPU do not shrink while
the expert parameters do.

The routed MLP is a recipe of the parts the composed families use
(:func:`.expert_parts.moe_layer`: :func:`.expert_parts.moe_router`, :func:`.expert_parts.routed_experts`,
:func:`.expert_parts.shared_experts` with or without its gate) — one code path for
Mixtral, Qwen2-MoE and the composed Qwen-MoE/DeepSeek layers; this module adds
the LLaMA attention around it and its Mixtral/Qwen2-MoE routing conventions.

The bill, plan and solve split these terms with the layout's
``symbolic.layout.strategies.expert_dispatch`` (expert parallelism e, expert
tensor parallelism e_t, TP/SP/CP, capacity factor, Megatron-Core's rank grids);
the two functions at the end of this module are the single-axis forms kept for
the inventory's own tests.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Expr

from ...core.dims import E, E_s, b, e, f_e, g, h, k, s
from ...core.tensors import Axis, Inventory, SavedTensor
from . import expert_parts, llama, parts
from .conventions import CUDA, conventions

HF_MIXTRAL = "HF transformers 5.24.0 MixtralSparseMoeBlock"
MOE = "Fedus et al. 2021 §2.1; Jiang et al. 2024 §2.1 (Mixtral)"

#: Balanced routing: every expert receives the same share of the s·b·k assignments.
BALANCED = expert_parts.balanced_tokens(E, k)

HF_QWEN2_MOE = "HF transformers 5.24.0 Qwen2MoeSparseMoeBlock"


@dataclass(frozen=True)
class Routing:
    """How an implementation routes and combines, as far as saved tensors care.

    renormalize: the k probabilities are divided by their sum (keeps the
    fp32 sum and the renormalised weights). weight_dtype: the dtype of the
    per-assignment weight the combine multiplies by (``fp32`` in Mixtral;
    ``bf16`` in Qwen2-MoE, which casts to the logits' dtype). shared_gate: a
    sigmoid gate (h -> 1) scales the shared experts' output (Qwen2-MoE).
    """

    name: str
    renormalize: bool
    weight_dtype: str
    shared_gate: bool
    source: str


MIXTRAL = Routing("mixtral", True, "fp32", False, HF_MIXTRAL)
QWEN2_MOE = Routing("qwen2_moe", False, "bf16", True, HF_QWEN2_MOE)
ROUTINGS = {r.name: r for r in (MIXTRAL, QWEN2_MOE)}


def routing(style) -> Routing:
    if isinstance(style, Routing):
        return style
    if style not in ROUTINGS:
        raise ValueError(f"unknown routing {style!r}; known: {', '.join(ROUTINGS)}")
    return ROUTINGS[style]


def _router_of(style: Routing) -> parts.Router:
    """The :class:`parts.Router` of a :class:`Routing` (the parts name what is saved)."""
    return parts.Router(style.name, renormalize=style.renormalize, weight_dtype=style.weight_dtype)


def moe_part(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
             tokens_per_expert: Expr | None = None, style=MIXTRAL) -> parts.Part:
    """The routed MLP (after its RMSNorm) as a recipe of parts — router, routed experts, and
    ``shared_experts`` shared experts of width ``expert_ffn`` each (one gated MLP of width E_s·f_e,
    as HF builds it) — the same parts the composed families use (``expert_parts.moe_layer``)."""
    style = routing(style)
    shared = None if shared_experts == 0 else shared_experts * expert_ffn
    return expert_parts.moe_layer(_router_of(style), expert_ffn, experts, top_k, shared, style.shared_gate,
                           tokens_per_expert=tokens_per_expert, source=style.source, paper=MOE)


def moe_block(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
              tokens_per_expert: Expr | None = None, style=MIXTRAL) -> tuple[SavedTensor, ...]:
    """The saved tensors of the routed MLP (after its RMSNorm); ``style``: a :class:`Routing`."""
    return moe_part(expert_ffn, experts, top_k, shared_experts, tokens_per_expert, style).saved


def saved_tensors(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
                  tokens_per_expert: Expr | None = None, kv_heads: Expr = g, attention: str = "fused",
                  norm: str = "eager", backend=CUDA, style=MIXTRAL) -> Inventory:
    """Every tensor one MoE layer saves: LLaMA attention, RMSNorm, routed MLP.

    No dropout, no LayerNorm: both backend conventions give this inventory.
    """
    conventions(backend)
    dense = llama.saved_tensors(kv_heads=kv_heads, attention=attention, norm=norm)
    attention_part = [t for t in dense if t.name.startswith("attention/") or t.name.startswith("mlp/norm")]
    return Inventory((*attention_part,
                      *moe_block(expert_ffn, experts, top_k, shared_experts, tokens_per_expert, style)))


def parameters(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
               tied: bool = False, positions: str = "rope", kv_heads: Expr = g, active: bool = False,
               style=MIXTRAL) -> Inventory:
    """Parameters of an MoE model. ``active=False``: N_total, every expert
    (model states); ``active=True``: N_active, the k experts a token uses
    (FLOPs per token)."""
    dense = llama.parameters(tied=tied, positions=positions, kv_heads=kv_heads)
    moe = list(moe_part(expert_ffn, experts, top_k, shared_experts, style=style).params)
    if active:  # the k experts a token goes through: the routed part's stacked weights at k of E
        held = {p.name: p for p in expert_parts.routed_experts(_router_of(routing(style)), expert_ffn, top_k, top_k).params}
        moe = [replace(held[p.name], note="k experts (N_active)") if p.name in held else p for p in moe]
    terms = [t for t in dense if not t.name.startswith("layer/mlp/") or t.name == "layer/mlp/norm_weight"]
    return Inventory(tuple(terms[:6] + moe + terms[6:]))


def matmuls(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
            tokens_per_expert: Expr | None = None, kv_heads: Expr = g, style=MIXTRAL) -> Inventory:
    """The matmuls of one MoE layer and the logits: attention as LLaMA, the
    router, each expert over its tokens (E·T_e = s·b·k in total), the shared
    experts over every token."""
    dense = llama.matmuls(kv_heads=kv_heads)
    moe = list(moe_part(expert_ffn, experts, top_k, shared_experts, tokens_per_expert, style).matmuls)
    attention = [mm for mm in dense if mm.name.startswith("layer/attention/")]
    output = [mm for mm in dense if mm.scope == "output"]
    return Inventory(tuple(attention + moe + output))


def expert_parallel(inventory: Inventory, ways: Expr = e) -> Inventory:
    """Split the expert axis ``ways`` ways (condition: ``ways`` divides E).

    Each GPU keeps E/ways experts, and each of them receives its tokens from
    all ``ways`` ranks of the expert-parallel group (the all-to-all): the
    token entry grows by ``ways``. Under balanced routing the bytes per GPU
    are unchanged; the experts' parameters are what expert parallelism divides.
    """
    def split(x: SavedTensor):
        if x.split is not Axis.EXPERT:
            return x
        shape = list(x.shape)
        shape[1] = shape[1] * ways
        return replace(x, shape=tuple(shape)).shard(ways)
    return inventory.map(split, f"expert_parallel({ways})")


def parameters_per_gpu(inventory: Inventory, ways: Expr = e) -> Inventory:
    """Expert parameters divided over ``ways`` expert-parallel GPUs (the rest replicated)."""
    return Inventory(tuple(replace(p, shape=(p.shape[0] / ways,) + p.shape[1:])
                           if p.name.startswith("layer/moe/experts_") else p for p in inventory),
                     inventory.applied + (f"expert_parallel({ways})",))


def inventories(structure) -> tuple[Inventory, Inventory, Inventory]:
    """(parameters, saved tensors, matmuls) of an MoE :class:`~symbolic.models.structure.Structure`:
    E_s shared experts when the model has them, else none."""
    shared = E_s if structure.shared_experts else 0
    return (parameters(shared_experts=shared, tied=structure.tied, positions=structure.positions),
            saved_tensors(shared_experts=shared), matmuls(shared_experts=shared))
