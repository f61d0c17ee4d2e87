"""The bill: the four ledgers of one model under one layout, itemised.

Every line keeps its symbolic expression (papers' letters), its exact value,
its source and its condition, so a printed number can name where it came from.
"""
from __future__ import annotations

from functools import lru_cache

from sympy import Expr, Integer, sstr

from ..core.dims import E_s, L, P, c, f, s
from ..core.tensors import Group
from ..layout.layout import Layout
from ..ledgers import activations, flops, params, states
from ..models.architectures import composed, gpt, llama, moe, output
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



def output_norm(model: ModelConfig) -> str:
    """The final norm of the model's output side (``architectures.output``)."""
    if model.recipe is not None:
        return "layernorm" if model.recipe.norm == "layernorm" else "rmsnorm-eager"
    return OUTPUT_NORM[model.arch]


def inventories(model: ModelConfig):
    """(parameters, saved tensors, matmuls) of ``model.arch``, in the letters
    :meth:`ModelConfig.values` gives values for. GPT: f = 4h unless ffn is
    given. LLaMA: SwiGLU of width f, g key/value heads, fused attention, HF
    RMSNorm. MoE: as LLaMA with E experts of width f_e, top-k, E_s shared
    (Mixtral routing). The one place a ModelConfig's arch is dispatched on."""
    return architecture_inventories(*structure(model))


@lru_cache(maxsize=None)
def architecture_inventories(arch: str, symbolic_ffn: bool = False, tied: bool = True,
                             positions: str = "learned", shared_experts: bool = False, *extra):
    """:func:`inventories` by :func:`structure` key (cached: the inventories are immutable).
    ``extra``: ``"position_table"`` (a learned table of P rows) and a composed layer's recipe key."""
    table = "position_table" in extra
    if arch == "composed":
        recipe_key = next((item for item in extra if isinstance(item, tuple)), None)
        if recipe_key is None:
            raise ConfigError("a composed model needs its recipe (ModelConfig.recipe)")
        return composed.inventories(recipe_key, tied, positions, table)
    if arch == "gpt":
        ffn = f if symbolic_ffn else gpt.GPT_FFN
        activation = next((item for item in extra if item in ("gelu_new", "gelu_fast")), "gelu")
        return (gpt.parameters(ffn=ffn, tied=tied, positions=positions, table=P if table else s),
                gpt.saved_tensors(ffn=ffn, activation=activation), gpt.matmuls(ffn=ffn))
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
    if model.arch == "composed":
        if model.recipe.moe == "none":
            return None
        return composed.active_parameters(model.recipe, model.tied, model.positions, bool(model.position_table))
    if model.arch != "moe":
        return None
    shared = E_s if model.shared_experts else 0
    return moe.parameters(shared_experts=shared, tied=model.tied, positions=model.positions, active=True)


def recompute_for_flops(recompute: str, saved_inv) -> str:
    """The recompute policy as the FLOPs see it. Selective recompute re-runs
    the attention core because it dropped the core's saved tensors
    (Korthikanti §5); a layer that saves none (a fused attention kernel keeps
    only the log-sum-exp) drops nothing under it, so nothing is re-run."""
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
                 + "; even split over t·p (first order)"
                 + ("; Psi = hand-filled N" if params_hand is not None else "; Psi = config count"))
    for name, expr in states.blocks(recipe, layout.zero, context_parallel=c if cp else 1).items():
        add("model_states", name, expr, recipe.source, condition)

    # Activations: the saved tensors of the layer under the strategy, times the layers held.
    strategy = layout.strategy()
    in_flight, layers_held = strategy.layers_held()
    for term in activations.layer_inventory(strategy, saved_inv):
        add("activations", term.name, in_flight * layers_held * term.bytes, term.source, _split(term))

    # The output side — final norm, logits input, fp32 log-softmax, targets — as its own lines: the
    # last pipeline stage holds it for the one micro-batch between forward and backward. The papers
    # leave it out, so it stays out of total_bytes (reported beside it).
    for term in strategy.shard(output.saved_tensors(norm=output_norm(model))):
        add("output_side", term.name, term.bytes, term.source, _split(term))

    # FLOPs of one iteration, whole model: per micro-batch × micro-batches.
    micro_batches = layout.iteration_micro_batches() * layout.dp
    recompute = recompute_for_flops(layout.recompute, saved_inv)
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
                "model_flops": sstr(flops.model_training(mm_inv) * micro_batches)}
    active = active_parameters(model)
    if active is not None:
        formulas["params_active"] = sstr(params.count(active))
    return DerivedBill(tuple(lines), formulas, strategy.describe())


def _split(term) -> str:
    return (f"{term.dtype}, split: {term.split.value}"
            + (f" /{term.sharded_by}" if term.sharded_by != 1 else "")
            + (", context-parallel: s/c per rank" if c in term.bytes.free_symbols else ""))


def make_bill(model: ModelConfig, layout: Layout = Layout(), params_hand: int | None = None,
              gpu_memory: int | None = None) -> Bill:
    """Compute every ledger of ``model`` under ``layout``, exactly.

    ``params_hand``: a hand-filled parameter count (seed 001 §5's N) used for
    the model states instead of the configuration's count; both are reported.
    ``gpu_memory``: bytes per GPU to compare the total against.
    """
    layout.validate(model)
    return evaluate(derive(model, layout, params_hand), model, layout, params_hand, gpu_memory)
