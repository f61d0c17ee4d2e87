"""Model states: bytes per parameter by recipe, sharded by TP, PP and ZeRO.

Rajbhandari et al. 2019 (ZeRO, arXiv 1910.02054) §3.1: mixed-precision Adam
keeps fp16/bf16 parameters and gradients (2Ψ + 2Ψ) and K·Ψ of optimizer states
with K = 12 (fp32 master copy, momentum, variance). The recipes below list the
byte blocks; the 16, 18 and 12 bytes/param of seed 001 §3 are their sums.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sympy import Add, Expr, Integer, Mul, Rational

from ..core.dims import L, L_d, Psi, d, p, r, t
from ..core.tensors import DTYPE_BYTES
from ..layout.choices import ZERO_STAGES
from ..layout.experts import routed_expert
from ..layout.recipes import KINDS, RECIPES, Block, Recipe  # noqa: F401 (re-exported: the ledger's recipes)


def sharded_over_data(kind: str, zero: int) -> bool:
    """Whether ZeRO stage ``zero`` partitions ``kind`` over the data-parallel
    ranks: stage 1 the optimizer states, 2 also gradients, 3 also parameters
    (ZeRO §5; seed 001 §3: "只开 ZeRO-1 时只有 KΨ 被 d 除")."""
    if zero not in ZERO_STAGES:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, not {zero!r}")
    return KINDS.index(kind) >= 3 - zero


def blocks(recipe: Recipe, zero: int = 0, params: Expr = Psi,
           tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
           context_parallel: Expr = Integer(1)) -> dict[str, Expr]:
    """Bytes per GPU of each block of ``recipe``.

    First-order sharding: every tensor is split evenly t·p ways (TP splits each
    weight, PP splits the layers) and ZeRO splits its kinds d ways. Replicated
    LayerNorm/bias parameters and uneven pipeline stages are neglected.

    Context parallelism (``context_parallel`` = c) replicates the weights on
    its c ranks, so without ZeRO nothing changes; with it, the sharded kinds
    are split over the d·c ranks that hold the same weights: Megatron-LM's
    distributed optimizer and its gradient reduce run on the data-parallel
    group *with* context parallelism (``parallel_state.get_data_parallel_group(
    with_context_parallel=True)``), as DeepSpeed-Ulysses shards ZeRO over
    its sequence-parallel ranks too.
    """
    if recipe.factored:
        raise ValueError(f"{recipe.name}: its factored second moment depends on each matrix's shape, not on "
                         f"Psi alone; `symbolic bill MODEL --optimizer {recipe.name}` itemises it")
    out = {}
    for block in recipe.blocks:
        ways = tensor_parallel * pipeline_parallel
        if sharded_over_data(block.kind, zero):
            ways = ways * data_parallel * context_parallel
        out[block.name] = Rational(block.bytes) * params / ways
    return out


def per_gpu(recipe: Recipe, zero: int = 0, params: Expr = Psi,
            tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
            context_parallel: Expr = Integer(1)) -> Expr:
    """Model-state bytes per GPU: the sum of :func:`blocks`."""
    return Add(*blocks(recipe, zero, params, tensor_parallel, pipeline_parallel, data_parallel,
                       context_parallel).values())


def expert_blocks(recipe: Recipe, zero: int, expert_params: Expr, params: Expr = Psi,
                  tensor_parallel: Expr = t, pipeline_parallel: Expr = p, data_parallel: Expr = d,
                  context_parallel: Expr = Integer(1), expert_parallel: Expr = Integer(1),
                  expert_tensor_parallel: Expr = t) -> dict[str, Expr]:
    """Bytes per GPU of each block of ``recipe`` for a mixture of experts: the
    dense part and the routed experts apart, each sharded as Megatron-Core does
    (``parallel_state.initialize_model_parallel``; :mod:`symbolic.layout.experts`).

    The dense part, ``params − expert_params``: as :func:`blocks`, t·p ways,
    the kinds ZeRO shards also over d·c. The routed experts, ``expert_params``:
    e·e_t·p ways (e experts' groups, e_t their width, p the layers); the kinds
    ZeRO shards also over the expert-data-parallel group edp = t·d·c/(e·e_t)
    (the distributed optimizer's ``get_expert_data_parallel_group``) — so a
    sharded kind of the experts is t·d·c·p ways whatever e, and only the
    unsharded ones shrink with e. Condition: first order as :func:`blocks`
    (layers and widths split evenly; the dense part's replicated norms neglected).
    """
    dense = blocks(recipe, zero, params - expert_params, tensor_parallel, pipeline_parallel, data_parallel,
                   context_parallel)
    out = {f"{name} (dense part)": expr for name, expr in dense.items()}
    expert_data = tensor_parallel * data_parallel * context_parallel / (expert_parallel * expert_tensor_parallel)
    for block in recipe.blocks:
        ways = expert_parallel * expert_tensor_parallel * pipeline_parallel
        if sharded_over_data(block.kind, zero):
            ways = ways * expert_data
        out[f"{block.name} (routed experts)"] = Integer(block.bytes) * expert_params / ways
    return out


# --- memory levers: LoRA, quantised base weights, factored and 8-bit optimizers, offload --------------




LORA = "Hu et al. 2021 (LoRA, arXiv 2106.09685) §4.1"
QLORA = "Dettmers et al. 2023 (QLoRA, arXiv 2305.14314) §3"
LLM_INT8 = "Dettmers et al. 2022 (LLM.int8(), arXiv 2208.07339) §3; bitsandbytes Linear8bitLt"
ZERO_OFFLOAD = "Ren et al. 2021 (ZeRO-Offload, arXiv 2101.06840) §4"
#: ``offload="optimizer-states"``: Megatron-Core's HybridDeviceOptimizer (``--optimizer-cpu-offload``, offload fraction
#: 1.0; ``megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py`` at NVIDIA/Megatron-LM d98e8a6): the distributed
#: optimizer's bf16 parameter shards get pinned fp32 CPU copies (the master weights) stepped by CPU Adam (m, v in
#: CPU memory); the gradients stay in the GPU's DDP buffer and are copied to pinned CPU tensors for the step.
OPTIMIZER_STATES_OFFLOAD = ("optimizer states (fp32 master, Adam m, v) in CPU memory, gradients on the GPU (Megatron "
                            "HybridDeviceOptimizer); not counted: its pinned fp32 CPU copy of the gradient shard")
PARAM_OFFLOAD = "PyTorch FSDP CPUOffload(offload_params=True); Rajbhandari et al. 2021 (ZeRO-Infinity) §5"

#: Bytes per weight of a frozen base under LoRA, by ``--base-dtype``: NF4 4 bits (QLoRA §3), int8 1 B
#: (LLM.int8), bf16 as the activations' ``DTYPE_BYTES``.
BASE_DTYPE_BYTES = {"nf4": Rational(1, 2), "int8": Integer(1), "bf16": Integer(DTYPE_BYTES["bf16"])}
FP32 = DTYPE_BYTES["fp32"]

#: QLoRA §3: NF4 blocks of 64 weights, one absmax constant each; double quantisation stores those
#: constants in 8 bits, in blocks of 256 with one fp32 constant each.
NF4_BLOCK, DQ_BLOCK = 64, 256


@dataclass(frozen=True)
class StateTerm:
    """One block of model state per GPU: its bytes, kind, where it lives (``gpu`` or ``cpu``), source."""

    name: str
    bytes: Expr
    kind: str
    device: str
    source: str
    condition: str = ""


#: Layer weights that are not ``nn.Linear`` modules in transformers 5.24.0's mixture-of-experts families
#: (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3): the routed experts' fused ``gate_up_proj``/``down_proj``
#: (``*Experts``) and the router's ``weight`` (``*TopKRouter``) are ``nn.Parameter``s, so PEFT's
#: ``all-linear`` (``nn.Linear`` and ``Conv1D`` modules, the output layer excluded) adapts neither.
NOT_LINEAR_MODULES = ("layer/moe/experts_", "layer/moe/router",
                      # the hybrids' depthwise convolutions are nn.Conv1d, not adapted (LFM2, Qwen3-Next)
                      "layer/conv/conv_weight", "layer/linear_attention/conv_weight")


def _share_axes(shape) -> int:
    """How many leading entries of a layer term's shape are shares of the layers (an expression over L:
    (L − L_c)/L, L_d/L; ``parts.scaled``, ``parts._weight(share=)``), not sizes."""
    from sympy import fraction
    count = 0
    while count < len(shape) and fraction(shape[count])[1].has(L):
        count += 1
    return count


def matrices_of(term) -> Expr:
    """How many (d_in, d_out) matrices a weight term holds per layer: its leading factors — 1 for a
    matrix, the share of the layers that have it for a per-layer kind's (a hybrid's attention, (L − L_c)/L;
    a dense-first MoE model's dense MLP, L_d/L)."""
    return Mul(*term.shape[:-2])


def weight_matrices(param_inv, targets: str | None = None) -> list:
    """The layer weight matrices (2-D and more; a 3-D expert bank counts E matrices) — the ones
    a quantised base stores (``targets`` None) or LoRA adapts (``targets``: ``all-linear`` or
    ``attention``): PEFT's targets, the ``nn.Linear`` modules — not the routed experts' banks nor
    the router (:data:`NOT_LINEAR_MODULES`), which stay frozen, unadapted."""
    out = []
    for term in param_inv:
        if term.scope != "layer" or len(term.shape) - _share_axes(term.shape) < 2:
            continue  # a vector (norm weights, biases), on all layers or on a share of them
        if targets == "attention" and not term.name.startswith("layer/attention/"):
            continue
        if targets is not None and term.name.startswith(NOT_LINEAR_MODULES):
            continue  # adapters on the linear modules only: expert banks, the router and convs stay frozen
        if targets is not None and Mul(*term.shape[:-2]).has(L_d):
            # an MoE model's dense-first or shared-expert MLP (a share over L_d): PEFT 0.21's all-linear leaves
            # them unadapted on DeepSeek-V3 (its mapping targets the attention and the experts; measured per
            # rank, symbolic/per_rank.py, tests/test_per_rank.py)
            continue
        out.append(term)
    return out


def _routed(term) -> bool:
    """Whether a parameter term is a routed expert's (on the expert grid under --ep)."""
    return routed_expert(term.name)


def _factored_entries(shapes) -> Expr:
    """Adafactor's second-moment entries: rows + columns of each matrix (per leading index), a vector whole."""
    total = Integer(0)
    for shape, times in shapes:
        if len(shape) >= 2:
            total += times * Mul(*shape[:-2]) * (shape[-2] + shape[-1])
        else:
            total += times * Mul(*shape)
    return total


def state_terms(recipe: Recipe, zero: int, param_inv, *, params: Expr = Psi, context_parallel: Expr = Integer(1),
                lora: bool = False, lora_targets: str = "all-linear", base_dtype: str = "bf16",
                double_quant: bool = True, offload: str = "none",
                pipeline_parallel: Expr = p, expert_parallel: Expr | None = None,
                expert_tensor_parallel: Expr = t) -> tuple[list[StateTerm], Expr]:
    """:func:`_state_terms`, memoised: the terms depend on the recipe, the ZeRO stage, the parameters'
    inventory and the split, not on the rest of a layout, so the kinds of a loop over layouts share
    them (every argument is frozen; the list is a fresh copy each call)."""
    arguments = (recipe, zero, param_inv, params, context_parallel, lora, lora_targets, base_dtype, double_quant,
                 offload, pipeline_parallel, expert_parallel, expert_tensor_parallel)
    try:
        terms, trainable = _state_terms_memo(*arguments)
    except TypeError:  # an unhashable inventory (a plain list): computed directly
        terms, trainable = _state_terms_memo.__wrapped__(*arguments)
    return list(terms), trainable


@lru_cache(maxsize=1024, typed=True)
def _state_terms_memo(*arguments) -> tuple[tuple[StateTerm, ...], Expr]:
    (recipe, zero, param_inv, params, context_parallel, lora, lora_targets, base_dtype, double_quant, offload,
     pipeline_parallel, expert_parallel, expert_tensor_parallel) = arguments
    terms, trainable = _state_terms(recipe, zero, param_inv, params=params, context_parallel=context_parallel,
                                    lora=lora, lora_targets=lora_targets, base_dtype=base_dtype,
                                    double_quant=double_quant, offload=offload, pipeline_parallel=pipeline_parallel,
                                    expert_parallel=expert_parallel, expert_tensor_parallel=expert_tensor_parallel)
    return tuple(terms), trainable


def _state_terms(recipe: Recipe, zero: int, param_inv, *, params: Expr = Psi, context_parallel: Expr = Integer(1),
                 lora: bool = False, lora_targets: str = "all-linear", base_dtype: str = "bf16",
                 double_quant: bool = True, offload: str = "none",
                 pipeline_parallel: Expr = p, expert_parallel: Expr | None = None,
                 expert_tensor_parallel: Expr = t) -> tuple[list[StateTerm], Expr]:
    """The model-state terms per GPU of a layout and the trainable parameter count.

    Full training: the recipe's blocks over ``params`` (:func:`blocks`; Adafactor's factored block
    from the matrices' shapes). LoRA (``lora``: adapters of rank r): the base is frozen — its
    weights only, no gradients or optimizer states — stored as ``base_dtype`` (``nf4``: 4-bit
    weights plus one constant per 64, double-quantised to 8 bits with one fp32 per 256 constants;
    ``int8``: 1 B plus one fp32 scale per output row; ``bf16``: 2 B); norms, embeddings and the
    output layer stay bf16. The adapters B·A (d_in·r + r·d_out per target matrix) carry the
    recipe's blocks. Split over t·p, ZeRO's kinds over d·c, as :func:`blocks`.

    Offload: ``optimizer`` (ZeRO-Offload) moves gradients and optimizer states to CPU memory;
    ``params`` (FSDP CPU offload) moves parameters too, the GPU keeping the gathered weights of the
    running layer and of the prefetched next one (2 × a layer in bf16).

    ``pipeline_parallel``: what a stage divides the layers' parameters by — p
    for even stages, L/L_1 or L/L_p for the first or last of uneven ones
    (``bill.derive.stage_ways``; first order, as the even split).

    ``expert_parallel`` (e, with ``expert_tensor_parallel`` e_t): a mixture of experts on
    Megatron-Core's expert grid, as :func:`expert_blocks` shards it — each term is then split into
    its dense part (t·p ways, ZeRO's kinds over d·c) and its routed experts (e·e_t·p ways, ZeRO's
    kinds over edp = t·d·c/(e·e_t)). Under LoRA the experts' banks are frozen base weights (NF4,
    int8 or bf16 as the rest; no gradients, no states) and the adapters sit on the dense part's
    linear modules (:func:`weight_matrices`), so every trainable term is on the dense grid. Offload
    moves each part's offloaded kinds to CPU memory alike. None: the dense grid for every term.
    """
    ways_tp = t * pipeline_parallel
    grid = expert_parallel is not None
    if grid:
        expert_ways = expert_parallel * expert_tensor_parallel * pipeline_parallel
        expert_data = t * d * context_parallel / (expert_parallel * expert_tensor_parallel)

    def shard(kind: str, experts: bool = False) -> Expr:
        if experts:
            return expert_ways * (expert_data if sharded_over_data(kind, zero) else 1)
        return ways_tp * (d * context_parallel if sharded_over_data(kind, zero) else 1)

    def parts(count_of) -> list[tuple[str, Expr, bool]]:
        """(suffix, amount, experts?) of a quantity ``count_of(predicate)`` over parameter terms: the
        whole on the dense grid, or its dense part and routed experts on the expert grid."""
        if not grid:
            found = [("", count_of(lambda term: True), False)]
        else:
            found = [(" (dense part)", count_of(lambda term: not _routed(term)), False),
                     (" (routed experts)", count_of(_routed), True)]
        return [(suffix, amount, experts) for suffix, amount, experts in found if amount != 0]

    grid_note = ("; routed experts split e·e_t·p ways" + (", ZeRO over edp = t·d·c/(e·e_t)" if zero else "")
                 + " (Megatron-Core's expert grid)") if grid else ""

    def device(kind: str) -> str:
        if offload == "params" or (offload == "optimizer" and kind in ("gradients", "optimizer")):
            return "cpu"
        if offload == "optimizer-states" and kind == "optimizer":
            return "cpu"
        return "gpu"

    where = {"none": "", "optimizer": "; ZeRO-Offload: gradients and optimizer states in CPU memory",
             "optimizer-states": "; " + OPTIMIZER_STATES_OFFLOAD,
             "params": "; CPU offload of parameters, gradients and optimizer states"}[offload]
    out: list[StateTerm] = []
    if lora:
        adapted = weight_matrices(param_inv, lora_targets)
        adapter_shapes = [(shape, L * matrices_of(term)) for term in adapted
                          for shape in ((term.shape[-2], r), (r, term.shape[-1]))]
        trainable = Add(*(L * matrices_of(term) * r * (term.shape[-2] + term.shape[-1]) for term in adapted))
        weights = weight_matrices(param_inv)
        others = Add(*((L if term.scope == "layer" else 1) * term.count for term in param_inv
                       if term not in weights))
        # bitsandbytes quantises the nn.Linear modules only (transformers 5.24.0 replace_with_bnb_linear;
        # the 4-bit quantizer's param_needs_quantization: Linear4bit weights): the fused expert banks
        # and the router, nn.Parameters (NOT_LINEAR_MODULES), stay bf16
        quantised = weight_matrices(param_inv, "all-linear") if base_dtype != "bf16" else weights
        kept_bf16 = [term for term in weights if term not in quantised]

        def count(terms):
            return lambda keep: Add(*(L * x.count for x in terms if keep(x)))

        for suffix, frozen_weights, experts in parts(count(quantised)):
            base = []
            if base_dtype == "nf4":
                base.append(("frozen base weights (NF4, 4 bit)", BASE_DTYPE_BYTES["nf4"] * frozen_weights, QLORA,
                             "4-bit NormalFloat, blocks of 64"))
                if double_quant:
                    constants = frozen_weights * (Rational(1, NF4_BLOCK) + Rational(FP32, NF4_BLOCK * DQ_BLOCK))
                    base.append(("NF4 constants, double-quantised (8 bit per 64 + fp32 per 256·64)", constants,
                                 QLORA, "0.127 bits/param (QLoRA §3 'Double Quantization')"))
                else:
                    base.append(("NF4 constants (fp32 per 64)", frozen_weights * Rational(FP32, NF4_BLOCK), QLORA,
                                 "0.5 bits/param"))
            elif base_dtype == "int8":
                rows = Add(*(L * Mul(*x.shape[:-2]) * x.shape[-1] for x in quantised
                             if not grid or _routed(x) == experts))
                base += [("frozen base weights (int8)", BASE_DTYPE_BYTES["int8"] * frozen_weights, LLM_INT8,
                          "1 B/param"),
                         ("int8 row scales (fp32 per output row)", FP32 * rows, LLM_INT8, "vector-wise quantisation")]
            else:
                base.append(("frozen base weights (bf16)", BASE_DTYPE_BYTES["bf16"] * frozen_weights, LORA,
                             "frozen: no gradient, no states"))
            for name, expr, source, note in base:
                out.append(StateTerm(name + suffix, expr / shard("parameters", experts), "parameters",
                                     device("parameters"), source, note + where + (grid_note if experts else "")))
        for suffix, amount, experts in parts(count(kept_bf16)):
            out.append(StateTerm("frozen expert banks and router (bf16, not quantised)" + suffix,
                                 BASE_DTYPE_BYTES["bf16"] * amount / shard("parameters", experts), "parameters",
                                 device("parameters"), QLORA if base_dtype == "nf4" else LLM_INT8,
                                 "nn.Parameters, not nn.Linear modules (transformers 5.24.0 MoE families): "
                                 "bitsandbytes leaves them in bf16" + where + (grid_note if experts else "")))
        out.append(StateTerm("frozen norms, embeddings, output layer (bf16)" + (" (dense part)" if grid else ""),
                             BASE_DTYPE_BYTES["bf16"] * others / shard("parameters"), "parameters",
                             device("parameters"), LORA, "kept in bf16, frozen" + where))
        amounts = [("", trainable, adapter_shapes, False)]  # the adapters: all on the dense grid
        prefix = f"LoRA adapters ({lora_targets}, rank r): "
    else:
        trainable = params
        shapes_of = lambda keep: [(x.shape, L if x.scope == "layer" else 1) for x in param_inv if keep(x)]  # noqa: E731
        if grid:  # the dense part is Psi less the routed experts (Psi may be a hand-filled N)
            expert_count = Add(*(L * x.count for x in param_inv if _routed(x)))
            amounts = [(" (dense part)", params - expert_count, shapes_of(lambda x: not _routed(x)), False),
                       (" (routed experts)", expert_count, shapes_of(_routed), True)]
        else:
            amounts = [("", params, shapes_of(lambda x: True), False)]
        prefix = ""
    for block in recipe.blocks:
        factored = recipe.factored and "factored" in block.name
        for suffix, count, shapes, experts in amounts:
            amount = _factored_entries(shapes) if factored else count
            out.append(StateTerm(prefix + block.name + suffix, Rational(block.bytes) * amount
                                 / shard(block.kind, experts), block.kind, device(block.kind),
                                 recipe.source if not lora else f"{LORA}; {recipe.source}",
                                 recipe.condition + where + (grid_note if experts else "")))
    if offload == "params":
        # two layers (the running and the prefetched one) in the dtype they compute in: the frozen
        # base's under LoRA, else the recipe's parameter blocks (bf16 2 B, fp32 4 B, FP8 1 B); on the
        # expert grid a GPU gathers only its own experts' share of a layer
        weight_bytes = BASE_DTYPE_BYTES[base_dtype] if lora else Rational(recipe.bytes_of("parameters"))
        layer_of = lambda keep: Add(*(x.count for x in param_inv if x.scope == "layer" and keep(x)))  # noqa: E731
        gathered = Add(*(2 * weight_bytes * amount / (expert_ways if experts else ways_tp)
                         for _, amount, experts in parts(layer_of)))
        out.append(StateTerm("gathered weights of the running and the prefetched layer", gathered,
                             "parameters", "gpu", PARAM_OFFLOAD, "two layers' weights on the GPU at a time"))
    return out, trainable


def parameter_bytes(recipe: Recipe, layout) -> Expr:
    """Bytes per parameter of the weights a layer computes with: the recipe's parameter blocks, cast
    to the activations' dtype where they are wider (:meth:`Recipe.working_bytes`: FSDP's fp32
    parameters gathered in bf16), or under LoRA the frozen base's storage (NF4 ½ B, int8 1 B, bf16 2 B)."""
    if getattr(layout, "lora", 0):
        return BASE_DTYPE_BYTES[layout.base_dtype]
    return Rational(recipe.working_bytes(layout.dtype))


#: The optimizer step's fp32 temporaries as a one-block recipe: 4 B per parameter of the GPU's
#: shard, sharded as the optimizer states are (over d·c with ZeRO ≥ 1) — PyTorch's ``foreach``
#: Adam, seed 004 §02.3. :func:`symbolic.ledgers.peak.optimizer_temporary` is its dense-grid form;
#: this one also splits a mixture of experts' routed experts over the expert grid.
FP32_TEMPORARY = Recipe("fp32-step-temporary", (Block("fp32 temporaries of the optimizer step", FP32, "optimizer"),),
                        "seed 004 §02.3", "PyTorch foreach optimizer step")
