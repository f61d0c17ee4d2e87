"""The bill: the four ledgers of one model under one layout, itemised.

Every line keeps its symbolic expression (papers' letters), its exact value,
its source and its condition, so a printed number can name where it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from sympy import Expr, Integer, Rational

from .architectures import gpt, llama, moe, output
from .dims import E_s, L, f
from .layout import Layout
from .ledgers import activations, flops, params, states
from .models import ConfigError, ModelConfig
from .numeric import exact, exact_int
from .tensors import Group


@dataclass(frozen=True)
class Line:
    """One item of a ledger."""

    ledger: str
    name: str
    expr: Expr
    value: Rational
    source: str
    condition: str = ""


@dataclass
class Bill:
    model: ModelConfig
    layout: Layout
    values: dict[str, int]
    lines: list[Line]
    totals: dict[str, int | Rational | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def ledger(self, name: str) -> list[Line]:
        return [line for line in self.lines if line.ledger == name]


LEDGERS = ("params", "model_states", "activations", "flops", "output_side")

#: The final norm each architecture's output side has (``architectures.output``).
OUTPUT_NORM = {"gpt": "layernorm", "llama": "rmsnorm-eager", "moe": "rmsnorm-eager"}

#: The inventories (``ModelConfig.arch``) :func:`make_bill` itemises, and with
#: it every consumer of a ModelConfig (timeline, plan, solve), all through
#: :func:`inventories`. The HF reader (``symbolic.hf``) gives a model one of
#: these arches, and otherwise maps it onto the GPT layer and states what that
#: approximates.
BILLED_ARCHITECTURES = ("gpt", "llama", "moe")


def structure(model: ModelConfig) -> tuple:
    """What of ``model`` the shape of its inventories depends on (not its
    numbers): the key :func:`architecture_inventories` is cached by."""
    return model.arch, bool(model.ffn), model.tied, model.positions, bool(model.shared_experts)


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


def make_bill(model: ModelConfig, layout: Layout = Layout(), params_hand: int | None = None,
              gpu_memory: int | None = None) -> Bill:
    """Compute every ledger of ``model`` under ``layout``, exactly.

    ``params_hand``: a hand-filled parameter count (seed 001 §5's N) used for
    the model states instead of the configuration's count; both are reported.
    ``gpu_memory``: bytes per GPU to compare the total against.
    """
    layout.validate(model)
    values = layout.values(model)
    param_inv, saved_inv, mm_inv = inventories(model)
    lines: list[Line] = []
    notes: list[str] = []

    # Parameters: the inventory, each layer term repeated L times.
    for term in param_inv:
        expr = term.count * (L if term.scope == "layer" else 1)
        lines.append(Line("params", term.name, expr, exact(expr, values), term.source, term.note))
    params_config = exact_int(params.count(param_inv), values)
    params_eq2 = exact_int(params.count(param_inv, params.eq2_scopes()), values)

    # Model states: bytes/param blocks of the recipe, sharded t·p and by ZeRO over d.
    recipe = states.RECIPES[layout.optimizer]
    n_states = params_hand if params_hand is not None else params_config
    state_values = dict(values, Psi=n_states)
    condition = (f"{recipe.condition}; ZeRO-{layout.zero}; even split over t·p (first order)"
                 + ("; Psi = hand-filled N" if params_hand is not None else "; Psi = config count"))
    for name, expr in states.blocks(recipe, layout.zero).items():
        lines.append(Line("model_states", name, expr, exact(expr, state_values), recipe.source, condition))

    # Activations: the saved tensors of the layer under the strategy, times the layers held.
    strategy = layout.strategy()
    in_flight, layers_held = strategy.layers_held()
    scale = in_flight * layers_held
    for term in activations.layer_inventory(strategy, saved_inv):
        expr = scale * term.bytes
        lines.append(Line("activations", term.name, expr, exact(expr, values), term.source,
                          f"{term.dtype}, split: {term.split.value}"
                          + (f" /{term.sharded_by}" if term.sharded_by != 1 else "")))

    # The output side — final norm, logits input, fp32 log-softmax, targets — as its own lines: the
    # last pipeline stage holds it for the one micro-batch between forward and backward. The papers
    # leave it out, so it stays out of total_bytes (reported beside it).
    for term in strategy.shard(output.saved_tensors(norm=OUTPUT_NORM[model.arch])):
        lines.append(Line("output_side", term.name, term.bytes, exact(term.bytes, values), term.source,
                          f"{term.dtype}, split: {term.split.value}"
                          + (f" /{term.sharded_by}" if term.sharded_by != 1 else "")))

    # FLOPs of one iteration, whole model: per micro-batch × micro-batches.
    micro_batches = layout.iteration_micro_batches() * layout.dp
    recompute = recompute_for_flops(layout.recompute, saved_inv)
    for mm in mm_inv:
        alone = type(mm_inv)((mm,))
        expr = flops.hardware_training(recompute, alone) * micro_batches
        recomputed = flops.recompute_extra(recompute, alone) != 0
        lines.append(Line("flops", mm.name, expr, exact(expr, values), mm.source,
                          "forward + backward (2×)" + (f" + {recompute} recompute (1×)" if recomputed else "")))

    if fused_attention(saved_inv):
        # The fused attention kernel keeps only the log-sum-exp: its backward recomputes Q·Kᵀ.
        expr = fused_backward_recompute(saved_inv, mm_inv) * micro_batches
        lines.append(Line("flops", "layer/attention/scores (fused kernel's backward recompute)", expr,
                          exact(expr, values), llama.FLASH, "hardware FLOPs: FlashAttention recomputes Q·Kᵀ"))

    def total(ledger):
        return sum((line.value for line in lines if line.ledger == ledger), Integer(0))

    states_bytes = total("model_states")
    activation_bytes = total("activations")
    model_flops = exact_int(flops.model_training(mm_inv) * micro_batches, values)
    hardware_flops = int(total("flops"))
    gpus = layout.tp * layout.pp * layout.dp
    totals = {
        "params": params_config,
        "params_eq2": params_eq2,
        "params_hand": params_hand,
        "params_for_states": n_states,
        "model_states_bytes": _int(states_bytes),
        "activation_bytes": _int(activation_bytes),
        "total_bytes": _int(states_bytes + activation_bytes),
        "output_side_bytes": _int(total("output_side")),
        "gpu_memory_bytes": gpu_memory,
        "flops_per_iteration": hardware_flops,
        "model_flops_per_iteration": model_flops,
        "flops_per_gpu_per_iteration": Rational(hardware_flops, gpus),
        "tokens_per_iteration": micro_batches * values["b"] * values["s"],
        "gpus": gpus,
    }
    active = active_parameters(model)
    if active is not None:  # seed 001 §07: N_total for the states, N_active for the FLOPs
        totals["params_active"] = exact_int(params.count(active), values)
    if gpu_memory is not None:
        totals["headroom_bytes"] = gpu_memory - totals["total_bytes"]
    if params_hand is not None:
        diff = params_hand - params_config
        notes.append(f"hand-filled N = {params_hand:,} differs from the config count {params_config:,} by "
                     f"{diff:+,} params ({float(Rational(diff, params_config) * 100):+.2f}% of the config count)")
    return Bill(model, layout, values, lines, totals, notes)


def _int(x: Rational) -> int | Rational:
    """Bytes are whole numbers when the sharding divides evenly; keep exact otherwise."""
    return int(x) if Rational(x).is_Integer else Rational(x)

