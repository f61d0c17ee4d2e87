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
from ...core.tensors import Axis, Group, Inventory, Matmul, Parameter, SavedTensor
from . import llama
from .conventions import CUDA, conventions

HF_MIXTRAL = "HF transformers 5.24.0 MixtralSparseMoeBlock"
MOE = "Fedus et al. 2021 §2.1; Jiang et al. 2024 §2.1 (Mixtral)"
SHARED = "DeepSeekMoE (Dai et al. 2024 §3.2); traced in Qwen2MoeSparseMoeBlock"

#: Balanced routing: every expert receives the same share of the s·b·k assignments.
BALANCED = s * b * k / E

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


def _router(name, last, dtype, note):
    return SavedTensor(name, (s, b, last), dtype, Axis.SEQUENCE, 0, Group.BODY, HF_MIXTRAL, note)


def _expert(name, experts, tokens, last, dtype="bf16", note="", source=HF_MIXTRAL, group=Group.BODY):
    """A per-expert tensor (experts, tokens, last); expert parallelism splits axis 0."""
    return SavedTensor(name, (experts, tokens, last), dtype, Axis.EXPERT, 0, group, source, note)


def moe_block(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
              tokens_per_expert: Expr | None = None, style=MIXTRAL) -> tuple[SavedTensor, ...]:
    """The saved tensors of the routed MLP (after its RMSNorm); ``style``: a :class:`Routing`."""
    style = routing(style)
    tokens = BALANCED.subs({E: experts, k: top_k}) if tokens_per_expert is None else tokens_per_expert
    terms = [
        _router("moe/router_input", h, "bf16", "RMSNorm output: the router's and the experts' gathers' input"),
        _router("moe/router_probabilities", experts, "fp32", "softmax of the router logits, fp32"),
        _router("moe/topk_indices", top_k, "int64", "the k chosen experts of each token"),
    ]
    if style.renormalize:
        terms += [
            _router("moe/routing_weights", top_k, "fp32", "the k probabilities, renormalised to sum 1"),
            SavedTensor("moe/routing_weight_sum", (s, b), "fp32", Axis.SEQUENCE, 0, Group.BODY, style.source,
                        "sum of the k probabilities (the renormalising divisor)"),
        ]
    terms += [
        _expert("moe/expert/token_index", experts, tokens, 2, "int64",
                "(slot, token) pairs of the expert's assignments: one torch.where storage, kept by the gathers"),
        _expert("moe/expert/input", experts, tokens, h, note="the expert's tokens, gathered"),
        _expert("moe/expert/gate_up_output", experts, tokens, 2 * expert_ffn,
                note="fused gate|up projection output: SiLU's input and the up half"),
        _expert("moe/expert/silu_output", experts, tokens, expert_ffn, note="SiLU(gate), kept for ·up",
                group=Group.EXPERT_ACTIVATION),
        _expert("moe/expert/down_input", experts, tokens, expert_ffn, note="SiLU(gate)·up",
                group=Group.EXPERT_ACTIVATION_OUTPUT),
        _expert("moe/expert/routing_weight", experts, tokens, 1, style.weight_dtype,
                "the token's weight for this expert"),
        _expert("moe/expert/down_output", experts, tokens, h, note="kept for the routing weight's gradient"),
        _expert("moe/expert/combine_input", experts, tokens, h,
                note="weighted output cast back to bf16, kept by index_add_"),
    ]
    if shared_experts != 0:
        terms += [
            SavedTensor(f"moe/shared/{n}", (shared_experts, s, b, width), "bf16", Axis.TENSOR, 3, Group.BODY,
                        SHARED, note)
            for n, width, note in (("gate_output", expert_ffn, "SiLU's input"),
                                   ("silu_output", expert_ffn, "kept for ·up"),
                                   ("up_output", expert_ffn, "kept for ·SiLU"),
                                   ("down_input", expert_ffn, "SiLU(gate)·up"))
        ]
        if style.shared_gate:
            terms += [
                SavedTensor("moe/shared/gate_sigmoid", (s, b, 1), "bf16", Axis.SEQUENCE, 0, Group.BODY,
                            style.source, "sigmoid of the shared-expert gate, one per token"),
                SavedTensor("moe/shared/output", (s, b, h), "bf16", Axis.SEQUENCE, 0, Group.BODY, style.source,
                            "the shared experts' output, kept by the gating multiply"),
            ]
    return tuple(terms)


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
    held = top_k if active else experts
    note = "k experts (N_active)" if active else "all E experts (N_total)"
    moe = [
        Parameter("layer/moe/router_weight", (h, experts), "layer", MOE),
        Parameter("layer/moe/experts_gate_up_weight", (held * h, 2 * expert_ffn), "layer", MOE,
                  note + ": stacked h×2f_e matrices"),
        Parameter("layer/moe/experts_down_weight", (held * expert_ffn, h), "layer", MOE,
                  note + ": stacked f_e×h matrices"),
    ]
    if shared_experts != 0:
        moe += [Parameter("layer/moe/shared_gate_up_weight", (shared_experts * h, 2 * expert_ffn), "layer", SHARED),
                Parameter("layer/moe/shared_down_weight", (shared_experts * expert_ffn, h), "layer", SHARED)]
        if routing(style).shared_gate:
            moe.append(Parameter("layer/moe/shared_gate_weight", (h,), "layer", routing(style).source, "h -> 1"))
    terms = [t for t in dense if not t.name.startswith("layer/mlp/") or t.name == "layer/mlp/norm_weight"]
    return Inventory(tuple(terms[:6] + moe + terms[6:]))


def matmuls(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, shared_experts: Expr = E_s,
            tokens_per_expert: Expr | None = None, kv_heads: Expr = g, style=MIXTRAL) -> Inventory:
    """The matmuls of one MoE layer and the logits: attention as LLaMA, the
    router, each expert over its tokens (E·T_e = s·b·k in total), the shared
    experts over every token."""
    tokens = BALANCED.subs({E: experts, k: top_k}) if tokens_per_expert is None else tokens_per_expert
    dense = llama.matmuls(kv_heads=kv_heads)
    moe = [
        Matmul("layer/moe/router", 1, b * s, h, experts, True, "layer", MOE),
        Matmul("layer/moe/experts_gate_up", experts, tokens, h, 2 * expert_ffn, True, "layer", MOE),
        Matmul("layer/moe/experts_down", experts, tokens, expert_ffn, h, True, "layer", MOE),
    ]
    if shared_experts != 0:
        moe += [Matmul("layer/moe/shared_gate_up", shared_experts, b * s, h, 2 * expert_ffn, True, "layer", SHARED),
                Matmul("layer/moe/shared_down", shared_experts, b * s, expert_ffn, h, True, "layer", SHARED)]
        if routing(style).shared_gate:
            moe.append(Matmul("layer/moe/shared_gate", 1, b * s, h, 1, True, "layer", routing(style).source))
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
