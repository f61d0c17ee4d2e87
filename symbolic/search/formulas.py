"""A plan's formulas: the bill's ledgers once per discrete choice (:class:`Group`), as expressions.

The ledgers' expressions are built by the same calls the bill makes (``params.count``, ``states.blocks``,
``activations.layer_inventory`` × ``Strategy.layers_held``, ``peak.stage_instants``,
``flops.hardware_training``), kept as text in the bill's cache (:class:`GroupFormulas`, :func:`group_formulas`)
and read by the guarded reader (:mod:`symbolic.core.expressions`) into one numpy function per group (the
sweep, :mod:`symbolic.search.verdict`) and one exact function (the layouts a plan shows). Sympy loads only
where a group is derived.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

# No sympy here: a plan whose groups' formulas are cached (group_formulas) reads them as text and
# computes in ints and Fractions, so sympy (≈ 0.3–0.5 s to import) loads only where a group is
# derived — inside the functions below that build expressions.
from ..layout.layout import Layout
from ..layout.stages import uneven_stage_ways
from ..ledgers.hardware import Hardware
from ..ledgers.hardware import load as load_hardware
from ..models.config import BILLED_ARCHITECTURES, ConfigError, ModelConfig
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
                 "P", "d_h", "L_d", "f_s", "r_q", "r_kv", "d_n", "d_r", "d_v", "L_n", "L_w", "w", "n_m", "d_m",
                 "d_s", "g_m", "p_c", "Q", "L_s", "L_a", "L_c", "K_c", "L_l", "H_k", "H_v", "D_k", "D_v")
#: Pipeline schedules as the bill accounts them: no pipeline (pp = 1), the
#: first stage of 1F1B (pp > 1), the first stage of the interleaved schedule (v > 1); then the schedules
#: beyond Megatron's (``layout.schedules``: their chunks in flight the m letters, DualPipe's two parameter
#: copies, the V's and DualPipe's output side on rank 0).
SCHEDULES = ("none", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev")
#: The schedules that place a rank's chunks at both ends of the model (a V, DualPipe's pair), with how:
#: rank 0 holds the output side too, and DualPipe keeps two stages' parameters (``Schedule.placement``,
#: ``parameter_copies``).
PLACED = {"zb-v": "v", "dualpipev": "v", "dualpipe": "dual"}
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
                ep: bool = False, etp: bool = False, uneven: bool = False, schedule: str = "") -> Expr:
    """Model-state bytes per GPU in Psi, t, p, d (and c under context parallelism: ZeRO over d·c),
    the bill's ``model_states`` lines, summed. A mixture of experts (``structure``'s arch ``moe``):
    the routed experts on the expert grid (e, e_t: the symbols when ``ep``/``etp``, else 1 and t),
    as the bill (``states.expert_blocks``). ``uneven``: the first stage's L_1 of L layers (the
    bill's ``stage_ways``), not L/p."""
    from sympy import Add

    from ..core.dims import L, L_1, c, e, e_t, p, t
    from ..ledgers import states
    recipe, context = states.RECIPES[optimizer], c if cp else 1
    stage = schedule_ways("first", uneven, schedule) if schedule == "dualpipe" else L / L_1 if uneven else p
    if structure is None or not _has_experts(structure):
        return Add(*states.blocks(recipe, zero, context_parallel=context, pipeline_parallel=stage).values())
    from ..bill.derive import routed_expert_parameters
    experts = routed_expert_parameters(_inventories(structure)[0])
    return Add(*states.expert_blocks(recipe, zero, experts, context_parallel=context, pipeline_parallel=stage,
                                     expert_parallel=e if ep else 1, expert_tensor_parallel=e_t if etp else t).values())


def schedule_of(layout: Layout) -> str:
    return "none" if layout.pp == 1 else layout.schedule_name


def schedule_ways(stage: str, uneven: bool, schedule: str):
    """What ``stage`` divides the layers' parameters by (the bill's ``derive.stage_ways``): p, or with uneven
    stages L/L_1, L/L_m, L/L_p; under DualPipe, whose rank holds its stage and the mirror one (two parameter
    copies), half of it — with uneven stages L/(L_1 + L_p) on the first and the last, L/(2·L_m) between."""
    from ..core.dims import L, L_1, L_m, L_p, p
    if schedule != "dualpipe":
        return uneven_stage_ways(stage) if uneven else p
    if not uneven:
        return p / 2
    return L / {"first": L_1 + L_p, "last": L_1 + L_p, "middle": 2 * L_m}[stage]


def holds_loss(schedule: str, stage: str) -> bool:
    """Whether ``stage``'s rank holds the output side: every rank without a pipeline, the last under a loop
    placement, rank 0 under a V (its second chunk is the last stage), both ends under DualPipe."""
    if schedule == "none":
        return True
    placement = PLACED.get(schedule, "loop")
    return stage == "last" if placement == "loop" else stage == "first" if placement == "v" else stage != "middle"


def _representative(sp: bool, recompute: str, dtype: str, schedule: str, cp: bool = False,
                    experts: tuple = (False, False, False, (), False), fp8_activations: bool = False,
                    uneven: bool = False) -> Layout:
    """A layout with this schedule, so that :meth:`Layout.strategy` maps it as the bill does.
    ``experts``: (ep > 1, etp ≠ tp, capacity factor ≠ 1, recompute modules, fused expert SwiGLU).
    ``sp``: False, True (Megatron-Core's sequence parallelism) or ``"gathered"`` (DTensor's: the linear
    layers keep the all-gathered input, ``Layout.sp_inputs``)."""
    ep, etp, capacity, modules, fused = experts
    own = schedule not in ("none", "1f1b", "interleaved")
    # a schedule beyond Megatron's on 2 stages, 8 micro-batches (DualPipe's asserts: m ≥ 2p, even): its in-flight
    # count, which the m letters replace (_stage_strategy)
    return Layout(sp=bool(sp), sp_inputs="gathered" if sp == "gathered" else "sharded", recompute=recompute,
                  dtype=dtype, pp=1 if schedule == "none" else 2, schedule=schedule if own else "",
                  global_batch=8 if own else 0,
                  interleave=2 if schedule in ("interleaved", "zb-v", "dualpipev") else 1, cp=2 if cp else 1,
                  tp=2 if sp else 1,
                  ep=2 if ep else 1, etp=3 if etp else 0, moe_capacity=2 if capacity else 1,  # e_t ≠ t (t ≤ 2)
                  recompute_modules=modules, fused_swiglu=fused, fp8_activations=fp8_activations,
                  first_stage_layers=1 if uneven else 0)


def _stage_strategy(sp: bool, recompute: str, dtype: str, schedule: str, cp: bool, stage: str,
                    experts: tuple = (False, False, False, (), False), fp8_activations: bool = False,
                    uneven: bool = False, matmuls=None):
    """The bill's strategy of ``stage`` with the chunks in flight as a letter (m first, m_last last,
    m_mid middle), so one expression serves every m and p (``Layout.in_flight`` gives the values); with
    uneven stages its layers are L_1 (first), L_m (middle) or L_p (last). ``matmuls``: the model's,
    which torchtitan's per-op policy (``op-sac``, solve's fixed layout) counts."""
    from ..core.dims import m
    strategy = _representative(sp, recompute, dtype, schedule, cp, experts, fp8_activations,
                               uneven).strategy(stage, matmuls)
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
    strategy = _stage_strategy(sp, recompute, dtype, schedule, cp, "first", experts, fp8_activations, uneven,
                               _inventories(structure)[2])
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

    from ..core.dims import c
    from ..ledgers import peak, states
    from ..models.architectures import output

    param_inv, base, matmuls = _inventories(structure)
    ways = c if cp else Integer(1)
    recipe = states.RECIPES[optimizer]
    gathered = peak.gathered_weights(param_inv, Rational(recipe.working_bytes(dtype)), zero)
    from ..ledgers.transients import all_to_all_staging
    staging = (all_to_all_staging(bool(sp), cp, experts[2], fp8_activations)
               if structure.arch == "moe" and experts[0] else [])
    out = []
    for stage in _verdict_stages(schedule, uneven):
        ways = schedule_ways(stage, uneven, schedule)
        blocks = _state_blocks(recipe, zero, cp, structure, experts[0], experts[1], ways)
        temporary = (Add(*_state_blocks(states.FP32_TEMPORARY, zero, cp, structure, experts[0], experts[1],
                                        ways).values())
                     if optimizer_impl == "foreach" else Integer(0))
        if uneven:  # whole bytes per block, as the bill's verdict and the timeline
            blocks = {name: ceiling(expr) for name, expr in blocks.items()}
            temporary = ceiling(temporary)
        strategy = replace(_stage_strategy(sp, recompute, dtype, schedule, cp, stage, experts, fp8_activations, uneven,
                                           matmuls), loss=structure.loss)  # the loss kernel rides in the structure
        output_saved = strategy.shard(output.saved_tensors(norm=structure.output_norm, loss=strategy.loss))
        for instant in peak.stage_instants(stage, strategy, base, output_saved, blocks, temporary, staging,
                                           has_loss=holds_loss(schedule, stage), gathered=gathered):
            out.append((f"{stage} stage, {instant.phase}" if schedule != "none" else instant.phase, instant.total))
    return tuple(out)


def _verdict_stages(schedule: str, uneven: bool) -> tuple[str, ...]:
    """The stages whose instants the verdict takes the largest of, as the bill's (``bill.derive``): the
    first and the last, and with uneven stages the middle one (rank 1, L_m layers, m_mid in flight)."""
    if schedule == "none":
        return ("first",)
    return ("first", "middle", "last") if uneven else ("first", "last")


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


#: Calls a group's numpy function runs as a program before it is compiled: a fresh plan calls most of them once or
#: twice — groups that differ in a choice their formulas do not read share one (DeepSeek-V3 on 2048 GPUs: 87 of its
#: 171 functions called exactly twice, 71 once) — and compiling one costs ~3 runs of its program, so compiled at
#: the second call (as before issue 45) they took 0.96 s of a 3.1 s plan and were never used again. From the
#: third call on (a process that plans again: the API, a notebook, a sweep in blocks) the compiled form serves.
COMPILE_AFTER = 2


def _compiled_on_reuse(program, texts: tuple, common: tuple):
    """``program`` (the formulas run step by step) for its first :data:`COMPILE_AFTER` calls — a fresh ``plan``
    evaluates each group's once, where compiling cost more than running — and from then on, in a process that
    plans again (the API, a notebook, a sweep in blocks), the same formulas compiled
    (:func:`symbolic.core.expressions.compile_array_formulas`: the same guarded reader writing the arithmetic
    it accepted as Python), as fast as before. Both give the same doubles (``tests/test_formula_programs.py``).
    ``evaluate_all.compiled`` says which form serves now."""
    from ..core.expressions import FormulaError, compile_array_formulas

    current = [program, 0]

    def evaluate_all(env):
        if current[1] == COMPILE_AFTER:
            try:
                current[0] = compile_array_formulas(texts, common)
                evaluate_all.compiled = True
            except FormulaError:  # too deep to compile: the program serves on
                pass
        current[1] += 1
        return current[0](env)

    evaluate_all.names = program.names
    evaluate_all.compiled = False
    return evaluate_all


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
                                                  self.ep, self.etp, self.uneven,
                                                  *(("dualpipe",) if self.schedule == "dualpipe" else ())),
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

    from ..core.dims import c, e, e_t, t
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
        ways = schedule_ways(stage, group.uneven, group.schedule)
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
                                           experts, group.fp8_activations, group.uneven, matmuls), loss=structure.loss,
                           output_weight_grad=not group.lora)  # LoRA freezes the output layer
        output_saved = strategy.shard(output.saved_tensors(norm=structure.output_norm, loss=strategy.loss,
                                                           weight_grad=strategy.output_weight_grad))
        for instant in peak.stage_instants(stage, strategy, saved, output_saved, blocks, temporary, staging,
                                           has_loss=holds_loss(group.schedule, stage), gathered=gathered,
                                           activation_offload=group.activation_offload):
            candidates.append((f"{stage} stage, {instant.phase}" if group.schedule != "none" else instant.phase,
                               instant.total))
    strategy = _stage_strategy(group.sp, group.recompute, group.dtype, group.schedule, group.cp, "first", experts,
                               group.fp8_activations, group.uneven, matmuls)
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
