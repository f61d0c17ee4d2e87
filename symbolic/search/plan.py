"""Plan a training layout: every valid layout of a model on N GPUs, evaluated at once.

The bill (:mod:`symbolic.bill.derive`) itemises one layout exactly. A plan asks the
same question of every layout at once: the ledgers' expressions are built by
the same calls the bill makes (``params.count``, ``states.blocks``,
``activations.layer_inventory`` × ``Strategy.layers_held``,
``flops.hardware_training``), kept as text in the bill's cache (:class:`GroupFormulas`),
read by the guarded reader into one numpy function per group and evaluated over arrays of layouts.
Floats only screen and rank; every layout a plan shows is evaluated again
exactly, from the same expressions, so its totals equal ``make_bill``'s.

What a plan models, and what it does not:

* **Memory per GPU** = the bill's verdict: the peak of the step on the busiest
  GPU, the largest of the candidate instants of the first and the last
  pipeline stage, and with uneven stages of the busiest middle one (rank 1, L_m
  layers) (``symbolic.ledgers.peak``: model states, the chunks in flight,
  the output side, work tensors, the recompute window, communication buffers,
  ZeRO-3's gathered weights, the optimizer step's temporaries). Fragmentation
  and the CUDA context are not modelled; ``margin`` bytes are reserved from the
  GPU's memory for them: a layout *fits* when ``total ≤ gpu_memory − margin``.
  The papers' total (states + first-stage activations) is ``paper_total_bytes``.
* **Step time** = hardware FLOPs per GPU per iteration (recompute included,
  ``ledgers.flops.hardware_training``) / (peak × utilisation) × (1 + bubble),
  with the pipeline bubble of Narayanan et al. 2021 §2.2: ``(p−1)/m`` for
  1F1B and ``(p−1)/(v·m)`` interleaved, m = micro-batches per pipeline per
  iteration. Communication time, overlap and kernel efficiency differences
  are not modelled: the utilisation stands for all of them.
* **Valid layouts**: t·p·d·c = N; :meth:`Layout.validate` (heads and FFN width
  divisible by t, layers by p·v, s by c and by t·c under SP, global batch by b·d); and
  the rules of the frameworks the papers used — ``symbolic.layout.layout.LAYOUT_RULES``,
  the one rule set every command applies: interleaving only when the
  micro-batches per pipeline are a multiple of p (Megatron-LM's
  ``get_forward_backward_func`` asserts it for the interleaved schedule),
  ZeRO-2/3 not combined with pp > 1 (DeepSpeed's ``PipelineEngine`` asserts
  ZeRO stage < 2: "incompatible with pipeline parallelism"), ZeRO only with
  d·c > 1 and SP only with t > 1 — and t within one node (Narayanan et al.
  2021 §3.3, takeaway #1).
* **Context parallelism** (c, ``Layout.cp``): swept over the divisors of N
  that divide s (t·c under SP: Megatron-LM splits the sequence by c, then SP
  splits each rank's s/c by t), t·p·d·c = N; activations /c, weights
  replicated on the c ranks, ZeRO over d·c (as the bill). Its ring
  communication is not modelled, so at equal time per sequence a layout with
  fewer context-parallel ranks ranks first.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Mapping

from typing import TYPE_CHECKING

import numpy as np

# No sympy here: a plan whose groups' formulas are cached (group_formulas) reads them as text and
# computes in ints and Fractions, so sympy (≈ 0.3–0.5 s to import) loads only where a group is
# derived — inside the functions below that build expressions.
from ..layout.choices import FLOAT_ACTIVATION_DTYPES, RECOMPUTE
from ..layout.layout import Layout, stage_layers
from ..layout.stages import uneven_stage_ways
from ..layout.recipes import RECIPES  # the ledgers' recipes (ledgers.states re-exports them), as plain data
from ..ledgers.buffers import CommSettings
from ..ledgers.hardware import Hardware
from ..ledgers.hardware import load as load_hardware
from ..ledgers.time import Overlap, price
from ..models.config import BILLED_ARCHITECTURES, ConfigError, ModelConfig, check_position_table, positive_int
from ..models.structure import Structure

if TYPE_CHECKING:
    from sympy import Expr

#: The argument list of every vectorised ledger function (unused ones are ignored):
#: the GPT letters, then the LLaMA/MoE ones (key/value heads, experts, top-k, shared, expert width),
#: then the context-parallel size, then the expert-parallel, expert tensor-parallel sizes and the
#: capacity factor (symbolic.layout.experts).
#: m: micro-batch chunks in flight on the first stage (``Layout.in_flight``); m_last: on the last.
#: Last, the composed families' own letters (symbolic.models.architectures.composed), fixed per model.
#: L_1, L_p: layers on the first and the last stage (uneven stages; Layout.values). r: the LoRA rank.
#: L_m, m_mid: the middle stage's layers and chunks in flight (uneven stages: rank 1; with p ≤ 2, where no
#: stage is between, the first stage's L_1 and m, so its candidates repeat the first's).
#: By name (the guarded reader's formulas read them so); the sympy symbols, :data:`ARGS` and
#: ``m_last``, are built on first use (:func:`_letters`).
ARG_NAMES = ("s", "b", "h", "a", "L", "V", "t", "p", "d", "f", "v", "Psi", "g", "E", "k", "E_s", "f_e", "c", "e",
             "e_t", "C_f", "m", "m_last", "P", "d_h", "L_d", "f_s", "r_q", "r_kv", "d_n", "d_r", "d_v", "L_1",
             "L_p", "r", "L_n", "L_m", "m_mid", "L_w", "w", "n_m", "d_m", "d_s", "g_m", "p_c", "Q", "L_s",
             "L_a", "L_c", "K_c", "L_l", "H_k", "H_v", "D_k", "D_v")
#: The time model's arguments: the ledgers' letters and B (sequences per iteration).
TIME_NAMES = ARG_NAMES + ("B",)


@lru_cache(maxsize=None)
def _letters() -> dict:
    """The sympy symbol of every name of :data:`TIME_NAMES`: ``symbolic.core.dims``'s, and the
    plan-local ``m_last`` (chunks in flight on the last stage)."""
    from sympy import Symbol

    from ..core import dims
    letters = {name: getattr(dims, name, None) for name in TIME_NAMES}
    letters["m_last"] = Symbol("m_last", positive=True, integer=True)
    letters["m_mid"] = Symbol("m_mid", positive=True, integer=True)
    wrong = [name for name, x in letters.items() if x is None or x.name != name]
    if wrong:
        raise ValueError(f"plan letters {wrong} are not symbolic.core.dims symbols of those names")
    return letters


def __getattr__(name: str):
    """``ARGS``, ``TIME_ARGS`` and ``m_last`` (sympy symbols), built on first use (PEP 562)."""
    if name == "m_last":
        return _letters()["m_last"]
    if name == "ARGS":
        return tuple(_letters()[x] for x in ARG_NAMES)
    if name == "TIME_ARGS":
        return tuple(_letters()[x] for x in TIME_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The model's letters a plan holds fixed while it sweeps the layout's.
MODEL_LETTERS = ("s", "h", "a", "L", "V", "f", "g", "E", "k", "E_s", "f_e",
                 "P", "d_h", "L_d", "f_s", "r_q", "r_kv", "d_n", "d_r", "d_v", "L_n", "L_w", "w", "n_m", "d_m", "d_s", "g_m", "p_c", "Q", "L_s",
             "L_a", "L_c", "K_c", "L_l", "H_k", "H_v", "D_k", "D_v")
#: Pipeline schedules as the bill accounts them: no pipeline (pp = 1), the
#: first stage of 1F1B (pp > 1), the first stage of the interleaved schedule (v > 1).
SCHEDULES = ("none", "1f1b", "interleaved")
#: Recompute policies from the lightest (fastest, most memory) to the heaviest.
RECOMPUTE_ORDER = ("none", "selective", "full")


def default_hardware() -> Hardware:
    """The papers' GPU: A100-SXM4-80GB (``symbolic/data/hardware/a100-80gb.json``)."""
    return load_hardware()


# --- the bill's expressions, once per discrete choice ------------------------

def _check_arch(model: ModelConfig) -> None:
    """Plan and solve take the inventories the bill itemises (``models.config.BILLED_ARCHITECTURES``)."""
    if getattr(model, "arch", "gpt") not in BILLED_ARCHITECTURES:
        raise ConfigError(f"plan/solve model the inventories the bill itemises ({', '.join(BILLED_ARCHITECTURES)}); "
                          f"{model.name!r} is {model.arch!r}")


def _has_experts(structure: Structure) -> bool:
    """Whether ``structure`` (a :func:`symbolic.bill.derive.structure` key) has routed experts."""
    return structure.has_experts


def _inventories(structure: Structure):
    """The bill's inventories for a :func:`symbolic.bill.derive.structure` key."""
    from ..bill.derive import architecture_inventories  # here: the bill imports this module's neighbours
    return architecture_inventories(structure)


@lru_cache(maxsize=None)
def params_expr(structure: Structure) -> Expr:
    """The configuration's parameter count (the bill's ``params``)."""
    from ..ledgers import params
    return params.count(_inventories(structure)[0])


@lru_cache(maxsize=None)
def states_expr(optimizer: str, zero: int, cp: bool = False, structure: Structure | None = None,
                ep: bool = False, etp: bool = False, uneven: bool = False) -> Expr:
    """Model-state bytes per GPU in Psi, t, p, d (and c under context parallelism: ZeRO over d·c),
    the bill's ``model_states`` lines, summed. A mixture of experts (``structure``'s arch ``moe``):
    the routed experts on the expert grid (e, e_t: the symbols when ``ep``/``etp``, else 1 and t),
    as the bill (``states.expert_blocks``). ``uneven``: the first stage's L_1 of L layers (the
    bill's ``stage_ways``), not L/p."""
    from sympy import Add

    from ..core.dims import L, L_1, c, e, e_t, p, t
    from ..ledgers import states
    recipe, context = states.RECIPES[optimizer], c if cp else 1
    stage = L / L_1 if uneven else p
    if structure is None or not _has_experts(structure):
        return Add(*states.blocks(recipe, zero, context_parallel=context, pipeline_parallel=stage).values())
    from ..bill.derive import routed_expert_parameters
    experts = routed_expert_parameters(_inventories(structure)[0])
    return Add(*states.expert_blocks(recipe, zero, experts, context_parallel=context, pipeline_parallel=stage,
                                     expert_parallel=e if ep else 1, expert_tensor_parallel=e_t if etp else t).values())


def schedule_of(layout: Layout) -> str:
    return "none" if layout.pp == 1 else ("interleaved" if layout.interleave > 1 else "1f1b")


def _representative(sp: bool, recompute: str, dtype: str, schedule: str, cp: bool = False,
                    experts: tuple = (False, False, False, (), False), fp8_activations: bool = False,
                    uneven: bool = False) -> Layout:
    """A layout with this schedule, so that :meth:`Layout.strategy` maps it as the bill does.
    ``experts``: (ep > 1, etp ≠ tp, capacity factor ≠ 1, recompute modules, fused expert SwiGLU).
    ``sp``: False, True (Megatron-Core's sequence parallelism) or ``"gathered"`` (DTensor's: the linear
    layers keep the all-gathered input, ``Layout.sp_inputs``)."""
    ep, etp, capacity, modules, fused = experts
    return Layout(sp=bool(sp), sp_inputs="gathered" if sp == "gathered" else "sharded", recompute=recompute,
                  dtype=dtype, pp=1 if schedule == "none" else 2,
                  interleave=2 if schedule == "interleaved" else 1, cp=2 if cp else 1, tp=2 if sp else 1,
                  ep=2 if ep else 1, etp=3 if etp else 0, moe_capacity=2 if capacity else 1,  # e_t ≠ t (t ≤ 2)
                  recompute_modules=modules, fused_swiglu=fused, fp8_activations=fp8_activations,
                  first_stage_layers=1 if uneven else 0)


def _stage_strategy(sp: bool, recompute: str, dtype: str, schedule: str, cp: bool, stage: str,
                    experts: tuple = (False, False, False, (), False), fp8_activations: bool = False,
                    uneven: bool = False):
    """The bill's strategy of ``stage`` with the chunks in flight as a letter (m first, m_last last,
    m_mid middle), so one expression serves every m and p (``Layout.in_flight`` gives the values); with
    uneven stages its layers are L_1 (first), L_m (middle) or L_p (last)."""
    from ..core.dims import m
    strategy = _representative(sp, recompute, dtype, schedule, cp, experts, fp8_activations,
                               uneven).strategy(stage)
    if schedule == "none":
        return strategy
    return replace(strategy, in_flight=m if stage == "first" else _letters()["m_mid" if stage == "middle" else "m_last"])


@lru_cache(maxsize=None)
def activations_expr(structure: Structure, sp: bool, recompute: str, dtype: str, schedule: str,
                     cp: bool = False, experts: tuple = (False, False, False, (), False),
                     fp8_activations: bool = False, uneven: bool = False) -> Expr:
    """Activation bytes per GPU on the first stage (the bill's ``activations`` lines, summed):
    chunks in flight (m) × layers per chunk × each saved tensor's bytes. ``fp8_activations``: the
    linear layers' saved inputs in FP8 (``strategies.fp8_gemm_inputs``); ``uneven``: the first
    stage's L_1 layers."""
    from sympy import Add

    from ..ledgers import activations
    strategy = _stage_strategy(sp, recompute, dtype, schedule, cp, "first", experts, fp8_activations, uneven)
    in_flight, layers_held = strategy.layers_held()
    inventory = activations.layer_inventory(strategy, _inventories(structure)[1])
    return Add(*(in_flight * layers_held * term.bytes for term in inventory))


@lru_cache(maxsize=None)
def peak_exprs(structure: Structure, sp: bool, recompute: str, dtype: str, schedule: str, optimizer: str,
               zero: int, cp: bool = False, optimizer_impl: str = "foreach",
               experts: tuple = (False, False, False, (), False), fp8_activations: bool = False,
               uneven: bool = False) -> tuple[tuple[str, Expr], ...]:
    """The verdict's candidate instants (the bill's ``peak|…`` formulas, classes summed), without the
    NCCL staging and the gradient bucket (:func:`comm_bytes`, added as numbers; the expert-parallel
    all-to-all's staging, in the letters, is in): the step's peak on the busiest stage is their
    maximum (``symbolic.ledgers.peak``). (label, bytes) pairs. ``uneven``: each stage's model
    states over its own layers (L_1, L_m, L_p: the middle stage, rank 1, a candidate too), in whole bytes
    as the bill's."""
    from sympy import Add, Integer, Rational, ceiling

    from ..core.dims import c, p
    from ..ledgers import peak, states
    from ..models.architectures import output

    param_inv, base, _ = _inventories(structure)
    ways = c if cp else Integer(1)
    recipe = states.RECIPES[optimizer]
    gathered = peak.gathered_weights(param_inv, Rational(recipe.working_bytes(dtype)), zero)
    from ..ledgers.transients import all_to_all_staging
    staging = (all_to_all_staging(bool(sp), cp, experts[2], fp8_activations)
               if structure.arch == "moe" and experts[0] else [])
    out = []
    for stage in _verdict_stages(schedule, uneven):
        ways = uneven_stage_ways(stage) if uneven else p
        blocks = _state_blocks(recipe, zero, cp, structure, experts[0], experts[1], ways)
        temporary = (Add(*_state_blocks(states.FP32_TEMPORARY, zero, cp, structure, experts[0], experts[1],
                                        ways).values())
                     if optimizer_impl == "foreach" else Integer(0))
        if uneven:  # whole bytes per block, as the bill's verdict and the timeline
            blocks = {name: ceiling(expr) for name, expr in blocks.items()}
            temporary = ceiling(temporary)
        strategy = replace(_stage_strategy(sp, recompute, dtype, schedule, cp, stage, experts, fp8_activations, uneven),
                           loss=structure.loss)  # the loss kernel rides in the structure
        output_saved = strategy.shard(output.saved_tensors(norm=structure.output_norm, loss=strategy.loss))
        for instant in peak.stage_instants(stage, strategy, base, output_saved, blocks, temporary, staging,
                                           has_loss=schedule == "none" or stage == "last", gathered=gathered):
            out.append((f"{stage} stage, {instant.phase}" if schedule != "none" else instant.phase, instant.total))
    return tuple(out)


def _verdict_stages(schedule: str, uneven: bool) -> tuple[str, ...]:
    """The stages whose instants the verdict takes the largest of, as the bill's (``bill.derive``): the
    first and the last, and with uneven stages the middle one (rank 1, L_m layers, m_mid in flight)."""
    if schedule == "none":
        return ("first",)
    return ("first", "middle", "last") if uneven else ("first", "last")


def comm_bytes(tp, dp, pp, cp, ep=1, etp=None, settings: CommSettings = CommSettings()):
    """The communication buffers of each layout (:meth:`CommSettings.items`), vectorised as an
    expression of the group sizes, no per-layout Python and no sort: NCCL's staging for every
    communicator wider than one — the dense grid's (t, d, p, c), and with an expert grid
    (e > 1 or e_t ≠ t, ``layout.experts.expert_groups``) the expert-parallel group, the expert
    tensor-parallel group when e_t ≠ t, the expert-data-parallel group edp = t·d·c/(e·e_t) when
    it differs from d — and the gradient bucket when d > 1. ``tests/test_plan.py`` holds it equal
    to ``CommSettings.items`` over a grid of dense and expert layouts."""
    t_, d_, p_, c_, e_ = (np.asarray(x) for x in (tp, dp, pp, cp, ep))  # ints or whole floats (the sweep's)
    e_t = t_ if etp is None else np.asarray(etp)
    per_communicator = float(settings.nccl_buffsize * settings.channels)
    sizes = ((t_ > 1) * per_communicator + (d_ > 1) * (per_communicator + float(settings.bucket_bytes))
             + (p_ > 1) * per_communicator + (c_ > 1) * per_communicator)
    expert_grid = (e_ != 1) | (e_t != t_)
    if np.any(expert_grid):  # a dense sweep skips the expert grid's three terms
        edp = t_ * d_ * c_ // (e_ * e_t)
        sizes = sizes + expert_grid * per_communicator * (
            (e_ > 1) * 1.0 + ((e_t != t_) & (e_t > 1)) + ((edp != d_) & (edp > 1)))
    return np.asarray(sizes, dtype=np.float64)


def _state_blocks(recipe, zero: int, cp: bool, structure: Structure | None, ep: bool, etp: bool,
                  stage_ways: "Expr | None" = None) -> dict:
    """Model-state bytes per GPU of each block of ``recipe`` as the bill's lines: the dense grid,
    or for a mixture of experts its routed experts on the expert grid (:func:`states_expr`);
    ``stage_ways``: p (None), or L/L_1 (L/L_p) on the first (last) of uneven stages."""
    from sympy import Integer

    from ..core.dims import c, e, e_t, p, t
    from ..ledgers import states
    stage_ways = p if stage_ways is None else stage_ways
    context = c if cp else Integer(1)
    if structure is None or not _has_experts(structure):
        return states.blocks(recipe, zero, context_parallel=context, pipeline_parallel=stage_ways)
    from ..bill.derive import routed_expert_parameters
    experts = routed_expert_parameters(_inventories(structure)[0])
    return states.expert_blocks(recipe, zero, experts, context_parallel=context, pipeline_parallel=stage_ways,
                                expert_parallel=e if ep else 1, expert_tensor_parallel=e_t if etp else t)


@lru_cache(maxsize=None)
def flops_expr(structure: Structure, recompute: str, modules: tuple = ()) -> Expr:
    """Hardware FLOPs of one micro-batch through the whole model, recompute included
    (the bill's ``flops`` lines, before × micro-batches): with a fused attention
    kernel, its backward's recomputed Q·Kᵀ too."""
    from ..bill.derive import fused_backward_recompute, recompute_for_flops
    from ..ledgers import flops
    _, saved, matmuls = _inventories(structure)
    return (flops.hardware_training(recompute_for_flops(recompute, saved, modules), matmuls)
            + fused_backward_recompute(saved, matmuls))


@lru_cache(maxsize=None)
def model_flops_expr(structure: Structure) -> Expr:
    """Model FLOPs of one micro-batch (forward + backward, nothing recomputed: the
    bill's ``model_flops_per_iteration`` before × micro-batches)."""
    from ..ledgers import flops
    return flops.model_training(_inventories(structure)[2])


@lru_cache(maxsize=None)
def _array_function(texts: tuple[str, ...], common: tuple = (), names: tuple[str, ...] = ARG_NAMES):
    """One numpy function of a mapping of ``names`` returning every formula of ``texts`` (after the
    ``common`` subexpressions): read by the guarded reader and run as a program,
    :func:`symbolic.core.expressions.array_program` (no ``lambdify``, nothing compiled: in a fresh process
    compiling the formulas cost more than evaluating them). A formula reading a name not in ``names`` is
    refused (:class:`FormulaError`); formulas too deep for the reader are read back into sympy and lambdified."""
    from ..core.expressions import FormulaError, array_program, parse_formula

    try:
        function = array_program(texts, common)
    except FormulaError as error:
        if "too deep" not in str(error):
            raise
        from sympy import Symbol, lambdify
        letters = {name: Symbol(name) for name in names}
        scope = dict(letters)
        for name, text in common:
            scope[name] = parse_formula(text, scope)
        exprs = [parse_formula(text, scope) for text in texts]
        compiled = lambdify([letters[name] for name in names], exprs, "numpy")
        return lambda env: tuple(compiled(*(env[name] for name in names)))
    unknown = function.names - set(names)
    if unknown:
        raise FormulaError(f"plan formulas read {sorted(unknown)}, not among the plan's letters")
    return _compiled_on_reuse(function, texts, common)


def _compiled_on_reuse(program, texts: tuple, common: tuple):
    """``program`` (the formulas run step by step) for its first call — a fresh ``plan`` evaluates each group
    once, where compiling cost more than running — and from its second on, in a process that plans again
    (the API, a notebook, a sweep in blocks), the same formulas compiled
    (:func:`symbolic.core.expressions.compile_array_formulas`: the same guarded reader writing the arithmetic
    it accepted as Python), as fast as before. Both give the same doubles (``tests/test_formula_programs.py``)."""
    from ..core.expressions import FormulaError, compile_array_formulas

    current = [program, 0]

    def evaluate_all(env):
        if current[1] == 1:
            try:
                current[0] = compile_array_formulas(texts, common)
            except FormulaError:  # too deep to compile: the program serves on
                pass
        current[1] += 1
        return current[0](env)

    evaluate_all.names = program.names
    return evaluate_all


def _time_key(group: "Group") -> tuple:
    """The arguments of :func:`symbolic.bill.timing.time_derivation` for ``group`` (the bill's key)."""
    return (group.structure, bool(group.sp), group.recompute, group.zero, group.schedule != "none",
            group.schedule == "interleaved", group.cp, group.optimizer, group.dtype, group.ep,
            group.lora[:2] if group.lora else ())


def _checked_time(text: str):
    """A stored time derivation (``bill.timing.StoredTime``) that reads as arithmetic in the plan's
    letters (:func:`_array_function`); anything else raises, and the entry is derived afresh."""
    from ..bill.timing import StoredTime
    stored = StoredTime.from_json(text)
    _array_function(tuple(stored.formulas), (), TIME_NAMES)
    return stored


@lru_cache(maxsize=None)
def time_function(group: "Group"):
    """(derivation's shell, numpy function of a mapping of :data:`TIME_NAMES` returning every
    expression the time model prices) for one discrete choice: the bill's
    :func:`symbolic.bill.timing.time_derivation`, as the text the bill's cache holds (shared with the
    bill's entries; derived with sympy on a miss), read by the guarded reader into one function."""
    from ..bill.timing import stored_for

    stored = stored_for(_time_key(group), _checked_time)
    return stored.shell(), _array_function(tuple(stored.formulas), (), TIME_NAMES)


def _time_inputs(group: "Group", values: Mapping[str, object], sequences):
    """(derivation's shell, the numbers :func:`~symbolic.ledgers.time.price` reads, its letters) of arrays
    of layouts sharing ``group`` (``values`` as for :func:`sweep`, with Psi set; ``sequences``: B per layout)."""
    derivation, fn = time_function(group)
    vals = dict(values, B=np.asarray(sequences, dtype=np.float64))
    numbers = fn({name: vals.get(name, 1.0) for name in TIME_NAMES})
    letters = {k: vals[k] for k in ("t", "p", "d", "c", "v", "b", "B", "s")}
    if group.uneven:  # the slowest of the uneven stages paces the step (ledgers.time.pacing_stage)
        letters.update({k: vals[k] for k in ("L", "L_1", "L_p")})
    return derivation, list(numbers), letters


def time_sweep(group: "Group", values: Mapping[str, object], sequences, hardware: Hardware, overlap: Overlap,
               gpus_per_node: int, gemm_dtype: str = "bf16"):
    """The step time of arrays of layouts sharing ``group`` (``values`` as for :func:`sweep`, with
    Psi set; ``sequences``: B per layout)."""
    derivation, numbers, letters = _time_inputs(group, values, sequences)
    # The weight GEMMs at the FP8 peak when the layouts train in FP8 (Layout.gemm_dtype), else BF16: the
    # layout's dtype is how activations are stored, not the GEMMs' precision.
    return price(derivation, numbers, letters, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                 gemm_dtype=gemm_dtype)


def _joined(parts: list, sizes: list[int]) -> np.ndarray:
    """One float64 array of the groups' ``parts`` (arrays or scalars), each broadcast to its group's size
    (each written into its slice: numpy's assignment broadcasts and casts to float64 as ``asarray`` would,
    without a ``broadcast_to`` view per part — a plan joins ~2,000 of them)."""
    joined = np.empty(sum(sizes), dtype=np.float64)
    start = 0
    for x, size in zip(parts, sizes):
        joined[start:start + size] = x
        start += size
    return joined


def _indices_by_key(key: np.ndarray, where: np.ndarray | None = None):
    """The indices holding each distinct value of ``key`` (values ascending, indices ascending), among
    the indices ``where`` is true at (all without it): ``np.flatnonzero((key == value) & where)`` for each
    ``value`` of ``np.unique(key[where])``, from one stable sort instead of a pass over every layout per value."""
    among = np.arange(key.size) if where is None else np.flatnonzero(where)
    order = among[np.argsort(key[among], kind="stable")]   # stable: ascending indices within a value
    if not order.size:
        return
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    for idx in np.split(order, cuts):
        yield idx


def price_groups(inputs: list, hardware: Hardware, overlap: Overlap, gpus_per_node: int, gemm_dtype: str = "bf16"):
    """:func:`time_sweep` of several groups at once: ``inputs`` holds each group's (layout indices,
    :func:`_time_inputs`). Groups whose derivations' shells are equal (the same compute lines, the same
    communication classes: 32 of GPT-3's 69 on 1024 GPUs) are priced by one call over their layouts
    together — :func:`~symbolic.ledgers.time.price` is element by element (each layout's seconds from its own
    numbers; the kernel tables' nearest shape found per distinct shape, ties by :data:`ledgers.kernels.TIE`),
    so every layout's doubles are those of its own group's call, with ~2 ms of Python per call saved.
    Yields (layout indices, the priced :class:`~symbolic.ledgers.time.StepTime`)."""
    shells: dict = {}
    for idx, (derivation, numbers, letters) in inputs:
        shells.setdefault(repr(derivation), []).append((idx, derivation, numbers, letters))
    for members in shells.values():
        if len(members) == 1:
            idx, derivation, numbers, letters = members[0]
        else:
            sizes = [len(member[0]) for member in members]
            idx = np.concatenate([member[0] for member in members])
            derivation = members[0][1]
            numbers = [_joined([member[2][j] for member in members], sizes) for j in range(len(members[0][2]))]
            letters = {k: _joined([member[3][k] for member in members], sizes) for k in members[0][3]}
        yield idx, price(derivation, numbers, letters, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                         gemm_dtype=gemm_dtype)


@dataclass(frozen=True)
class Group:
    """The discrete choices that change the shape of the ledgers' expressions."""

    #: False, True (Megatron-Core's SP) or "gathered" (DTensor's SP: Layout.sp_inputs)
    sp: bool | str = False
    recompute: str = "none"
    zero: int = 0
    schedule: str = "none"
    optimizer: str = "bf16-adam"
    dtype: str = "bf16"
    #: the model's :func:`symbolic.bill.derive.structure`
    structure: Structure = Structure("gpt")
    cp: bool = False  #: context parallelism on (c > 1)
    ep: bool = False  #: expert parallelism on (e > 1)
    etp: bool = False  #: expert tensor parallelism other than t (e_t ≠ t)
    capacity: bool = False  #: a capacity factor other than 1 (C_f)
    modules: tuple = ()  #: Megatron-Core's recompute_modules under selective recompute (empty: core_attn)
    fused_swiglu: bool = False  #: the experts' SwiGLU as one fused kernel
    optimizer_impl: str = "foreach"  #: foreach (fp32 temporaries at the step) or fused (none)
    fp8_activations: bool = False  #: the linear layers' saved inputs in FP8
    uneven: bool = False  #: uneven pipeline stages: the first holds L_1 layers
    #: the memory levers, the bill's (``Layout``): LoRA's (targets, base dtype, double quantisation), ()
    #: for full training; offload (none, optimizer, params); activation offload
    lora: tuple = ()
    offload: str = "none"
    activation_offload: bool = False

    @property
    def has_levers(self) -> bool:
        return bool(self.lora) or self.offload != "none" or self.activation_offload

    @classmethod
    def of(cls, model: ModelConfig, layout: Layout) -> "Group":
        from ..bill.evaluate import layout_structure
        sp = "gathered" if layout.sp and layout.sp_inputs == "gathered" else layout.sp
        return cls(sp, layout.recompute, layout.zero, schedule_of(layout), layout.optimizer,
                   layout.dtype, layout_structure(model, layout), layout.cp > 1, layout.ep > 1, layout.etp not in (0, layout.tp),
                   layout.moe_capacity != 1, tuple(layout.recompute_modules), layout.fused_swiglu,
                   layout.optimizer_impl, layout.fp8_activations, layout.uneven_stages,
                   **lever_fields(layout))

    def expressions(self) -> dict[str, Expr]:
        """The bill's ledgers as expressions in the papers' letters (Psi: the count the states use)."""
        if self.has_levers:
            return lever_expressions(self)
        return {"params": params_expr(self.structure),
                "model_states_bytes": states_expr(self.optimizer, self.zero, self.cp, self.structure,
                                                  self.ep, self.etp, self.uneven),
                "activation_bytes": activations_expr(self.structure, self.sp, self.recompute, self.dtype,
                                                     self.schedule, self.cp,
                                                     (self.ep, self.etp, self.capacity, self.modules, self.fused_swiglu),
                                                     self.fp8_activations, self.uneven),
                "peak_candidates": peak_exprs(self.structure, self.sp, self.recompute, self.dtype, self.schedule,
                                              self.optimizer, self.zero, self.cp, self.optimizer_impl,
                                              (self.ep, self.etp, self.capacity, self.modules, self.fused_swiglu),
                                              self.fp8_activations, self.uneven),
                "flops_per_micro_batch": flops_expr(self.structure, self.recompute, self.modules),
                "model_flops_per_micro_batch": model_flops_expr(self.structure)}


def lever_fields(layout: Layout) -> dict:
    """A layout's memory levers as :class:`Group` fields (empty for none: the group is as before)."""
    out = {}
    if layout.lora:
        out["lora"] = (layout.lora_targets, layout.base_dtype, layout.double_quant)
    if layout.offload != "none":
        out["offload"] = layout.offload
    if layout.activation_offload:
        out["activation_offload"] = True
    return out


def lever_layout(group: Group) -> Layout:
    """A layout carrying only ``group``'s levers (rank 1: the formulas keep the letter r), for the
    bill's own calls (``derive.lora_saved``, ``states.parameter_bytes``)."""
    targets, base_dtype, double_quant = group.lora or ("all-linear", "bf16", True)
    # the optimizer recipe and the activations' dtype decide the adapters' dtype (derive.adapter_dtype)
    return Layout(lora=1 if group.lora else 0, lora_targets=targets, base_dtype=base_dtype,
                  double_quant=double_quant, offload=group.offload, activation_offload=group.activation_offload,
                  optimizer=group.optimizer, dtype=group.dtype)


@lru_cache(maxsize=None)
def lever_expressions(group: Group) -> dict[str, Expr]:
    """:meth:`Group.expressions` with the bill's memory levers, by the bill's own calls
    (:func:`symbolic.bill.derive.derive`): the model states of ``states.state_terms`` (LoRA's frozen
    base and adapters, a quantised base, offload: the GPU's terms), the optimizer step's temporaries
    over the trainable parameters (none on a CPU step), LoRA's saved A·x (``derive.lora_saved``), the
    activation offload's double buffer (``peak.stage_instants``), and LoRA's FLOPs: a frozen weight
    has no weight gradient, the adapters train (forward, input and weight gradients)."""
    from ..bill.derive import fused_backward_recompute, lora_forward_flops, lora_saved, recompute_for_flops
    from sympy import Add, Integer, ceiling

    from ..core.dims import c, e, e_t, p, t
    from ..ledgers import activations, flops, peak, states
    from ..ledgers.transients import all_to_all_staging
    from ..models.architectures import output

    structure = group.structure
    param_inv, base, matmuls = _inventories(structure)
    lever = lever_layout(group)
    saved = lora_saved(base, param_inv, lever)
    recipe = states.RECIPES[group.optimizer]
    context = c if group.cp else Integer(1)
    experts = (group.ep, group.etp, group.capacity, group.modules, group.fused_swiglu)
    grid = (dict(expert_parallel=e if group.ep else Integer(1), expert_tensor_parallel=e_t if group.etp else t)
            if structure.has_experts and (group.ep or group.etp) else {})

    def stage_states(stage: str) -> tuple[dict, Expr]:
        ways = uneven_stage_ways(stage) if group.uneven else p
        terms, trainable = states.state_terms(
            recipe, group.zero, param_inv, context_parallel=context, lora=bool(group.lora),
            lora_targets=lever.lora_targets, base_dtype=lever.base_dtype, double_quant=lever.double_quant,
            offload=group.offload, pipeline_parallel=ways, **grid)
        on_gpu_step = group.optimizer_impl == "foreach" and group.offload == "none"
        temporary = peak.optimizer_temporary(group.zero, context, trainable, ways) if on_gpu_step else Integer(0)
        return {term.name: term.bytes for term in terms if term.device == "gpu"}, temporary

    gathered = peak.gathered_weights(param_inv, states.parameter_bytes(recipe, lever), group.zero)
    staging = (all_to_all_staging(bool(group.sp), group.cp, group.capacity, group.fp8_activations)
               if structure.arch == "moe" and group.ep else [])
    candidates = []
    for stage in _verdict_stages(group.schedule, group.uneven):
        blocks, temporary = stage_states(stage)
        if group.uneven:  # whole bytes per block, as the bill's verdict
            blocks = {name: ceiling(expr) for name, expr in blocks.items()}
            temporary = ceiling(temporary)
        strategy = replace(_stage_strategy(group.sp, group.recompute, group.dtype, group.schedule, group.cp, stage,
                                           experts, group.fp8_activations, group.uneven), loss=structure.loss,
                           output_weight_grad=not group.lora)  # LoRA freezes the output layer
        output_saved = strategy.shard(output.saved_tensors(norm=structure.output_norm, loss=strategy.loss,
                                                           weight_grad=strategy.output_weight_grad))
        for instant in peak.stage_instants(stage, strategy, saved, output_saved, blocks, temporary, staging,
                                           has_loss=group.schedule == "none" or stage == "last", gathered=gathered,
                                           activation_offload=group.activation_offload):
            candidates.append((f"{stage} stage, {instant.phase}" if group.schedule != "none" else instant.phase,
                               instant.total))
    strategy = _stage_strategy(group.sp, group.recompute, group.dtype, group.schedule, group.cp, "first", experts,
                               group.fp8_activations, group.uneven)
    in_flight, layers_held = strategy.layers_held()
    activation = Add(*(in_flight * layers_held * term.bytes for term in activations.layer_inventory(strategy, saved)))
    recompute = recompute_for_flops(group.recompute, saved, group.modules)
    hardware_flops = flops.hardware_training(recompute, matmuls) + fused_backward_recompute(saved, matmuls)
    model_flops = flops.model_training(matmuls)
    if group.lora:
        frozen = flops.forward(type(matmuls)(tuple(mm for mm in matmuls if mm.weight)))
        adapters = Add(*(forward for _, forward in lora_forward_flops(param_inv, lever.lora_targets)))
        hardware_flops += -frozen + 3 * adapters + (adapters if recompute == "full" else 0)
        model_flops += -frozen + 3 * adapters
    return {"params": params_expr(structure), "model_states_bytes": Add(*stage_states("first")[0].values()),
            "activation_bytes": activation, "peak_candidates": tuple(candidates),
            "flops_per_micro_batch": hardware_flops, "model_flops_per_micro_batch": model_flops}


@dataclass(frozen=True)
class GroupFormulas:
    """A group's ledgers (:meth:`Group.expressions`) as text (``sympy.sstr``), the form the bill's
    derivations are cached in: read back by the guarded reader (:mod:`symbolic.core.expressions`)
    into one numpy function for the sweep and exact Fractions for the layouts shown, so a plan
    whose groups are cached neither derives nor lambdifies. ``common``/``reduced``: the same
    ledgers but ``params``, their common subexpressions written once (``sympy.cse``) for the arrays."""

    params: str
    model_states_bytes: str
    activation_bytes: str
    peak_candidates: tuple[tuple[str, str], ...]   #: (label, bytes) of each candidate instant
    flops_per_micro_batch: str
    model_flops_per_micro_batch: str
    common: tuple[tuple[str, str], ...]            #: (name, text), in order
    reduced: tuple[str, ...]                       #: states, activations, each candidate, FLOPs, model FLOPs

    def exact_texts(self) -> tuple[str, ...]:
        return ((self.params, self.model_states_bytes, self.activation_bytes)
                + tuple(text for _, text in self.peak_candidates)
                + (self.flops_per_micro_batch, self.model_flops_per_micro_batch))

    @classmethod
    def of(cls, group: "Group") -> "GroupFormulas":
        """Derived with sympy (the bill's calls, :meth:`Group.expressions`)."""
        from ..bill.derive import sstr  # memoised per subexpression: the groups share most
        from ..core.forms import nested_form

        exprs = group.expressions()
        ledgers = ([exprs["model_states_bytes"], exprs["activation_bytes"]]
                   + [expr for _, expr in exprs["peak_candidates"]]
                   + [exprs["flops_per_micro_batch"], exprs["model_flops_per_micro_batch"]])
        missing = set().union(exprs["params"].free_symbols, *(x.free_symbols for x in ledgers)) - {
        _letters()[name] for name in ARG_NAMES}
        if missing:
            raise ValueError(f"plan: {sorted(map(str, missing))} not among the plan's letters")
        common, reduced = _common_subexpressions(tuple(ledgers))
        return cls(sstr(nested_form(exprs["params"])), sstr(exprs["model_states_bytes"]),
                   sstr(exprs["activation_bytes"]),
                   tuple((label, sstr(expr)) for label, expr in exprs["peak_candidates"]),
                   sstr(exprs["flops_per_micro_batch"]), sstr(exprs["model_flops_per_micro_batch"]),
                   common, reduced)

    def to_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__dataclass_fields__})

    @classmethod
    def from_json(cls, text: str) -> "GroupFormulas":
        """An entry's text, checked: every field of its kind, every formula the plan evaluates (``params``,
        ``common``, ``reduced``: :meth:`functions` and :meth:`exact`) arithmetic in the plan's letters
        (:func:`_array_function`), the reduced ledgers as many as the candidates say. Anything else raises.
        The ledgers' own texts are the readable form (a benchmark reads them, checked there as it does):
        the plan evaluates their common-subexpression form, floats and exact alike."""
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__):
            raise ValueError("not a plan group's formulas")
        pairs = {k: tuple((str(a), str(b)) for a, b in data[k]) for k in ("peak_candidates", "common")}
        texts = {k: data[k] for k in ("params", "model_states_bytes", "activation_bytes", "flops_per_micro_batch",
                                      "model_flops_per_micro_batch")}
        if not all(isinstance(x, str) for x in list(texts.values()) + data["reduced"]) or not all(
                isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(y, str) for y in x)
                for k in pairs for x in data[k]):
            raise ValueError("a formula that is not text")
        formulas = cls(**texts, **pairs, reduced=tuple(data["reduced"]))
        if len(formulas.reduced) != len(formulas.peak_candidates) + 4:
            raise ValueError("reduced ledgers do not match the candidates")
        formulas.functions()
        return formulas

    def functions(self):
        """(params, the other ledgers) as numpy functions of a mapping of :data:`ARG_NAMES`: each
        read by the guarded reader."""
        return _array_function((self.params,)), _array_function(self.reduced, self.common)

    def exact(self):
        """Every ledger, in :meth:`exact_texts`' order (params, then :attr:`reduced`'s), as one exact function
        (ints and Fractions) of the values: the same formulas the sweep reads (:meth:`functions`, checked
        when the entry is read), in exact arithmetic, where the common subexpressions are an identity."""
        return _exact_function((self.params,) + self.reduced, self.common)

    def exact_params(self):
        """The parameter count alone, exactly (:meth:`exact`'s first formula)."""
        return _exact_function((self.params,))


@lru_cache(maxsize=None)
def _common_subexpressions(ledgers: tuple[Expr, ...]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """``sympy.cse`` of a group's ledgers as text ((name, text) of each common subexpression, then the reduced
    ledgers), memoised by the ledgers: groups that differ only in a choice their ledgers do not read (a
    cold mixtral-8x7b plan on 32 GPUs: 384 groups, 256 distinct ledger lists) share one cse, the costliest
    step of a cold group (issue 24). Equal sympy expressions are the same tree, and cse is deterministic
    (fresh ``cse_0, cse_1, …`` each call), so the text is what each group's own call gave."""
    from sympy import cse, numbered_symbols

    from ..bill.derive import sstr
    from ..core.forms import nested_form

    # The model states and activations (the papers' totals) with their sums' common factors pulled out: a
    # third fewer operations for the sweep's kernels (search/kernel.py: the parameter count 12 → 7, GPT's
    # activations 23 → 13). The candidate instants and FLOPs, ten times their size, stay as derived: nesting
    # them too took a cold mixtral-8x7b plan 6.5 → 8 s of CPU and the papers' sweep nothing.
    nested = [nested_form(x) for x in ledgers[:2]] + list(ledgers[2:])
    common, reduced = cse(nested, symbols=numbered_symbols("cse_"))
    return tuple((str(name), sstr(expr)) for name, expr in common), tuple(sstr(x) for x in reduced)


@lru_cache(maxsize=None)
def _exact_function(texts: tuple[str, ...], common: tuple = ()):
    """The exact (ints and Fractions) function of ``texts`` after ``common``, as a program read by the
    guarded reader (:func:`symbolic.core.expressions.exact_program`): a plan evaluates it at a few layouts,
    so compiling it would cost more than running it."""
    from ..core.expressions import FormulaError, exact_program
    function = exact_program(texts, common)
    if function.names - set(ARG_NAMES):
        raise FormulaError(f"plan formulas read {sorted(function.names - set(ARG_NAMES))}, not among the plan's letters")
    return function


@lru_cache(maxsize=None)
def group_formulas(group: "Group") -> GroupFormulas:
    """``group``'s ledgers as text: from the bill's cache folder (an entry checked as the bill's are,
    :func:`symbolic.bill.cache.read_entry`: written by this package, for this group, matching its
    hash, and read by :meth:`GroupFormulas.from_json`), or derived with sympy and stored atomically."""
    from ..bill.cache import entry_path, read_entry, write_entry

    key = json.dumps({"plan": repr(group)})  # a frozen dataclass of strings, bools and tuples: its repr is stable
    path = entry_path(key, "plan-")
    if path is not None and (path.exists() or path.is_symlink()):
        found = read_entry(path, key, GroupFormulas.from_json)
        if found is not None:
            return found
    formulas = GroupFormulas.of(group)
    if path is not None:
        write_entry(path, key, formulas.to_json())
    return formulas


#: Configurations a sweep evaluates per numpy call: the formulas keep ~10 arrays alive, and at 16,384
#: doubles (128 KiB) each they stay within a core's L2 (1 MiB here, 512 KiB–2 MiB on current x86); at
#: 65,536 they spill, and the same sweep ran at 4.8 × 10⁶ configurations/s against 1.1 × 10⁷ in blocks
#: (benchmarks/sweep_throughput.py). Element-wise arithmetic, so the blocks' results are the same doubles.
SWEEP_BLOCK = 1 << 14
#: The same for the papers' totals alone (``sweep(papers_only=True)``): their kernel keeps fewer arrays
#: alive (GPT-3's groups: 6 work buffers beside the ~10 inputs), and at 32,768 a block its per-block
#: cost (~40 µs of Python and ufunc dispatch) is spread over twice the configurations: 6.9 × 10⁷
#: configurations/s against 6.2 × 10⁷ at 16,384 and 5.9 × 10⁷ at 49,152 here (1 MiB of L2 a core;
#: benchmarks/sweep_throughput.py's configurations, two groups, CPU time, best of 5).
PAPERS_BLOCK = 1 << 15


def sweep(group: Group, values: Mapping[str, object], micro_batches, params_hand=None, *,
          out: Mapping[str, np.ndarray] | None = None, papers_only: bool = False,
          kernel: bool | None = None) -> dict[str, np.ndarray]:
    """The bill's totals for arrays of configurations sharing ``group``, vectorised.

    ``values``: arrays (or scalars) for the letters s b h a L V t p d f v c, m and m_last
    (the chunks in flight on the first and the last stage, ``Layout.in_flight``);
    ``micro_batches``: micro-batches per iteration, all data-parallel ranks
    together (the bill's ``iteration_micro_batches × dp``). Floats: for
    screening and ranking; :func:`exact_totals` gives the exact numbers. Evaluated in blocks of
    :data:`SWEEP_BLOCK` configurations (:data:`PAPERS_BLOCK` for the papers' totals alone). ``out``:
    float64 arrays of the configurations' length by total's name, written in place and returned (a
    table the caller keeps across calls: no result arrays allocated per call). ``papers_only``:
    ``paper_total_bytes`` alone (the papers' model states + activations, Ψ counted), no verdict,
    FLOPs or communicator buffers computed.
    ``kernel``: compile the group's kernel (:mod:`symbolic.search.kernel`) now (True) or never
    (False); None: for a call of :data:`KERNEL_MIN` configurations or more. Once compiled it
    evaluates every later call of the group; the doubles are the same either way.
    """
    arrays = [np.asarray(x) for x in values.values()] + [np.asarray(micro_batches)]
    shape = np.broadcast_shapes(*(x.shape for x in arrays))
    build = (len(shape) == 1 and shape[0] >= KERNEL_MIN) if kernel is None else kernel
    loop = (len(shape) == 1 and shape[0] >= NATIVE_MIN) if kernel is None else kernel
    step = PAPERS_BLOCK if papers_only else SWEEP_BLOCK
    if len(shape) != 1 or shape[0] <= step:
        result = _sweep_block(group, values, micro_batches, params_hand, out, papers_only, build=build, loop=loop)
        if out is not None:
            for name, x in result.items():
                if x is not out[name]:
                    out[name][...] = x
                result[name] = out[name]
        return result
    n = shape[0]

    def part(x, lo, hi):  # a block of an array over the configurations; a scalar or length-1 one as it is
        x = np.asarray(x)
        return x[lo:hi] if x.ndim and x.shape[0] == n else x

    whole: dict[str, np.ndarray] = {} if out is None else dict(out)
    formulas = group_formulas(group)  # looked up once, not per block
    kernel = _call_kernel(formulas, values, micro_batches, n, params_hand is not None, papers_only, build)
    if kernel is not None:  # the kernel's case decided once for the call, not per block (~50 µs a block)
        reads = frozenset(kernel.inputs)
        names = ("paper_total_bytes",) if papers_only else SWEEP_OUTPUTS
        looped = _loop_outputs(kernel, values, micro_batches, n, names, [whole.get(name) for name in names],
                               params_hand, papers_only, loop)
        if looped is not None:  # the whole call in one compiled loop (search.native): the same doubles
            if whole:  # the caller's table: the loop wrote its arrays there; a scalar output broadcast into it
                whole = _into_whole(whole, looped, n, 0, n)
                return {name: whole[name] for name in looped}
            return {name: x if np.ndim(x) else np.full(n, x, dtype=np.float64) for name, x in looped.items()}
        columns = [(k, np.asarray(x), np.ndim(x) == 1) for k, x in values.items()]  # as part() gives them
        mb_array, micro_batches = np.ndim(micro_batches) == 1, np.asarray(micro_batches)
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            env = _kernel_env({k: (x[lo:hi] if array else x) for k, x, array in columns},
                              micro_batches[lo:hi] if mb_array else micro_batches, hi - lo, reads)
            block = _kernel_outputs(kernel, env, hi - lo, names, [whole[name][lo:hi] if whole else None
                                                                   for name in names], params_hand, papers_only)
            whole = _into_whole(whole, block, n, lo, hi)
        return {name: whole[name] for name in block}
    for lo in range(0, n, step):  # each block written into its slice of the whole arrays
        hi = min(lo + step, n)
        block = _sweep_block(group, {k: part(x, lo, hi) for k, x in values.items()}, part(micro_batches, lo, hi),
                             params_hand, {name: x[lo:hi] for name, x in whole.items()}, papers_only, formulas,
                             build)
        whole = _into_whole(whole, block, n, lo, hi)
    return {name: whole[name] for name in block}


def _into_whole(whole: dict, block: Mapping, n: int, lo: int, hi: int) -> dict:
    """``block``'s arrays written into their slice ``lo:hi`` of the ``n``-long ``whole`` arrays (made on the first
    block, of each output's type); a block already computed in place (its array a view of ``whole``) is left."""
    if not whole:
        whole = {name: np.empty(n, dtype=np.result_type(x)) for name, x in block.items()}
    for name, x in block.items():
        if not (isinstance(x, np.ndarray) and np.may_share_memory(x, whole[name])):
            whole[name][lo:hi] = x
    return whole


#: The sweep's outputs, in the order :func:`_sweep_kernel` lists them.
SWEEP_OUTPUTS = ("params", "model_states_bytes", "activation_bytes", "paper_total_bytes", "total_bytes",
                 "flops_per_iteration", "model_flops_per_iteration")
#: Below this many configurations in one :func:`sweep` call, the formulas' expression form (compiled
#: when the group's formulas are read) evaluates them unless the group's kernel is compiled already
#: (:mod:`symbolic.search.kernel`, ~4 ms a group): the same doubles either way, the kernel ~250 µs a
#: block faster, so its compile is repaid past ~16 blocks. A plan's groups (GPT-3 on 1024 GPUs: 98,928
#: layouts in all) stay below it: a cold plan compiles no kernel.
KERNEL_MIN = 1 << 18
_KERNELS: dict = {}  # (id of the formulas, array inputs, params by hand, papers only) → (formulas, kernel)


def _sweep_kernel(formulas: GroupFormulas, arrays: frozenset, hand: bool, papers_only: bool = False,
                  build: bool = True):
    """The group's kernel: params, states, activations, their sum, the verdict (the largest candidate
    instant + the communicator buffers, input ``_comm``), FLOPs and model FLOPs per iteration (× input
    ``_mb``); ``papers_only``: the sum of states and activations alone. ``build`` False: None unless
    compiled already."""
    key = (id(formulas), arrays, hand, papers_only)  # by identity: hashing the formulas' text costs µs a block
    found = _KERNELS.get(key)
    if found is not None and found[0] is formulas:
        return found[1]
    if not build:
        return None
    from .kernel import program

    states, acts, *rest = formulas.reduced
    candidates, flops_micro, model_flops_micro = rest[:-2], rest[-2], rest[-1]
    paper = ("add", states, acts)
    outputs = ((paper,) if papers_only else
               (formulas.params, states, acts, paper, ("add", ("max", *candidates), ("in", "_comm")),
                ("mul", flops_micro, ("in", "_mb")), ("mul", model_flops_micro, ("in", "_mb"))))
    if len(_KERNELS) > 256:
        _KERNELS.clear()
    found = program(formulas.common, outputs, arrays, None if hand else formulas.params)
    _KERNELS[key] = (formulas, found)  # the formulas held, so their id is not reused while the entry stands
    return found


def _block_env(values: Mapping[str, object], micro_batches):
    """The letters as the expression form reads them: every given value float64 (a scalar a 0-d
    array), every other letter 1.0; m and m_last by the layout's rule where not given."""
    values = dict(values)
    values.setdefault("c", 1)
    if "m" not in values or "m_last" not in values:  # the chunks in flight, by the layout's rule
        shape = np.broadcast(*(np.asarray(values[x]) for x in ("p", "v", "d")), np.asarray(micro_batches)).shape
        pp, vv, m_iter = (np.broadcast_to(np.asarray(x), shape).astype(np.int64) for x in (
            values["p"], values["v"], np.asarray(micro_batches) // np.asarray(values["d"])))
        values.setdefault("m", in_flight_array(pp, vv, m_iter, "first"))
        values.setdefault("m_last", in_flight_array(pp, vv, m_iter, "last"))
        values.setdefault("m_mid", in_flight_array(pp, vv, m_iter, "middle"))
    given = {k: np.asarray(x, dtype=np.float64) for k, x in values.items()}
    env = dict.fromkeys(ARG_NAMES, 1.0)  # a GPT model has no g, E, k, E_s, f_e: its formulas do not read them
    env.update(given)
    return env, given


def _plain_length(env: Mapping[str, object], micro_batches) -> int | None:
    """The one length of every array among ``env`` and ``micro_batches`` (the others scalars), or
    None: a shape the kernel does not take (a length-1 array beside longer ones, 2-D)."""
    n = None
    for x in (*env.values(), micro_batches):
        shape = np.shape(x)
        if not shape:
            continue
        if len(shape) != 1 or (n is not None and shape[0] != n):
            return None
        n = shape[0]
    return n


def _whole_ints(x) -> bool:
    """A Python int or an int64 array (the chunks in flight's arithmetic as :func:`in_flight_array` does it)."""
    return type(x) is int or (isinstance(x, np.ndarray) and x.dtype == np.int64)


def _kernel_ready(values: Mapping[str, object], micro_batches) -> bool:
    """The common case :func:`_kernel_env` takes: the chunks in flight not given and nothing
    interleaved, the pipeline sizes int64, no expert grid, one of p, d, v, micro-batches an array."""
    if "m" in values or "m_last" in values or "e_t" in values or np.ndim(values.get("e", 1)) or values.get("e", 1) != 1:
        return False
    p_, d_, v_ = values["p"], values["d"], values["v"]
    if not (_whole_ints(p_) and _whole_ints(d_) and _whole_ints(micro_batches) and _whole_ints(v_)):
        return False
    if (np.ndim(v_) and np.any(v_ != 1)) or (not np.ndim(v_) and v_ != 1):
        return False
    return any(np.ndim(x) for x in (p_, d_, v_, micro_batches))


def _least(x: np.ndarray):
    """np.min of a float64 array (0-d too), without its Python wrapper's ~1.5 µs."""
    return np.minimum.reduce(x) if x.ndim else x


def _most(x: np.ndarray):
    """np.max of a float64 array (0-d too), without its Python wrapper's ~1.5 µs."""
    return np.maximum.reduce(x) if x.ndim else x


def _kernel_env(values: Mapping[str, object], micro_batches, n: int, reads: frozenset,
                settings: CommSettings = CommSettings()):
    """:func:`_block_env` and :func:`comm_bytes` for the kernel, into buffers kept across blocks
    (:func:`symbolic.search.kernel.scratch`: at 16,384 doubles an array is 128 KiB, glibc's mmap
    threshold, and a fresh one costs its pages' faults): the same values, for the inputs the kernel
    ``reads``, in the case :func:`_kernel_ready` accepts. (An int64 array handed to a ufunc beside a
    float64 one costs more than converting it once: 16 against 5 µs a multiply here.)"""
    from .kernel import scratch

    env = dict.fromkeys(ARG_NAMES, 1.0)  # a GPT model has no g, E, k, E_s, f_e: its formulas do not read them
    comm_read = "_comm" in reads
    for name, x in values.items():
        if name not in reads and name not in ("p", "d") and not (comm_read and name in ("t", "c")):
            env[name] = x  # not read: as given
        elif (x.ndim if type(x) is np.ndarray else np.ndim(x)) and np.asarray(x).dtype != np.float64:
            env[name] = scratch("in " + name, n)
            np.copyto(env[name], x)
        else:
            env[name] = np.asarray(x, dtype=np.float64)
    if "c" not in values:
        env["c"] = np.asarray(1.0)
    if np.ndim(micro_batches):
        mb = env["_mb"] = scratch("in _mb", n)
        np.copyto(mb, micro_batches)
    else:
        mb = env["_mb"] = np.asarray(micro_batches, dtype=np.float64)
    env["m_last"] = scratch("ones", n, fill=1.0)  # 1F1B's last stage holds one chunk
    if "m" in reads:  # 1F1B's min(micro-batches per pipeline, p), 1 where p = 1 (in_flight_array)
        p_, d_ = env["p"], env["d"]
        m = env["m"] = scratch("m", n)
        if _least(mb) >= 0 and _most(mb) < 2**52 and _least(d_) >= 1 and _most(d_) < 2**52:
            # ⌊mb/d⌋ in doubles: mb = q·d + r, and for 0 ≤ mb, d < 2^52 the quotient's double lies at
            # least 1/d below q + 1 when r > 0, more than its half-ulp (d(q + 1) ≤ mb + d < 2^53)
            np.true_divide(mb, d_, out=m)
            np.floor(m, out=m)
        else:
            m_iter = scratch("m_iter", n, np.int64)
            np.floor_divide(micro_batches, values["d"], out=m_iter)
            np.copyto(m, m_iter)
        np.minimum(m, p_, out=m)
        if np.ndim(p_):
            if _least(m) < 1:  # min(m_iter, 1) is already 1 where p = 1 unless m_iter is 0
                single = scratch("p=1", n, np.bool_)
                np.equal(p_, 1.0, out=single)
                np.putmask(m, single, 1.0)
        elif p_ == 1:
            m.fill(1.0)
    if not comm_read:
        return env
    # the communicator buffers (comm_bytes, no expert grid): NCCL's staging per communicator wider than one
    per_communicator = float(settings.nccl_buffsize * settings.channels)
    comm, term = scratch("comm", n), scratch("comm term", n)
    comm.fill(0.0)
    for letter, size in (("t", per_communicator), ("d", per_communicator + float(settings.bucket_bytes)),
                         ("p", per_communicator), ("c", per_communicator)):
        x = env[letter]
        if np.ndim(x):
            np.greater(x, 1.0, out=term)  # 1.0 or 0.0: (x > 1) · size as comm_bytes multiplies it
            np.multiply(term, size, out=term)
            np.add(comm, term, out=comm)
        else:
            np.add(comm, (x > 1) * size, out=comm)
    env["_comm"] = comm
    return env


def _call_kernel(formulas: GroupFormulas, values: Mapping[str, object], micro_batches, n: int, hand: bool,
                 papers_only: bool, build: bool):
    """The kernel that evaluates every block of a call of ``n`` configurations, where each block is
    the case :func:`_kernel_ready` takes (it is when the whole call is: p, d, v and micro-batches
    int64 or ints, v 1 throughout, every array of length ``n``); None otherwise (each block then
    decides for itself, as :func:`_sweep_block` does: the same doubles either way)."""
    if _plain_length(values, micro_batches) != n or not _kernel_ready(values, micro_batches):
        return None
    arrays = frozenset(k for k, x in values.items() if np.ndim(x)) | {"m", "m_last", "_comm"} | (
        {"_mb"} if np.ndim(micro_batches) else set())
    return _sweep_kernel(formulas, arrays, hand, papers_only, build)


def _kernel_outputs(kernel, env: dict, n: int, names: tuple, outs: list, params_hand, papers_only: bool) -> dict:
    """The kernel's outputs at ``env`` by name (into ``outs`` where arrays), as the expression form gives them."""
    if params_hand is not None:
        env["Psi"] = float(params_hand)
    return _as_expression_form(dict(zip(names, kernel(env, outs, n))), n, papers_only)


#: Below this many configurations in one :func:`sweep` call (``kernel`` None), the group's kernel is not
#: compiled into one C loop (:mod:`symbolic.search.native`, ~45 ms a compile with gcc -O2 here) unless it is
#: compiled already: the loop saves ~20 ns a configuration against the numpy kernel on this project's
#: Intel VM, so a compile is repaid past ~2 × 10⁶. ``sweep(kernel=True)`` compiles it at any size.
NATIVE_MIN = 1 << 21
#: The communicator buffers' sizes the loop adds for t, d, p, c (``_kernel_env``'s, CommSettings' defaults).
_COMM = CommSettings()
_PER_COMMUNICATOR = float(_COMM.nccl_buffsize * _COMM.channels)
_COMM_SIZES = (_PER_COMMUNICATOR, _PER_COMMUNICATOR + float(_COMM.bucket_bytes), _PER_COMMUNICATOR, _PER_COMMUNICATOR)


def _loop_outputs(kernel, values: Mapping[str, object], micro_batches, n: int, names: tuple, outs: list,
                  params_hand, papers_only: bool, build: bool) -> dict | None:
    """The kernel's outputs by name from its compiled C loop (:mod:`symbolic.search.native`), or None where
    there is none (no compiler, not compiled and ``build`` False, a call outside the loop's cases)."""
    from . import native

    values = dict(values)  # one object per letter: the arrays checked are the arrays the loop reads
    signature = native.signature_of(kernel, values, micro_batches, n, params_hand)
    compiled = None if signature is None else native.native_kernel(kernel, signature, _COMM_SIZES, build)
    if compiled is not None and not compiled.checked:
        # Its first call: the loop's doubles against the numpy kernel's on a sample of the configurations
        # (a compiler whose defaults reassociate or fuse would show here), else never used in the process.
        # The sample spans the whole call (evenly spaced, first and last included), not its first block: a
        # first block of identical layouts would hide a difference in the rest.
        picked = native.sample_indices(n)
        sample = len(picked)
        part = {k: (x[picked] if np.ndim(x) else x) for k, x in values.items()}
        part_mb = micro_batches[picked] if np.ndim(micro_batches) else micro_batches
        looped = native.run(compiled, part, part_mb, sample, [None] * len(names), params_hand)
        if looped is None:
            return None  # the sample lies outside the loop's cases: numpy's call, the check left for another
        env = _kernel_env(part, part_mb, sample, frozenset(kernel.inputs))
        if params_hand is not None:
            env["Psi"] = float(params_hand)
        expected = kernel(env, [None] * len(names), sample)
        if not all(np.array_equal(np.asarray(a, dtype=np.float64).view(np.uint64),
                                  np.asarray(b, dtype=np.float64).view(np.uint64)) for a, b in zip(looped, expected)):
            native.refuse(kernel, signature, _COMM_SIZES)
            return None
        compiled.checked = True
    results = None if compiled is None else native.run(compiled, values, micro_batches, n, outs, params_hand)
    return None if results is None else _as_expression_form(dict(zip(names, results)), n, papers_only)


def _as_expression_form(out: dict, n: int, papers_only: bool) -> dict:
    """A kernel's outputs as the expression form gives them: params float64, the verdict an array where
    the activations are."""
    if papers_only:
        return out
    out["params"] = np.asarray(out["params"], dtype=np.float64)
    if np.ndim(out["total_bytes"]) == 0 and np.ndim(out["activation_bytes"]):  # as the expression form
        out["total_bytes"] = np.full(n, out["total_bytes"])  # broadcasts its verdict to the activations'
    return out


def _sweep_block(group: Group, values: Mapping[str, object], micro_batches, params_hand=None,
                 outs: Mapping[str, np.ndarray] | None = None, papers_only: bool = False,
                 formulas: GroupFormulas | None = None, build: bool = False,
                 loop: bool = False) -> dict[str, np.ndarray]:
    """:func:`sweep` of one block (its arrays written into ``outs`` where given); by the group's
    kernel where it is compiled, or ``build`` (compile it), in its C loop where that is compiled, or ``loop``."""
    formulas = formulas or group_formulas(group)
    # Floats throughout: FLOPs per iteration pass 2^63 for large models, and int64 would wrap silently.
    n = _plain_length(values, micro_batches)
    env = kernel = None
    if n and _kernel_ready(values, micro_batches):
        arrays = frozenset(k for k, x in values.items() if np.ndim(x)) | {"m", "m_last", "_comm"} | (
            {"_mb"} if np.ndim(micro_batches) else set())
        kernel = _sweep_kernel(formulas, arrays, params_hand is not None, papers_only, build)
        if kernel is not None:
            names = ("paper_total_bytes",) if papers_only else SWEEP_OUTPUTS
            looped = _loop_outputs(kernel, values, micro_batches, n, names,
                                   [outs.get(name) if outs else None for name in names], params_hand, papers_only,
                                   loop)
            if looped is not None:
                return looped
            env = _kernel_env(values, micro_batches, n, frozenset(kernel.inputs))
    if env is None:
        values, given = _block_env(values, micro_batches)
        n = _plain_length(values, micro_batches)
        comm = comm_bytes(values["t"], values["d"], values["p"], values["c"], values["e"],
                          given.get("e_t"))  # e_t not given: e_t = t (Megatron-Core's default)
        micro_batches = np.asarray(micro_batches, dtype=np.float64)
        if n and np.ndim(comm) <= 1:
            env = dict(values, _comm=comm, _mb=micro_batches)
            kernel = _sweep_kernel(formulas, frozenset(k for k, x in env.items() if np.ndim(x)),
                                   params_hand is not None, papers_only, build)
            if kernel is None:
                env = None
    if env is not None:
        names = ("paper_total_bytes",) if papers_only else SWEEP_OUTPUTS
        return _kernel_outputs(kernel, env, n, names, [outs.get(name) if outs else None for name in names],
                               params_hand, papers_only)
    params_of, ledgers_of = formulas.functions()
    values["Psi"] = 0.0
    (count,) = params_of(values)
    count = np.asarray(count, dtype=np.float64)
    values["Psi"] = count if params_hand is None else float(params_hand)
    model_states, acts, *rest = ledgers_of(values)
    candidates, flops_micro, model_flops_micro = rest[:-2], rest[-2], rest[-1]
    shape = np.broadcast(*(np.asarray(x) for x in (acts, *candidates))).shape
    verdict = np.array(np.broadcast_to(np.asarray(candidates[0], dtype=np.float64), shape))
    for x in candidates[1:]:  # the largest candidate instant, in place (no stacked copy of them all)
        np.maximum(verdict, x, out=verdict)
    verdict = verdict + comm
    if papers_only:
        return {"paper_total_bytes": model_states + acts}
    return {"params": count, "model_states_bytes": model_states, "activation_bytes": acts,
            "paper_total_bytes": model_states + acts, "total_bytes": verdict,
            "flops_per_iteration": flops_micro * micro_batches,
            "model_flops_per_iteration": model_flops_micro * micro_batches}


def exact_totals(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> dict[str, object]:
    """The bill's totals for one layout, exactly, from the plan's expressions."""
    formulas = group_formulas(Group.of(model, layout))
    evaluate_all = formulas.exact()
    values = dict(layout.values(model), m=layout.in_flight("first"), m_last=layout.in_flight("last"), Psi=0,
                  **_middle_values(model, layout))
    count = int(formulas.exact_params()(values)[0])
    values["Psi"] = count if params_hand is None else params_hand
    _, states_value, acts_value, *rest = evaluate_all(values)
    model_states = _whole(states_value)
    acts = _whole(acts_value)
    comm = sum(size for _, size in CommSettings().items(layout))
    verdict = max(Fraction(x) for x in rest[:-2]) + comm
    micro_batches = layout.iteration_micro_batches() * layout.dp
    flops_iteration = int(rest[-2]) * micro_batches
    model_flops = int(rest[-1]) * micro_batches
    gpus = layout.gpus
    return {"params": count, "model_states_bytes": model_states, "activation_bytes": acts,
            "paper_total_bytes": _whole(Fraction(model_states) + acts), "total_bytes": _whole(verdict),
            "flops_per_iteration": flops_iteration,
            "model_flops_per_iteration": model_flops, "flops_per_gpu_per_iteration": _whole(Fraction(flops_iteration, gpus))}


def layout_values(model: ModelConfig, layout: Layout) -> dict[str, int]:
    """The layout's dimension values and its chunks in flight (m first stage, m_last last stage)."""
    values: dict = dict(layout.values(model), m=layout.in_flight("first"))
    values[_letters()["m_last"]] = layout.in_flight("last")  # a plan-local letter: keyed by its symbol
    middle = _middle_values(model, layout)
    if middle:
        values["L_m"] = middle["L_m"]
        values[_letters()["m_mid"]] = middle["m_mid"]
    return values


def _middle_values(model: ModelConfig, layout: Layout) -> dict:
    """L_m and m_mid of an uneven layout (its groups' middle stage, :func:`_verdict_stages`): rank 1's
    layers and chunks in flight, the first stage's where p ≤ 2 has no stage between; {} when even."""
    if not (layout.first_stage_layers or layout.last_stage_layers) or layout.pp == 1:
        return {}
    if layout.middle_stage:
        return {"L_m": layout.values(model)["L_m"], "m_mid": layout.in_flight("middle")}
    return {"L_m": layout.first_stage_layer_count(model), "m_mid": layout.in_flight("first")}


def _whole(x):
    """As the bill: an int when whole, else the exact Fraction."""
    x = Fraction(x)
    return int(x) if x.denominator == 1 else x


# --- enumeration -------------------------------------------------------------

#: Up to this n, :func:`divisors` factors by trial division (≤ 10^5 trial divisors, ≈ 3 ms at worst);
#: above it, by sympy's ``factorint``.
TRIAL_DIVISION_MAX = 10**10


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, ascending, from its prime factorisation. Up to
    :data:`TRIAL_DIVISION_MAX` (every size a plan meets: GPUs ≤ 10^7, batches, experts) by trial
    division over 2, 3 and 6k ± 1 here; above it by sympy's :func:`~sympy.ntheory.factor_.divisors`
    (``factorint``: trial division, Pollard rho and p−1). Why not sympy's always: importing
    ``sympy.ntheory`` loads sympy's core, 0.35–0.42 s CPU against 0.02–0.03 s for a bare
    interpreter (2-core machine, load ≈ 2, 2026-12-02), which is most of a cold ``plan`` whose
    formulas are cached; the factoring itself takes microseconds either way at these sizes.
    ``tests/test_plan_enumeration.py`` holds it equal to sympy's on every n ≤ 20,000 and on
    large and hard ones."""
    positive_int("n", n)
    if n > TRIAL_DIVISION_MAX:
        from sympy import divisors as sympy_divisors
        return [int(x) for x in sympy_divisors(n)]
    out, rest, q = [1], n, 2
    while q * q <= rest:
        power = 0
        while rest % q == 0:
            rest //= q
            power += 1
        if power:
            out = [x * q**i for x in out for i in range(power + 1)]
        q += 1 if q == 2 else (2 if q % 6 in (3, 5) else 4)  # 2, 3, 5, 7, 11, 13, …: then 6k ± 1
    if rest > 1:
        out = out + [x * rest for x in out]
    return sorted(out)


#: The most layouts one plan enumerates (≈ 30 s on one core); a wider sweep is refused with what to fix.
MAX_LAYOUTS = 10**7

#: Options a plan can fix (None: sweep it).
FIXABLE = ("tp", "pp", "dp", "micro_batch", "interleave", "zero", "sp", "recompute", "cp", "ep", "etp")


@dataclass
class Planned:
    """One layout of a plan, with its exact ledger totals and its time estimate."""

    layout: Layout
    totals: dict[str, object]           #: exact, equal to make_bill's totals of the same names
    headroom_bytes: object              #: usable memory − total (exact)
    fits: bool
    step_seconds: float
    bubble: float                       #: pipeline bubble, fraction of the ideal step time
    recompute_overhead: float           #: hardware / model FLOPs − 1
    binding: str                        #: what limits this layout (see :func:`_binding`)
    micro_batches_per_pipeline: int
    time_breakdown: dict[str, float] = field(default_factory=dict)  #: seconds per part of the step
    model_tflops_per_gpu: float = float("nan")
    mfu: float = float("nan")

    def levers(self) -> dict[str, object]:
        """The layout's memory levers that differ from full training's defaults, as Layout fields."""
        return self.layout.memory_levers()

    def as_dict(self) -> dict[str, object]:
        lay = self.layout
        out = {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp, "ep": lay.ep, "etp": lay.etp or lay.tp,
               "micro_batch": lay.micro_batch,
               "zero": lay.zero, "recompute": lay.recompute, "sp": lay.sp, "interleave": lay.interleave,
               "seq": lay.seq, "global_batch": lay.global_batch, "optimizer": lay.optimizer,
               "dtype": lay.dtype, "micro_batches_per_pipeline": self.micro_batches_per_pipeline}
        if lay.uneven_stages:
            out.update(first_stage_layers=lay.first_stage_layers, last_stage_layers=lay.last_stage_layers)
        if lay.fp8_activations:
            out["fp8_activations"] = True
        for name, value in self.levers().items():  # the memory levers (LoRA, offload), when set
            out[name] = value
        if lay.flash_attention:
            out["flash_attention"] = True
        if lay.loss != "eager":
            out["loss"] = lay.loss
        out.update({k: _jsonable(val) for k, val in self.totals.items()})
        out.update(headroom_bytes=_jsonable(self.headroom_bytes), fits=self.fits,
                   step_seconds=self.step_seconds, bubble=self.bubble,
                   recompute_overhead=self.recompute_overhead, binding=self.binding,
                   time_breakdown=self.time_breakdown, model_tflops_per_gpu=self.model_tflops_per_gpu, mfu=self.mfu)
        return out


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    value = Fraction(value)
    return int(value) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


@dataclass
class Plan:
    """Every valid layout, evaluated; :meth:`ranked` gives the fitting ones, fastest first."""

    model: ModelConfig
    gpus: int
    gpu_memory: int
    margin: int
    hardware: Hardware
    seq: int
    global_batch: int
    params_hand: int | None
    optimizer: str
    dtype: str
    table: dict[str, np.ndarray]         #: one entry per layout evaluated (columns of equal length)
    order: np.ndarray                    #: indices of the fitting layouts, best first
    rules: list[str] = field(default_factory=list)
    moe_capacity: Fraction = Fraction(1)  #: the layouts' capacity factor (Layout.moe_capacity), fixed
    overlap: Overlap = field(default_factory=Overlap)
    gpus_per_node: int = 8
    optimizer_impl: str = "foreach"
    fp8_activations: bool = False  #: the layouts keep their linear layers' saved inputs in FP8
    first_stage_layers: int = 0  #: uneven stages, every layout (0: even)
    last_stage_layers: int = 0
    flash_attention: bool = False  #: the layouts run the fused attention kernel
    loss: str = "eager"  #: the layouts' loss kernel (Layout.loss)
    loss_under_tp: str | None = None  #: the kernel of the layouts with t > 1 where it is another (None: loss)
    seq_given: bool = False  #: s was given (--seq), not the model's or the stated default (seq_origin)
    #: the memory levers of every layout, as Layout fields (lora, lora_targets, base_dtype, double_quant,
    #: offload, activation_offload); empty: none
    levers: Mapping = field(default_factory=dict)

    @property
    def usable(self) -> int:
        return self.gpu_memory - self.margin

    @property
    def evaluated(self) -> int:
        return len(self.table["tp"])

    def layout_at(self, i: int) -> Layout:
        return replace(_layout_from(self.table, i, self.seq, self.global_batch, self.optimizer, self.dtype,
                                    self.moe_capacity, self.optimizer_impl), fp8_activations=self.fp8_activations,
                       flash_attention=self.flash_attention, first_stage_layers=self.first_stage_layers, last_stage_layers=self.last_stage_layers,
                       loss=self.loss_of(int(self.table["tp"][i])), **self.levers)

    def loss_of(self, tp: int) -> str:
        """The loss kernel of a layout with ``tp`` tensor-parallel ranks."""
        return self.loss_under_tp if self.loss_under_tp and tp > 1 else self.loss

    def planned(self, i: int) -> Planned:
        """Layout ``i`` with exact totals (the bill's) and the float time estimate."""
        layout = self.layout_at(i)
        totals = exact_totals(self.model, layout, self.params_hand)
        headroom = _whole(self.usable - Fraction(totals["total_bytes"]))
        breakdown = {name: float(self.table["time_" + name][i]) for name in TIME_COLUMNS[:-2]}
        return Planned(layout, totals, headroom, bool(headroom >= 0), float(self.table["step_seconds"][i]),
                       float(self.table["bubble"][i]), float(self.table["recompute_overhead"][i]),
                       _binding(self, i, layout, headroom), int(self.table["micro_batches"][i]), breakdown,
                       float(self.table["time_model_tflops_per_gpu"][i]), float(self.table["time_mfu"][i]))

    def ranked(self, top: int | None = 10) -> list[Planned]:
        """The fitting layouts, fastest first (``top`` None or 0: all)."""
        picked = self.order if not top else self.order[:top]
        return [self.planned(int(i)) for i in picked]

    def closest(self) -> Planned | None:
        """When nothing fits: the layout that misses by the least."""
        if self.evaluated == 0:
            return None
        return self.planned(int(np.argmin(self.table["total_bytes"])))


def _binding(plan: Plan, i: int, layout: Layout, headroom) -> str:
    """What limits a layout, in words.

    ``memory``: it recomputes, and the same layout with the next lighter policy
    does not fit (the memory forces the recompute); otherwise the largest term
    of the step beyond the GEMMs of the model FLOPs — recompute FLOPs, exposed
    communication of a group, the pipeline bubble, element-wise kernels, the
    optimizer step — as a share of the step. A layout that does not fit is
    bound by memory.
    """
    if headroom < 0:
        return f"memory: over by {float(-Fraction(headroom)) / 1e9:.2f} GB"
    if layout.recompute != "none":
        lighter = RECOMPUTE_ORDER[RECOMPUTE_ORDER.index(layout.recompute) - 1]
        try:
            total = exact_totals(plan.model, replace(layout, recompute=lighter), plan.params_hand)["total_bytes"]
        except ConfigError:
            total = None
        if total is not None and total > plan.usable:
            without = "no recompute" if lighter == "none" else f"{lighter} recompute"
            return f"memory: {without} would need {float(total) / 1e9:.2f} GB"
    return time_binding({name: float(plan.table["time_" + name][i]) for name in TIME_COLUMNS[:-2]},
                        float(plan.table["recompute_overhead"][i]), layout)


#: The step's parts in words (the time model's breakdown keys).
TIME_PARTS = {"elementwise": "element-wise kernels (HBM)", "tp_exposed": "TP communication",
              "cp_exposed": "CP ring exposed", "ep_exposed": "EP all-to-all", "pp_exposed": "pipeline sends",
              "bubble": "pipeline bubble", "dp_exposed": "DP reduce exposed", "zero3_exposed": "ZeRO-3 gathers exposed",
              "overlap_slowdown": "compute slowed by hidden collectives", "optimizer": "optimizer step"}


def time_binding(breakdown: Mapping[str, float], recompute_overhead: float, layout: Layout) -> str:
    """The largest part of the step beyond the model's GEMMs, as a share of the step."""
    step = sum(breakdown.values())
    if not step > 0:
        return "compute"
    parts = {TIME_PARTS[name]: value for name, value in breakdown.items() if name in TIME_PARTS}
    if recompute_overhead > 0:
        # With no recompute policy, the extra hardware FLOPs are the fused attention kernel's Q·Kᵀ recompute.
        what = "recompute FLOPs" if layout.recompute != "none" else "fused attention's recompute"
        parts[what] = breakdown["compute"] * recompute_overhead / (1 + recompute_overhead)
    name, value = max(parts.items(), key=lambda kv: kv[1])
    return "compute" if value <= 0 else f"{name} {value / step:.0%}"


def in_flight_array(pp, interleave, micro_batches, stage: str):
    """:func:`symbolic.layout.layout.in_flight` over arrays of layouts: the same rule, written with
    ``np.where`` (``tests/test_verdict.py`` holds the two equal over a grid of p, v and m)."""
    p_, v_, m_ = (np.asarray(x, dtype=np.int64) for x in (pp, interleave, micro_batches))
    if stage == "middle":  # rank 1 (p − 1 in flight under 1F1B); with p ≤ 2 no stage is between: the first's
        first = in_flight_array(pp, interleave, micro_batches, "first")
        warm_up = 2 * (p_ - 2) + (v_ - 1) * p_
        interleaved = np.where(m_ == p_, m_ * v_, np.minimum(warm_up + 1, m_ * v_))
        rank_one = np.where(v_ == 1, np.minimum(m_, p_ - 1), interleaved)
        return np.where(p_ > 2, rank_one, first).astype(np.int64)
    if not np.any(v_ != 1):  # no layout interleaved (a sweep's common case): 1F1B's count alone
        shape = np.broadcast_shapes(p_.shape, v_.shape, m_.shape)
        counts = np.minimum(m_, p_) if stage == "first" else 1
        return np.broadcast_to(np.where(p_ == 1, 1, counts), shape).astype(np.int64)
    warm_up = (2 * (p_ - 1) if stage == "first" else 0) + (v_ - 1) * p_
    interleaved = np.where(m_ == p_, m_ * v_, np.minimum(warm_up + 1, m_ * v_))
    one_f_one_b = np.minimum(m_, p_) if stage == "first" else np.ones_like(m_)
    return np.where(p_ == 1, 1, np.where(v_ == 1, one_f_one_b, interleaved)).astype(np.int64)


def pipeline_bubble(pp, interleave, micro_batches):
    """Idle fraction of the ideal step: (p−1)/m for 1F1B, (p−1)/(v·m) interleaved
    (Narayanan et al. 2021 §2.2.1–2.2.2), m = micro-batches per pipeline per iteration."""
    pp = np.asarray(pp, dtype=np.float64)
    return np.where(pp > 1, (pp - 1) / (np.asarray(interleave) * np.asarray(micro_batches)), 0.0)


def step_seconds(flops_per_gpu, bubble, peak_flops: float = 312e12, utilisation: float = 0.5):
    """FLOPs-only estimate (the plan's model before the communication ledger; kept for the
    llm-analysis comparison, which has the same): hardware FLOPs per GPU / (peak ×
    utilisation) × (1 + bubble)."""
    return flops_per_gpu / (peak_flops * utilisation) * (1 + bubble)


#: The time model's columns a plan keeps per layout (seconds, and the throughput figures).
TIME_COLUMNS = ("compute", "elementwise", "tp_exposed", "cp_exposed", "ep_exposed", "pp_exposed", "bubble",
                "dp_exposed", "zero3_exposed", "overlap_slowdown", "optimizer", "model_tflops_per_gpu", "mfu")


def _fixed(fixed: Mapping[str, object] | None) -> dict[str, object]:
    fixed = {k: val for k, val in (fixed or {}).items() if val is not None}
    unknown = set(fixed) - set(FIXABLE)
    if unknown:
        raise ConfigError(f"cannot fix {sorted(unknown)} in a plan; fixable: {', '.join(FIXABLE)}")
    return fixed



def _expert_grids(model: ModelConfig, folded: int, tp: int, gpus_per_node: int, fixed) -> list[tuple[int, int]]:
    """(ep, etp) pairs to try on a pipeline stage of ``folded`` = t·d·c ranks: ep over the divisors of
    the routed experts, etp over those of the expert width within a node, ep·etp dividing t·d·c
    (:func:`symbolic.layout.experts.validate_expert_parallel` decides the rest). etp is stored as
    0 when it equals tp (Megatron-Core's default). A dense model: (1, 0) only."""
    if not model.experts:
        if fixed.get("ep", 1) != 1 or fixed.get("etp") is not None:
            raise ConfigError(f"--ep/--etp split routed experts; {model.name} has none: drop them")
        return [(1, 0)]
    width = model.expert_ffn or model.ffn or 4 * model.hidden
    grids = []
    for ep in divisors(model.experts):
        for etp in divisors(width):
            if etp > gpus_per_node or folded % (ep * etp):
                continue
            if fixed.get("ep", ep) != ep or fixed.get("etp", etp) != etp:
                continue
            grids.append((ep, 0 if etp == tp else etp))
    return grids


def enumerate_layouts(model: ModelConfig, gpus: int, *, seq: int = 0, global_batch: int = 0,
                      max_micro_batch: int = 16, gpus_per_node: int = 8,
                      fixed: Mapping[str, object] | None = None,
                      moe_capacity=1, first_stage_layers: int = 0,
                      last_stage_layers: int = 0, levers: Mapping | None = None) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every valid layout of ``model`` on ``gpus`` GPUs, as columns of numpy arrays.

    Micro-batch sizes: with ``global_batch``, every b with b·d dividing it;
    without, the powers of two up to ``max_micro_batch`` (one micro-batch per
    data-parallel rank per iteration, as the bill's default).
    ``first_stage_layers`` / ``last_stage_layers``: uneven stages for every
    layout (:func:`symbolic.layout.layout.stage_layers`): only the p (and v)
    they make valid are kept; column ``L_1`` holds the first stage's layers.
    ``levers``: Layout fields (LoRA, offload, ...) every layout carries: the bill's rules for
    them (``Layout.is_valid``) keep or drop each layout.
    Returns the columns and the rules applied, in words.
    """
    positive_int("gpus", gpus)
    positive_int("gpus_per_node", gpus_per_node)
    positive_int("max_micro_batch", max_micro_batch)
    if global_batch:
        positive_int("global_batch", global_batch)
    fixed = _fixed(fixed)
    values = Layout(seq=seq).values(model)
    s_, heads, layers, ffn = values["s"], model.heads, model.layers, values["f"]
    kv = f", the key/value heads ({values['g']})" if "g" in values else ""
    ffn_e = f", the expert FFN width ({values['f_e']})" if "f_e" in values else ""
    rules = [f"t·p·d·c = {gpus}", f"c divides s ({s_})", f"t divides heads ({heads}){kv}{ffn_e} and the FFN width ({ffn}); "
             f"t ≤ {gpus_per_node} "
             "GPUs per node (Narayanan et al. 2021 §3.3)", f"p·v divides the layers ({layers})",
             "SP only with t > 1, s divisible by t·c", "ZeRO only with d·c > 1; ZeRO-2/3 only with p = 1 "
             "(DeepSpeed's pipeline engine supports ZeRO-1)",
             "interleaving (v > 1) only with p > 1 and micro-batches per pipeline a multiple of p (Megatron-LM)"]
    uneven = bool(first_stage_layers or last_stage_layers)
    if uneven:
        rules[3] = (f"uneven stages (first {first_stage_layers or 'even'}, last {last_stage_layers or 'even'} "
                    f"layers): the layers left divide over the other stages, v divides every stage's count "
                    f"(Megatron-Core get_num_layers_to_build); p > 1")
    if model.experts:
        rules.append(f"ep divides the routed experts ({model.experts}); ep·etp divides t·d·c (Megatron-Core's "
                     f"expert grid); etp divides the expert FFN width and is ≤ {gpus_per_node}; etp ≠ t only under SP")
    if global_batch:
        rules.append(f"global batch {global_batch}: b·d divides it; micro-batches per pipeline m = B/(b·d)")
    else:
        rules.append(f"no global batch: one micro-batch per data-parallel rank (m = 1), "
                     f"b in powers of two up to {max_micro_batch}")

    # Each (c, t, p) block's rows at once, in the loops' order (b, v, ZeRO, SP, expert grid, recompute).
    # Layout.is_valid, the one rule set, decides each (v, ZeRO, SP, expert grid) of a block once, at the
    # first micro-batch size b the block admits: b enters the rules only through b·d dividing the
    # global batch and the interleaved schedule's whole rounds (m a multiple of p), and both are applied
    # to every b here. tests/test_plan_enumeration.py checks the rows against every candidate layout
    # Layout.is_valid accepts (for GPT-3 on 1024 GPUs 3,126 validations instead of 32,976, which were most of a cold plan).
    names = ("tp", "pp", "dp", "micro_batch", "interleave", "zero", "sp", "recompute", "micro_batches", "cp",
             "ep", "etp", "L_1", "L_p", "L_m")
    recomputes = np.array([rc for rc in range(3) if fixed.get("recompute", RECOMPUTE_ORDER[rc]) == RECOMPUTE_ORDER[rc]],
                          dtype=np.int64)
    blocks = []
    count = 0
    for cp, tp in ((cp, tp) for cp in divisors(gpus) if s_ % cp == 0 and fixed.get("cp", cp) == cp
                   for tp in divisors(gpus // cp)):
        if heads % tp or ffn % tp or tp > gpus_per_node or fixed.get("tp", tp) != tp:
            continue
        for pp in divisors(gpus // (cp * tp)):
            dp = gpus // (cp * tp * pp)
            if fixed.get("pp", pp) != pp or fixed.get("dp", dp) != dp:
                continue
            if uneven:
                try:
                    stages = stage_layers(layers, pp, 1, first_stage_layers, last_stage_layers)
                except ConfigError:
                    continue
            elif layers % pp:
                continue
            else:
                stages = (layers // pp,) * pp
            if global_batch:
                if global_batch % dp:
                    continue
                micro = divisors(global_batch // dp)
            else:
                micro = [1 << k for k in range(max_micro_batch.bit_length()) if 1 << k <= max_micro_batch]
            micro = np.array([mb for mb in micro if fixed.get("micro_batch", mb) == mb], dtype=np.int64)
            if not micro.size or not recomputes.size:
                continue
            m_of = global_batch // (micro * dp) if global_batch else np.ones_like(micro)
            whole_rounds = m_of % pp == 0  # what interleaving (v > 1) needs of each b
            chunks = [1] + ([vv for vv in divisors(math.gcd(*stages)) if vv > 1] if pp > 1 else [])
            zeros = [0] if dp * cp == 1 else ([0, 1] if pp > 1 else [0, 1, 2, 3])
            sps = [False, True] if tp > 1 and s_ % (tp * cp) == 0 else [False]
            expert_grids = _expert_grids(model, tp * dp * cp, tp, gpus_per_node, fixed)
            valid = []  # (v, ZeRO, SP, ep, etp) the rules accept, in the loops' order
            for vv in chunks:
                if fixed.get("interleave", vv) != vv:
                    continue
                admitted = micro[whole_rounds] if vv > 1 else micro
                if not admitted.size:
                    continue
                for zero in zeros:
                    # A fixed ZeRO stage over one data-parallel rank, or SP at t = 1, changes nothing:
                    # that layout is ZeRO-0 / no SP (layout.settle_no_ops), not refused.
                    if fixed.get("zero", zero) != zero and not (dp * cp == 1 and zero == 0):
                        continue
                    for sp, ep, etp in ((sp, ep, etp) for sp in sps for ep, etp in expert_grids):
                        if (fixed.get("sp", sp) != sp and not (tp == 1 and not sp)) or not Layout(
                                micro_batch=int(admitted[0]), seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, interleave=vv,
                                zero=zero, global_batch=global_batch, cp=cp, ep=ep, etp=etp,
                                moe_capacity=moe_capacity, first_stage_layers=first_stage_layers,
                                last_stage_layers=last_stage_layers, **(levers or {})).is_valid(model):
                            continue
                        valid.append((vv, zero, int(sp), ep, etp or tp))
            if not valid:
                continue
            choices = np.array(valid, dtype=np.int64)
            keep = (choices[None, :, 0] == 1) | whole_rounds[:, None]  # (b, choice)
            b_index, c_index = np.nonzero(keep)
            b_index = np.repeat(b_index, recomputes.size)
            c_index = np.repeat(c_index, recomputes.size)
            block = np.empty((b_index.size, len(names)), dtype=np.int64)
            # L_m: a middle stage's layers, the first's where p ≤ 2 has none (plan's ARG_NAMES)
            block[:, [0, 1, 2, 9, 12, 13, 14]] = (tp, pp, dp, cp, stages[0], stages[-1], stages[1 if pp > 2 else 0])
            block[:, 3] = micro[b_index]
            block[:, 8] = m_of[b_index]
            block[:, [4, 5, 6, 10, 11]] = choices[c_index]
            block[:, 7] = np.tile(recomputes, b_index.size // recomputes.size)
            blocks.append(block)
            count += block.shape[0]
            if count > MAX_LAYOUTS:
                raise ConfigError(
                    f"the sweep has more than {MAX_LAYOUTS:,} layouts (global batch "
                    f"{global_batch or 'none'}, {gpus} GPUs): fix some of --tp, --pp, --cp, "
                    "--micro-batch, --interleave, or give a global batch with fewer divisors")
    array = np.concatenate(blocks) if blocks else np.empty((0, len(names)), dtype=np.int64)
    return {name: array[:, k] for k, name in enumerate(names)}, rules


def plan(model: ModelConfig, gpus: int, gpu_memory: int, *, seq: int = 0, global_batch: int = 0,
         margin: int = 0, params_hand: int | None = None, optimizer: str = "bf16-adam", dtype: str = "bf16",
         hardware: Hardware | None = None, max_micro_batch: int = 16, gpus_per_node: int | None = None,
         fixed: Mapping[str, object] | None = None, moe_capacity=1, overlap: Overlap = Overlap(),
         optimizer_impl: str = "foreach", fp8_activations: bool = False, first_stage_layers: int = 0,
         last_stage_layers: int = 0, flash_attention: bool = False, loss: str = "eager",
         loss_under_tp: str | None = None, levers: Mapping | None = None) -> Plan:
    """Evaluate every valid layout of ``model`` on ``gpus`` GPUs of ``gpu_memory`` bytes.

    Keeps those whose verdict (the step's peak on the busiest GPU) ≤ ``gpu_memory − margin``
    (``optimizer_impl``: ``foreach`` steps keep fp32 temporaries, ``fused`` none) and ranks
    them by the step-time model of :mod:`symbolic.ledgers.time` (compute, communication
    placed by Megatron's rank order on ``hardware`` with ``gpus_per_node`` GPUs per
    NVLink domain, overlap, bubble, optimizer) per sequence (= step time when the
    global batch is fixed), then by headroom. ``hardware``: default the A100-80GB;
    ``gpus_per_node``: default its NVLink domain. Raises :class:`ConfigError` when no layout is
    valid at all (as opposed to none fitting). ``fp8_activations``: every
    layout keeps its linear layers' saved inputs in FP8. ``first_stage_layers``,
    ``last_stage_layers``: uneven pipeline stages for every layout (Megatron-Core's).
    ``flash_attention``: every layout runs the fused attention kernel (no s×s tensor saved, its
    backward recomputes Q·Kᵀ; ``strategies.flash_attention``) — memory and time both.
    ``loss``: every layout's loss kernel (``Layout.loss``; its output side and work tensors);
    ``loss_under_tp``: the kernel of the layouts with t > 1 instead (None: ``loss`` everywhere) — the bill's
    default under tensor parallelism (``layout.default_loss``) when the caller gave no loss.
    """
    from ..bill.evaluate import layout_structure
    from ..models.losses import LOSS_KERNELS, WHOLE_VOCABULARY

    _check_arch(model)
    for kernel in (loss, loss_under_tp or loss):
        if kernel not in LOSS_KERNELS:
            raise ConfigError(f"loss must be one of {', '.join(LOSS_KERNELS)}, not {kernel!r}")
    # the layouts' structure (the loss kernel rides in it) without and with tensor parallelism
    structures = {tp_split: layout_structure(model, Layout(flash_attention=flash_attention,
                                                            loss=(loss_under_tp or loss) if tp_split else loss))
                  for tp_split in (False, True)}
    positive_int("gpu_memory", gpu_memory)
    if margin < 0 or margin >= gpu_memory:
        raise ConfigError(f"margin ({margin:,} B) must be at least 0 and below the GPU memory ({gpu_memory:,} B)")
    if optimizer not in RECIPES:
        raise ConfigError(f"unknown optimizer {optimizer!r}; recipes: {', '.join(RECIPES)}")
    if optimizer_impl not in ("foreach", "fused"):
        raise ConfigError(f"optimizer-impl must be foreach or fused, not {optimizer_impl!r}")
    if RECIPES[optimizer].factored:
        raise ConfigError(f"optimizer {optimizer}: its factored states need the parameters' shapes; plan sweeps "
                          "per-parameter recipes — use `symbolic bill` for it")
    if dtype not in FLOAT_ACTIVATION_DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}, not {dtype!r}")
    if fixed and fixed.get("recompute") is not None and fixed["recompute"] not in RECOMPUTE:
        raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE)}")
    hardware = hardware or default_hardware()
    gpus_per_node = gpus_per_node or hardware.nvlink_domain
    seq_given = bool(seq)
    seq = positive_int("seq", seq) if seq else model.seq
    levers = dict(levers or {})
    if levers:  # the bill's one rule set for the levers (Layout.validate), before any layout is swept
        lever_check = Layout(seq=seq, optimizer=optimizer, optimizer_impl=optimizer_impl, **levers)
        lever_check.validate(model)
    check_position_table(model, seq)  # no layout can run it: the bill's one line, not "no valid layout"
    if loss in WHOLE_VOCABULARY:  # Layout's rule: no vocabulary split (layout._loss_kernel_parallelism)
        if fixed and fixed.get("tp") not in (None, 1):
            raise ConfigError(f"loss {loss} with tp {fixed['tp']}: the kernel has no vocabulary split — fix tp 1, "
                              "or use --loss vocab-parallel / fused")
        fixed = dict(fixed or {}, tp=1)
    table, rules = enumerate_layouts(model, gpus, seq=seq, global_batch=global_batch,
                                     max_micro_batch=max_micro_batch, gpus_per_node=gpus_per_node, fixed=fixed,
                                     moe_capacity=moe_capacity, first_stage_layers=first_stage_layers,
                                     last_stage_layers=last_stage_layers, levers=levers)
    n = len(table["tp"])
    if n == 0:
        raise ConfigError(f"no valid layout of {model.name} on {gpus} GPUs"
                          + (f" with global batch {global_batch}" if global_batch else "")
                          + (f" and {dict(_fixed(fixed))}" if _fixed(fixed) else "")
                          + ": choose a GPU count whose factors divide the heads "
                          f"({model.heads}) and layers ({model.layers}), and a cp that divides s ({seq})"
                          + (" and a global batch divisible by the data-parallel size" if global_batch else ""))
    values = Layout(seq=seq, **levers).values(model)
    scalars = {k: values[k] for k in MODEL_LETTERS + ("r",) if k in values}  # r: the LoRA rank
    cols = {"t": table["tp"], "p": table["pp"], "d": table["dp"], "b": table["micro_batch"],
            "v": table["interleave"], "c": table["cp"], "e": table["ep"], "e_t": table["etp"],
            "m": in_flight_array(table["pp"], table["interleave"], table["micro_batches"], "first"),
            "m_last": in_flight_array(table["pp"], table["interleave"], table["micro_batches"], "last"),
            "L_1": table["L_1"], "L_p": table["L_p"]}
    if first_stage_layers or last_stage_layers:  # the middle stage's letters (uneven groups read them)
        cols.update(L_m=table["L_m"], m_mid=in_flight_array(table["pp"], table["interleave"], table["micro_batches"],
                                                            "middle"))
    scalars["C_f"] = float(Fraction(moe_capacity))
    micro_batches_total = table["micro_batches"] * table["dp"]
    out = {k: np.empty(n) for k in ("params", "model_states_bytes", "activation_bytes", "paper_total_bytes",
                                     "total_bytes",
                                     "flops_per_iteration", "model_flops_per_iteration")}
    schedule = np.where(table["pp"] == 1, 0, np.where(table["interleave"] > 1, 2, 1))
    # One group per discrete choice: the expressions differ in shape, not in values.
    context = (table["cp"] > 1).astype(np.int64)
    expert = (table["ep"] > 1).astype(np.int64)
    expert_tensor = (table["etp"] != table["tp"]).astype(np.int64)
    # the layouts with t > 1 are their own groups where their loss kernel is not the others' (loss_under_tp)
    tp_split = ((table["tp"] > 1) if loss_under_tp and loss_under_tp != loss
                else np.zeros_like(table["tp"], dtype=bool)).astype(np.int64)
    key = (((((((tp_split * 2 + expert) * 2 + expert_tensor) * 2 + context) * 2 + table["sp"]) * 3
             + table["recompute"]) * 4 + table["zero"]) * 3 + schedule)
    for idx in _indices_by_key(key):
        i0 = idx[0]
        group = Group(bool(table["sp"][i0]), RECOMPUTE_ORDER[table["recompute"][i0]], int(table["zero"][i0]),
                      SCHEDULES[schedule[i0]], optimizer, dtype, structures[bool(tp_split[i0])], bool(context[i0]),
                      bool(expert[i0]), bool(expert_tensor[i0]), Fraction(moe_capacity) != 1,
                      optimizer_impl=optimizer_impl, fp8_activations=fp8_activations,
                      uneven=bool(first_stage_layers or last_stage_layers), **lever_fields(Layout(**levers)))
        vals = dict(scalars, **{k2: col[idx] for k2, col in cols.items()})
        result = sweep(group, vals, micro_batches_total[idx], params_hand)
        for name, arr in result.items():
            out[name][idx] = arr
    usable = gpu_memory - margin
    # Floats screen; layouts within 1e-9 of the limit are decided exactly.
    fits = out["total_bytes"] <= usable
    near = np.flatnonzero(np.abs(out["total_bytes"] - usable) <= 1e-9 * usable)
    for i in near:
        layout = replace(_layout_from(table, int(i), seq, global_batch, optimizer, dtype, moe_capacity, optimizer_impl),
                         fp8_activations=fp8_activations, flash_attention=flash_attention,
                         loss=(loss_under_tp or loss) if tp_split[i] else loss,
                         first_stage_layers=first_stage_layers,
                         last_stage_layers=last_stage_layers, **levers)
        fits[i] = exact_totals(model, layout, params_hand)["total_bytes"] <= usable
    bubble = pipeline_bubble(table["pp"], table["interleave"], table["micro_batches"])
    sequences = table["micro_batch"] * micro_batches_total
    # The step-time model, priced for the layouts that fit (the others are never ranked).
    step = np.full(n, np.inf)
    times = {name: np.full(n, np.nan) for name in TIME_COLUMNS}
    gemm_dtype = Layout(optimizer=optimizer, fp8_activations=fp8_activations).gemm_dtype
    inputs = []
    for idx in _indices_by_key(key, fits):
        i0 = idx[0]
        group = Group(bool(table["sp"][i0]), RECOMPUTE_ORDER[table["recompute"][i0]], int(table["zero"][i0]),
                      SCHEDULES[schedule[i0]], optimizer, dtype, structures[bool(tp_split[i0])], bool(context[i0]),
                      bool(expert[i0]), uneven=bool(first_stage_layers or last_stage_layers),
                      **lever_fields(Layout(**levers)))
        vals = dict(scalars, **{k2: col[idx] for k2, col in cols.items()})
        vals["Psi"] = out["params"][idx] if params_hand is None else float(params_hand)
        inputs.append((idx, _time_inputs(group, vals, sequences[idx])))
    for idx, priced in price_groups(inputs, hardware, overlap, gpus_per_node, gemm_dtype):
        step[idx] = priced.step_seconds
        for name, arr in priced.breakdown.items():
            times[name][idx] = arr
        times["model_tflops_per_gpu"][idx] = priced.model_tflops_per_gpu
        times["mfu"][idx] = priced.mfu
    table.update(out)
    table.update({"time_" + name: arr for name, arr in times.items()})
    table.update(fits=fits, bubble=bubble, step_seconds=step, seconds_per_sequence=step / sequences,
                 recompute_overhead=out["flops_per_iteration"] / out["model_flops_per_iteration"] - 1,
                 headroom=usable - out["total_bytes"])
    fit_idx = np.flatnonzero(fits)
    # e·e_t for a mixture of experts (etp is stored as t there by default); a dense model has no expert grid.
    expert_ranks = table["ep"] * table["etp"] if model.experts else np.ones_like(table["ep"])
    # Fastest per sequence, then fewest context-parallel ranks, then fewest expert-grid ranks e·e_t
    # (of equal times, the smaller grid), then most headroom, then fewest
    # model-parallel ways. Times equal but for float rounding (a CP layout and its cp = 1 twin)
    # compare equal: 12 significant digits.
    order = fit_idx[np.lexsort((table["tp"][fit_idx] * table["pp"][fit_idx], -table["headroom"][fit_idx],
                                expert_ranks[fit_idx], table["cp"][fit_idx],
                                _significant(table["seconds_per_sequence"][fit_idx])))]
    return Plan(model, gpus, gpu_memory, margin, hardware, seq, global_batch, params_hand, optimizer, dtype,
                table, order, rules, moe_capacity=Fraction(moe_capacity), overlap=overlap,
                gpus_per_node=gpus_per_node, optimizer_impl=optimizer_impl,
                fp8_activations=fp8_activations, first_stage_layers=first_stage_layers,
                last_stage_layers=last_stage_layers, flash_attention=flash_attention, loss=loss,
                loss_under_tp=loss_under_tp if loss_under_tp != loss else None, seq_given=seq_given, levers=levers)


def _significant(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """``x`` (positive) rounded to ``digits`` significant digits: a sort key that ties float noise."""
    if x.size == 0:
        return x
    scale = 10.0 ** (np.floor(np.log10(x)) - (digits - 1))
    return np.round(x / scale) * scale


def _layout_from(table, i, seq, global_batch, optimizer, dtype, moe_capacity=1,
                 optimizer_impl: str = "foreach") -> Layout:
    return Layout(micro_batch=int(table["micro_batch"][i]), seq=seq, tp=int(table["tp"][i]),
                  pp=int(table["pp"][i]), dp=int(table["dp"][i]), sp=bool(table["sp"][i]),
                  recompute=RECOMPUTE_ORDER[table["recompute"][i]], zero=int(table["zero"][i]),
                  optimizer=optimizer, interleave=int(table["interleave"][i]), dtype=dtype,
                  global_batch=global_batch, cp=int(table["cp"][i]), ep=int(table["ep"][i]),
                  etp=0 if table["etp"][i] == table["tp"][i] else int(table["etp"][i]),
                  moe_capacity=Fraction(moe_capacity), optimizer_impl=optimizer_impl)
