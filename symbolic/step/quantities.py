"""Named quantities of memory over a step (seed 004), registered in
:data:`symbolic.core.registry.REGISTRY` for the claims and renderers.

Loaded with every other quantity by :mod:`symbolic.claims.quantities`.
"""
from __future__ import annotations

from sympy import Expr, Integer, Rational, cancel

from ..core.registry import quantity, select_terms
from ..layout.strategies import Strategy
from ..ledgers import activations, states
from ..models.architectures import ARCHITECTURES
from .optimizations import _fp8_recipe, context_parallel
from .timeline import FP8_TILE, all_to_all_staging, flash_attention

#: PCIe transfer rate per lane (GT/s) by generation, and the line code
#: (payload bits per transferred bits) from Gen3 on: 128b/130b.
PCIE_GT_PER_LANE = {3: 8, 4: 16, 5: 32, 6: 64}
PCIE_ENCODING = Rational(128, 130)

#: NCCL's low-latency protocols carry data and flags in the same word:
#: LL sends 4 B of data with a 4 B flag in each 8 B; LL128 120 B of data in
#: each 128 B line (NCCL's ``NCCL_PROTO`` documentation and source,
#: ``src/include/device.h``: NCCL_LL_LINES_PER_THREAD, NCCL_LL128_DATAELEMS
#: = 15 of 16 8-byte elements per thread).
NCCL_PROTOCOL_PAYLOAD = {"LL": Rational(4, 8), "LL128": Rational(120, 128), "Simple": Integer(1)}


@quantity("activations.per_layer_flash", "B")
def _per_layer_flash(arch="gpt", select=None, **strategy) -> Expr:
    """Bytes one GPU saves for one layer under FlashAttention: the (b, a, s, s)
    tensors are gone, the fp32 log-sum-exp (b, a, s) is saved instead."""
    inventory = Strategy(**strategy).apply(flash_attention(ARCHITECTURES[arch].saved_tensors()))
    return activations.total_bytes(select_terms(inventory, select))


@quantity("activations.context_parallel_ratio", "1")
def _cp_ratio(arch="gpt", ways=2, batch_follows=True, **strategy) -> Expr:
    """Per-GPU activations of one layer under context parallelism over
    ``ways`` ranks, over those without it. ``batch_follows``: the global batch
    is fixed, so the ranks taken from data parallelism raise the local batch
    by ``ways`` and the extra micro-batches run concurrently (seed 004 §06.2);
    ``False``: they run one after another (gradient accumulation)."""
    from ..core.dims import b
    inventory = Strategy(**strategy).apply(ARCHITECTURES[arch].saved_tensors())
    base = activations.total_bytes(inventory)
    cp = activations.total_bytes(context_parallel(inventory, Integer(ways)))
    if batch_follows:
        cp = cp.xreplace({b: ways * b})
    return cancel(cp / base)


@quantity("link.pcie_bandwidth", "B")
def _pcie(generation=5, lanes=16, encoding=False) -> Expr:
    """One-direction PCIe bandwidth in bytes/s: GT/s per lane × lanes / 8,
    times 128/130 when ``encoding`` (the line code's payload share)."""
    if generation not in PCIE_GT_PER_LANE:
        raise ValueError(f"PCIe generation must be one of {sorted(PCIE_GT_PER_LANE)}")
    rate = Integer(PCIE_GT_PER_LANE[generation]) * 10**9 * lanes / 8
    return rate * PCIE_ENCODING if encoding else rate


@quantity("nccl.protocol_efficiency", "1")
def _nccl(protocol="LL") -> Expr:
    """Payload share of an NCCL protocol's transfers (LL, LL128, Simple)."""
    if protocol not in NCCL_PROTOCOL_PAYLOAD:
        raise ValueError(f"protocol must be one of {', '.join(NCCL_PROTOCOL_PAYLOAD)}")
    return NCCL_PROTOCOL_PAYLOAD[protocol]


@quantity("states.recipe_bytes_per_param", "B")
def _recipe_bytes(recipe="bf16-adam", fp8_weights=False, fp8_optimizer=False, kind=None, block=None) -> Expr:
    """Bytes per parameter of a recipe after the FP8 optimisations (seed 004
    §05.1); ``kind`` or ``block`` (a block-name prefix) narrows it."""
    if recipe not in states.RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; known: {', '.join(states.RECIPES)}")
    r = states.RECIPES[recipe]
    if fp8_weights or fp8_optimizer:
        r = _fp8_recipe(r, fp8_weights, fp8_optimizer)
    blocks = [x for x in r.blocks if (kind is None or x.kind == kind) and (block is None or x.name.startswith(block))]
    return Integer(sum(x.bytes for x in blocks))


@quantity("communication.ep_all_to_all_staging", "B")
def _ep_staging(buffer="dispatch send", sequence_parallel=False, context_parallel=False, capacity=False,
                fp8=False, fp8_tile=FP8_TILE) -> Expr:
    """Bytes of one of the expert-parallel all-to-all's staging buffers per GPU
    (``buffer``: dispatch send/receive, combine send/receive; seed 004 §05.4):
    :func:`symbolic.step.timeline.all_to_all_staging`; ``all`` sums the four."""
    staged = all_to_all_staging(sequence_parallel, context_parallel, capacity, fp8, fp8_tile)
    if buffer == "all":
        return sum((size for _, size in staged), Integer(0))
    matches = [size for name, size in staged if f", {buffer} (" in name]
    if len(matches) != 1:
        raise ValueError("buffer must be one of dispatch send, dispatch receive, combine send, combine receive, all")
    return matches[0]


#: PyTorch's default cuBLAS workspace per handle (``aten/src/ATen/cuda/CublasHandlePool.cpp``,
#: ``parseChosenWorkspaceSize``: ":4096:2:16:8 default, 32MiB for Hopper and Blackwell" — two 4096 KiB
#: and eight 16 KiB chunks, or 4096 KiB × 8 when the compute capability's major is 9, 10 or 12; torch
#: 2.3-2.6 gave 32 MiB to sm_90 only). A CUBLAS_WORKSPACE_CONFIG ":SIZE:COUNT[:SIZE:COUNT]" replaces it.
TORCH_CUBLAS_DEFAULT = {"pre-hopper": ((4096, 2), (16, 8)), "hopper-blackwell": ((4096, 8),)}
#: GPU generations by compute-capability major, as that source tests them.
CUBLAS_GENERATION = {7: "pre-hopper", 8: "pre-hopper", 9: "hopper-blackwell", 10: "hopper-blackwell",
                     12: "hopper-blackwell"}


def _workspace_bytes(chunks) -> Integer:
    return Integer(sum(size * 1024 * count for size, count in chunks))


@quantity("torch.cublas_workspace", "B")
def _cublas_workspace(major=9, config=None) -> Expr:
    """Bytes of one cuBLAS handle's workspace under PyTorch: its default for
    compute capability ``major`` (V100/A100: 7/8 → 8,519,680 B; H100/H200: 9,
    B200: 10 → 32 MiB), or the ``config`` string's ":SIZE_KiB:COUNT" pairs."""
    if config is not None:
        import re
        pairs = re.findall(r":(\d+):(\d+)", str(config))
        if not pairs:
            raise ValueError(f"CUBLAS_WORKSPACE_CONFIG {config!r} has no :SIZE:COUNT pair")
        return _workspace_bytes((int(size), int(count)) for size, count in pairs)
    if major not in CUBLAS_GENERATION:
        raise ValueError(f"compute capability major must be one of {sorted(CUBLAS_GENERATION)}")
    return _workspace_bytes(TORCH_CUBLAS_DEFAULT[CUBLAS_GENERATION[major]])


@quantity("nccl.buffsize_default", "B")
def _nccl_buffsize() -> Expr:
    """The timeline's NCCL_BUFFSIZE (``CommSettings.nccl_buffsize``): NCCL's
    documented default for the Simple protocol, 4 MiB per channel."""
    from .timeline import CommSettings
    return Integer(CommSettings().nccl_buffsize)


# --- a built-in model under a layout (seed 004's DeepSeek-V3 budget) --------------------------------

def _model_and_layout(model: str, layout: dict):
    from ..layout.layout import Layout
    from ..models.builtin import presets
    if model not in presets():
        raise ValueError(f"unknown built-in model {model!r}")
    return presets()[model], Layout(**layout).validate(presets()[model])


@quantity("model.params", "1")
def _model_params(model="deepseek-v3") -> Expr:
    """A built-in model's parameter count, from its inventory (``bill --json`` ``params``)."""
    from ..bill.derive import inventories
    from ..core.numeric import exact
    from ..ledgers.params import count
    built = _model_and_layout(model, {})[0]
    return exact(count(inventories(built)[0]), built.values())


@quantity("model.quantity_at", "1")
def _model_quantity_at(model="deepseek-v3", quantity_name="", options=None, at=None) -> Expr:
    """Quantity ``quantity_name`` (with ``options``) at a built-in model's own dimensions (its h, k, E,
    f_e, L, ... from ``ModelConfig.values``) and at ``at`` (the layout's letters: s, b, t, e, ...; given first, so
    ``at``'s s replaces the model's, its position table)."""
    from ..core.numeric import substitute
    from ..core.registry import REGISTRY
    built = _model_and_layout(model, {})[0]
    if quantity_name not in REGISTRY:
        raise ValueError(f"unknown quantity {quantity_name!r}")
    expr = REGISTRY[quantity_name].fn(**(options or {}))
    # the layout's letters first: the model's own s is its position table, not the training sequence
    return substitute(substitute(expr, {k: Integer(v) for k, v in (at or {}).items()}), built.values())


@quantity("bill.total", "B")
def _bill_total(model="deepseek-v3", key="total_bytes", **layout) -> Expr:
    """One total of a built-in model's bill under the layout whose fields are the other options
    (``Layout``'s: pp, interleave, ep, dp, seq, global_batch, zero, optimizer, recompute,
    pipeline_layout, ...): ``total_bytes`` (the verdict), ``model_states_bytes``, ``activation_bytes``,
    ``paper_total_bytes``, ``peak_first_stage_bytes``, ``peak_last_stage_bytes``, ``params_per_gpu``."""
    from fractions import Fraction

    from sympy import Rational

    from ..bill.derive import make_bill
    built, lay = _model_and_layout(model, layout)
    totals = make_bill(built, lay).totals
    if key not in totals or not isinstance(totals[key], (int, Fraction)):
        raise ValueError(f"bill total {key!r} is not a number of the bill")
    value = Fraction(totals[key])
    return Rational(value.numerator, value.denominator)


@quantity("bill.state_kinds", "B")
def _bill_state_kinds(model="deepseek-v3", kinds=("parameters", "gradients"), stage="busiest", **layout) -> Expr:
    """Model-state bytes per GPU of the recipe's blocks of ``kinds`` (``parameters``, ``gradients``,
    ``optimizer``) on pipeline ``stage`` (``first``, ``last``, a rank 0 … p−1 where the stages are
    accounted by their own layers — a per-chunk layout, or DeepSeek's placed dense layers — or
    ``busiest``: the stage whose whole model states are the largest) — the bill's model-state lines of
    those kinds, each block in whole bytes as the verdict counts it."""
    from sympy import ceiling

    from ..bill.derive import inventories, model_state_blocks
    from ..core.numeric import exact
    from ..ledgers import params as params_ledger
    from ..ledgers import states as states_ledger
    built, lay = _model_and_layout(model, layout)
    recipe = states_ledger.RECIPES[lay.optimizer]
    param_inv = inventories(built)[0]
    values = dict(lay.values(built), Psi=exact(params_ledger.count(param_inv), built.values()))

    def on(stage_name, wanted):
        sub = states_ledger.Recipe(recipe.name, tuple(b for b in recipe.blocks if b.kind in wanted), recipe.source,
                                   recipe.condition)
        blocks = model_state_blocks(built, lay, param_inv, sub, stage=stage_name) if sub.blocks else {}
        return sum((exact(ceiling(size) if lay.uneven_stages else size, values) for size in blocks.values()),
                   Integer(0))
    from ..layout.stages import exact_stages
    by_layers = lay.pp > 1 and exact_stages(built, lay)
    if isinstance(stage, int) and not by_layers:
        raise ValueError(f"stage {stage}: a middle stage is counted by its own layers only with a per-chunk "
                         "layout (pipeline_layout) or a model whose dense layers are placed; give first or last")
    if stage == "busiest":
        every = ("parameters", "gradients", "optimizer")
        candidates = (tuple(range(lay.pp)) if by_layers else ("first", "middle", "last") if lay.middle_stage
                      else ("first", "last") if lay.pp > 1 else ("first",))
        stage = max(candidates, key=lambda name: on(name, every))
    return on(stage, tuple(kinds))


@quantity("timeline.peak", "B")
def _timeline_peak(model="deepseek-v3", stage="first", **layout) -> Expr:
    """The peak of the timeline of a built-in model's step on pipeline ``stage``, walked instant by
    instant (``symbolic timeline``)."""
    from .timeline import build
    built, lay = _model_and_layout(model, layout)
    return Integer(build(built, lay, stage=stage).evaluate().peak)


# --- pipeline schedules (symbolic.layout.schedules) ----------------------------------------------------------

def _time(value) -> float:
    from fractions import Fraction
    return float(Fraction(str(value)))


@quantity("pipeline.bubble", "1")
def _pipeline_bubble(schedule="1f1b", p=8, v=1, m=0, F="1", B="1", W="1") -> Expr:
    """The bubble of ``schedule``'s order on p ranks (v chunks for the interleaved schedule; m micro-batches,
    0: 6p) simulated with one chunk's forward F, input gradient B and weight gradient W (a whole backward
    B + W where the schedule does not defer W), in the times' unit (``schedules.simulate``), to 9 decimals."""
    from ..layout.schedules import simulate

    seconds = simulate(schedule, int(p), int(v), int(m) or 6 * int(p), _time(F), _time(B), _time(W))["bubble"]
    return Rational(str(round(seconds, 9)))


@quantity("pipeline.in_flight", "1")
def _pipeline_in_flight(schedule="1f1b", p=8, v=1, m=0, rank="most") -> Expr:
    """Chunk instances rank ``rank`` of ``schedule``'s order holds at its fullest (``most``: the largest
    over the ranks), a W-pending instance counted whole (``schedules.peak_in_flight``)."""
    from ..layout.schedules import peak_in_flight

    p, m = int(p), int(m) or 6 * int(p)
    ranks = range(p) if rank == "most" else (int(rank),)
    return Integer(max(peak_in_flight(schedule, p, int(v), m, r) for r in ranks))


@quantity("pipeline.parameter_copies", "1")
def _pipeline_parameter_copies(schedule="1f1b", p=8) -> Expr:
    """The layers a rank holds under ``schedule``'s placement over one pipeline stage's (the stages of
    its micro-batch path: p, the V's 2p), the most over the ranks — DualPipe's "2×" parameters per device."""
    from ..layout.schedules import SCHEDULES, chunks_of
    from ..layout.stages import chunk_ranges

    plan, p = SCHEDULES[schedule], int(p)
    stages = p * (2 if plan.placement == "v" else 1)
    v = chunks_of(plan, 2) if plan.placement == "v" else 1
    layers = stages * 4                                   # any whole number of layers per stage
    ranges = chunk_ranges(layers, p, v, placement=plan.placement)
    return Rational(max(sum(len(r) for r in chunks) for chunks in ranges), layers // stages)


@quantity("bill.tokens_per_gpu_second", "1")
def _bill_tokens_per_gpu_second(model="deepseek-v3", gpu="h800", **layout) -> Expr:
    """Tokens per second per GPU of ``symbolic bill MODEL --gpu GPU`` under the layout (``Layout``'s fields),
    the step-time model as the bill prices it (every efficiency as the hardware and kernel files state it,
    nothing fitted), rounded to whole tokens — with the framework a bill assumes for a layout only a
    distributed framework runs (``layout.frameworks.preset_or_assumed``), as the CLI and the API do."""
    from ..bill.timing import step_time
    from ..layout.frameworks import apply_preset, preset_or_assumed
    from ..ledgers.hardware import load
    from ..ledgers.time import Overlap

    fields = dict(layout)
    if "recompute_modules" in fields:
        fields["recompute_modules"] = tuple(fields["recompute_modules"])
    built, lay = _model_and_layout(model, fields)
    overlap = Overlap()
    preset, _ = preset_or_assumed(None, built, lay)
    if preset is not None:
        lay, overlap = apply_preset(lay, preset, frozenset(fields)).layout, Overlap(*preset.overlap_fields())
    step = step_time(built, lay, load(gpu), overlap=overlap)
    return Integer(round(float(step.tokens_per_second) / step.gpus))
