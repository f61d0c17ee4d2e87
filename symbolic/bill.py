"""The bill: the four ledgers of one model under one layout, itemised.

Every line keeps its symbolic expression (papers' letters), its exact value,
its source and its condition, so a printed number can name where it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Add, Expr, Integer, Rational

from .architectures import gpt, llama, moe
from .dims import E_s, L, f
from .layout import Layout
from .ledgers import activations, flops, params, states
from .models import ModelConfig
from .numeric import exact, exact_int


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


LEDGERS = ("params", "model_states", "activations", "flops")

#: The inventories (``ModelConfig.arch``) :func:`make_bill` itemises. The HF
#: reader (``symbolic.hf``) gives a model another arch only when it is listed
#: here; otherwise it maps the model onto the GPT layer and states what that
#: approximates. Add an arch once ``make_bill`` dispatches on it.
#: ``make_bill`` itself dispatches on gpt, llama and moe (:func:`inventories`); llama and moe join
#: this list once the other consumers of a ModelConfig (the timeline) dispatch the same way.
BILLED_ARCHITECTURES = ("gpt",)


def _gpt_dims(model: ModelConfig) -> Expr:
    """The FFN width as an expression: 4h for GPT, the symbol f when given."""
    return f if model.ffn else gpt.GPT_FFN


def inventories(model: ModelConfig):
    """(parameters, saved tensors, matmuls) of ``model.arch``, in the letters
    :meth:`ModelConfig.values` gives values for. GPT: f = 4h unless ffn is
    given. LLaMA: SwiGLU of width f, g key/value heads, fused attention, HF
    RMSNorm. MoE: as LLaMA with E experts of width f_e, top-k, E_s shared."""
    if model.arch == "gpt":
        ffn = _gpt_dims(model)
        return (gpt.parameters(ffn=ffn, tied=model.tied, positions=model.positions),
                gpt.saved_tensors(ffn=ffn), gpt.matmuls(ffn=ffn))
    if model.arch == "llama":
        return llama.parameters(tied=model.tied, positions=model.positions), llama.saved_tensors(), llama.matmuls()
    if model.arch == "moe":
        shared = E_s if model.shared_experts else 0
        return (moe.parameters(shared_experts=shared, tied=model.tied, positions=model.positions),
                moe.saved_tensors(shared_experts=shared), moe.matmuls(shared_experts=shared))
    raise ValueError(f"the bill itemises {', '.join(BILLED_ARCHITECTURES)}, not arch {model.arch!r}")


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
    act_condition = strategy.describe() + "; transformer layers only"
    for term in activations.layer_inventory(strategy, saved_inv):
        expr = scale * term.bytes
        lines.append(Line("activations", term.name, expr, exact(expr, values), term.source,
                          f"{term.dtype}, split: {term.split.value}"
                          + (f" /{term.sharded_by}" if term.sharded_by != 1 else "")))

    # FLOPs of one iteration, whole model: per micro-batch × micro-batches.
    micro_batches = layout.iteration_micro_batches() * layout.dp
    for mm in mm_inv:
        alone = type(mm_inv)((mm,))
        expr = flops.hardware_training(layout.recompute, alone) * micro_batches
        recomputed = flops.recompute_extra(layout.recompute, alone) != 0
        lines.append(Line("flops", mm.name, expr, exact(expr, values), mm.source,
                          "forward + backward (2×)" + (f" + {layout.recompute} recompute (1×)" if recomputed else "")))

    if model.arch in ("llama", "moe"):
        # The fused attention kernel keeps only the log-sum-exp: its backward recomputes Q·Kᵀ.
        expr = L * llama.fused_backward_recompute(mm_inv) * micro_batches
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
        "gpu_memory_bytes": gpu_memory,
        "flops_per_iteration": hardware_flops,
        "model_flops_per_iteration": model_flops,
        "flops_per_gpu_per_iteration": Rational(hardware_flops, gpus),
        "tokens_per_iteration": micro_batches * values["b"] * values["s"],
        "gpus": gpus,
    }
    if model.arch == "moe":  # seed 001 §07: N_total for the states, N_active for the FLOPs
        shared = E_s if model.shared_experts else 0
        totals["params_active"] = exact_int(params.count(moe.parameters(
            shared_experts=shared, tied=model.tied, positions=model.positions, active=True)), values)
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

