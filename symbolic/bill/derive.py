"""The bill: the four ledgers of one model under one layout, itemised.

Every line keeps its symbolic expression (papers' letters), its exact value,
its source and its condition, so a printed number can name where it came from.
"""
from __future__ import annotations

from functools import lru_cache

from sympy import Expr, Integer, sstr

from ..core.dims import E_s, L, L_1, Psi, c, e, e_t, f, p, t
from ..core.tensors import Group
from ..layout.experts import MEGATRON, routed_expert
from ..layout.layout import Layout
from ..layout.strategies import DISPATCHED
from ..ledgers import activations, flops, params, states
from ..models.architectures import gpt, llama, moe, output
from ..models.config import ConfigError, ModelConfig
from .evaluate import (  # noqa: F401 (the bill's types)
    BILLED_ARCHITECTURES,
    LEDGERS,
    Bill,
    DerivedBill,
    DerivedLine,
    Line,
    derivation_key,
    evaluate,
    structure,
)

#: The final norm each architecture's output side has (``architectures.output``).
OUTPUT_NORM = {"gpt": "layernorm", "llama": "rmsnorm-eager", "moe": "rmsnorm-eager"}



def inventories(model: ModelConfig):
    """(parameters, saved tensors, matmuls) of ``model.arch``, in the letters
    :meth:`ModelConfig.values` gives values for. GPT: f = 4h unless ffn is
    given. LLaMA: SwiGLU of width f, g key/value heads, fused attention, HF
    RMSNorm. MoE: as LLaMA with E experts of width f_e, top-k, E_s shared
    (Mixtral routing). The one place a ModelConfig's arch is dispatched on."""
    return architecture_inventories(*structure(model))


@lru_cache(maxsize=None)
def architecture_inventories(arch: str, symbolic_ffn: bool = False, tied: bool = True,
                             positions: str = "learned", shared_experts: bool = False):
    """:func:`inventories` by :func:`structure` key (cached: the inventories are immutable)."""
    if arch == "gpt":
        ffn = f if symbolic_ffn else gpt.GPT_FFN
        return (gpt.parameters(ffn=ffn, tied=tied, positions=positions),
                gpt.saved_tensors(ffn=ffn), gpt.matmuls(ffn=ffn))
    if arch == "llama":
        return llama.parameters(tied=tied, positions=positions), llama.saved_tensors(), llama.matmuls()
    if arch == "moe":
        shared = E_s if shared_experts else 0
        return (moe.parameters(shared_experts=shared, tied=tied, positions=positions),
                moe.saved_tensors(shared_experts=shared), moe.matmuls(shared_experts=shared))
    raise ConfigError(f"the bill itemises {', '.join(BILLED_ARCHITECTURES)}, not arch {arch!r}")


def active_parameters(model: ModelConfig):
    """The parameters a token goes through (seed 001 §07: N_active, which the
    FLOPs scale with); None for a dense model, whose N_active is N."""
    if model.arch != "moe":
        return None
    shared = E_s if model.shared_experts else 0
    return moe.parameters(shared_experts=shared, tied=model.tied, positions=model.positions, active=True)


def recompute_for_flops(recompute: str, saved_inv, modules: tuple = ()) -> str:
    """The recompute policy as the FLOPs see it. Selective recompute re-runs
    the attention core because it dropped the core's saved tensors
    (Korthikanti §5); a layer that saves none (a fused attention kernel keeps
    only the log-sum-exp) drops nothing under it, so nothing is re-run.
    ``modules``: Megatron-Core's recompute_modules (empty: core_attn); without
    ``core_attn`` no matmul is re-run (``moe_act`` repeats element-wise work)."""
    if recompute == "selective" and modules and "core_attn" not in modules:
        return "none"
    if recompute == "selective" and not any(term.group is Group.ATTENTION_CORE for term in saved_inv):
        return "none"
    return recompute


def fused_attention(saved_inv) -> bool:
    """Whether the layer's attention is a fused kernel (it saves the
    log-sum-exp, not the s×s probabilities)."""
    return "attention/logsumexp" in saved_inv.names()


def fused_backward_recompute(saved_inv, mm_inv) -> Expr:
    """FLOPs of one micro-batch the fused attention kernel adds in backward
    (it recomputes Q·Kᵀ, FlashAttention-2 §3.1); 0 without a fused kernel."""
    return L * llama.fused_backward_recompute(mm_inv) if fused_attention(saved_inv) else Integer(0)


def derive(model: ModelConfig, layout: Layout = Layout(), params_hand: int | None = None) -> DerivedBill:
    """Every ledger of ``model`` under ``layout`` as formulas in the papers'
    letters: the symbolic half of :func:`make_bill`."""
    param_inv, saved_inv, mm_inv = inventories(model)
    lines: list[DerivedLine] = []

    def add(ledger: str, name: str, expr: Expr, source: str, condition: str = "") -> None:
        lines.append(DerivedLine(ledger, name, sstr(expr), source, condition))

    # Parameters: the inventory, each layer term repeated L times.
    for term in param_inv:
        add("params", term.name, term.count * (L if term.scope == "layer" else 1), term.source, term.note)

    # Model states: bytes/param blocks of the recipe, sharded t·p and by ZeRO over d (d·c under
    # context parallelism: its ranks replicate the weights, the distributed optimizer shards over them).
    recipe = states.RECIPES[layout.optimizer]
    cp = layout.cp > 1
    condition = (f"{recipe.condition}; ZeRO-{layout.zero}"
                 + ((" over d·c" if layout.zero else "") + "; weights replicated on the c context-parallel ranks"
                    if cp else "")
                 + ("; the first stage's L_1 of L layers: Psi·L_1/L per stage, t ways (first order)"
                    if layout.uneven_stages else "; even split over t·p (first order)")
                 + ("; Psi = hand-filled N" if params_hand is not None else "; Psi = config count"))
    if model.experts:
        condition += (f"; routed experts split e·e_t·p ways" + (", ZeRO over edp = t·d·c/(e·e_t)" if layout.zero else "")
                      + f" ({MEGATRON})")
    for name, expr in model_state_blocks(model, layout, param_inv, recipe).items():
        add("model_states", name, expr, recipe.source, condition)

    # Activations: the saved tensors of the layer under the strategy, times the layers held.
    strategy = layout.strategy()
    in_flight, layers_held = strategy.layers_held()
    for term in activations.layer_inventory(strategy, saved_inv):
        add("activations", term.name, in_flight * layers_held * term.bytes, term.source, _split(term))

    # The output side — final norm, logits input, fp32 log-softmax, targets — as its own lines: the
    # last pipeline stage holds it for the one micro-batch between forward and backward. The papers
    # leave it out, so it stays out of total_bytes (reported beside it).
    for term in strategy.shard(output.saved_tensors(norm=OUTPUT_NORM[model.arch])):
        add("output_side", term.name, term.bytes, term.source, _split(term))

    # FLOPs of one iteration, whole model: per micro-batch × micro-batches.
    micro_batches = layout.iteration_micro_batches() * layout.dp
    recompute = recompute_for_flops(layout.recompute, saved_inv, tuple(layout.recompute_modules))
    for mm in mm_inv:
        alone = type(mm_inv)((mm,))
        recomputed = flops.recompute_extra(recompute, alone) != 0
        add("flops", mm.name, flops.hardware_training(recompute, alone) * micro_batches, mm.source,
            "forward + backward (2×)" + (f" + {recompute} recompute (1×)" if recomputed else ""))
    if fused_attention(saved_inv):
        # The fused attention kernel keeps only the log-sum-exp: its backward recomputes Q·Kᵀ.
        add("flops", "layer/attention/scores (fused kernel's backward recompute)",
            fused_backward_recompute(saved_inv, mm_inv) * micro_batches, llama.FLASH,
            "hardware FLOPs: FlashAttention recomputes Q·Kᵀ")

    formulas = {"params": sstr(params.count(param_inv)),
                "params_eq2": sstr(params.count(param_inv, params.eq2_scopes())),
                "model_flops": sstr(flops.model_training(mm_inv) * micro_batches),
                "params_per_gpu": sstr(params.per_gpu(param_inv, layout.pp > 1, expert_parallel=expert_ways(layout)[0],
                                                      expert_tensor_parallel=expert_ways(layout)[1],
                                                      pipeline_parallel=stage_ways(layout)))}
    active = active_parameters(model)
    if active is not None:
        formulas["params_active"] = sstr(params.count(active))
    if model.experts:
        formulas["params_routed_experts"] = sstr(routed_expert_parameters(param_inv))
    return DerivedBill(tuple(lines), formulas, strategy.describe())


def model_state_blocks(model: ModelConfig, layout: Layout, param_inv, recipe, zero: int | None = None,
                       params: Expr = Psi) -> dict:
    """Model-state bytes per GPU of each block of ``recipe`` (ZeRO stage ``zero``,
    the layout's by default), for the bill and the timeline alike: a dense model
    t·p ways, ZeRO over d (d·c); a mixture of experts with its routed experts on
    Megatron-Core's expert grid (e·e_t·p ways, ZeRO over edp = t·d·c/(e·e_t)) and
    its dense part on the dense grid (``states.expert_blocks``)."""
    zero = layout.zero if zero is None else zero
    context = c if layout.cp > 1 else Integer(1)
    if not model.experts:
        return states.blocks(recipe, zero, params, context_parallel=context, pipeline_parallel=stage_ways(layout))
    ep_ways, etp_ways = expert_ways(layout)
    return states.expert_blocks(recipe, zero, routed_expert_parameters(param_inv), params, context_parallel=context,
                                expert_parallel=ep_ways, expert_tensor_parallel=etp_ways,
                                pipeline_parallel=stage_ways(layout))


def stage_ways(layout: Layout) -> Expr:
    """What the stage accounted divides the layers' parameters by: p when the
    stages are even; L/L_1 with uneven stages (Megatron-Core's first/last-stage
    layer counts), so that a layer term's L becomes the first stage's L_1
    (first order, as the even split: the embedding's placement not counted
    apart in the model states)."""
    return L / L_1 if layout.uneven_stages else p


def expert_ways(layout: Layout) -> tuple:
    """(e, e_t) as the bill writes them: the symbol when the layout uses the
    axis, else its value (e = 1; e_t = t, Megatron-Core's default)."""
    return (e if layout.ep > 1 else Integer(1)), (e_t if layout.etp not in (0, layout.tp) else t)


def routed_expert_parameters(param_inv) -> Expr:
    """The routed experts' parameter count, all L layers (the rest is the dense part)."""
    return params.count(type(param_inv)(tuple(x for x in param_inv if routed_expert(x.name))))


def _split(term) -> str:
    return (f"{term.dtype}, split: {term.split.value}"
            + (f" /{term.sharded_by}" if term.sharded_by != 1 else "")
            + (", context-parallel: s/c per rank" if c in term.bytes.free_symbols else "")
            + (", " + term.note.split(DISPATCHED)[-1] if DISPATCHED in term.note else ""))


def make_bill(model: ModelConfig, layout: Layout = Layout(), params_hand: int | None = None,
              gpu_memory: int | None = None) -> Bill:
    """Compute every ledger of ``model`` under ``layout``, exactly.

    ``params_hand``: a hand-filled parameter count (seed 001 §5's N) used for
    the model states instead of the configuration's count; both are reported.
    ``gpu_memory``: bytes per GPU to compare the total against.
    """
    layout.validate(model)
    return evaluate(derive(model, layout, params_hand), model, layout, params_hand, gpu_memory)
