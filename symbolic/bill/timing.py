"""The step time of one bill: the communication ledger and the time model at one layout.

``symbolic.ledgers.time`` prices arrays of layouts; this module gives it the
bill's model and layout — the same inventories (:func:`symbolic.bill.derive.inventories`),
the same recompute-as-the-FLOPs-see-it, the same Ψ (hand-filled or counted).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from ..layout.layout import Layout
from ..ledgers.hardware import Hardware
from ..ledgers.time import CommClass, ComputeLine, Overlap, StepTime, TimeDerivation, derive_time, price
from ..models.config import ModelConfig
from ..models.structure import Structure
from .evaluate import layout_structure


@lru_cache(maxsize=None)
def time_derivation(model_structure: Structure, sp: bool, recompute: str, zero: int, pipeline: bool,
                    interleaved: bool, context_parallel: bool, optimizer: str, dtype: str,
                    expert_parallel: bool = False, lora: tuple = ()) -> TimeDerivation:
    """The time model's expressions for a model structure and the layout's discrete choices.
    ``lora``: (targets, base dtype) of a LoRA run (:func:`lora_time`), empty for full training."""
    from ..models.architectures import output
    from .derive import (architecture_inventories, fused_backward_recompute, recompute_for_flops, structure_loss,
                         structure_output_norm)

    parameters, saved, matmuls = architecture_inventories(model_structure)
    # LoRA freezes the output layer: Liger's loss keeps no weight gradient (output.loss_saved)
    output_saved = output.saved_tensors(norm=structure_output_norm(model_structure), loss=structure_loss(model_structure),
                                        weight_grad=not lora)
    return derive_time(parameters, saved, matmuls, sp=sp, recompute=recompute,
                       flops_recompute=recompute_for_flops(recompute, saved), zero=zero, pipeline=pipeline,
                       interleaved=interleaved, context_parallel=context_parallel, optimizer=optimizer,
                       dtype=dtype, tied=model_structure.tied,
                       fused_backward=fused_backward_recompute(saved, matmuls), expert_parallel=expert_parallel,
                       output_saved=output_saved, lora=lora_time(parameters, *lora) if lora else None)


#: Bytes per packed element of a quantised base (bitsandbytes): NF4 two per byte, LLM.int8 one; the
#: quantisation constants' read (QLoRA's 0.127 bits/param, 3% of NF4's) is not counted in the pass.
PACKED_BYTES = {"nf4": (1, 2), "int8": (1, 1)}


def lora_time(parameters, targets: str, base_dtype: str):
    """:class:`LoraTime` of a LoRA run on the ``parameters`` inventory: the adapters of
    ``states.weight_matrices(parameters, targets)`` (r(d_in + d_out) each, every layer) and their
    forward FLOPs (``derive.lora_forward_flops``), a quantised base's packed weight matrices."""
    from sympy import Add, Rational

    from ..core.dims import L, b, h, r, s
    from ..ledgers import states
    from ..ledgers.time import LoraTime
    from .derive import lora_forward_flops

    adapted = states.weight_matrices(parameters, targets)
    trainable = L * Add(*(states.matrices_of(term) * r * (term.shape[-2] + term.shape[-1]) for term in adapted))
    forward = Add(*(flops for _, flops in lora_forward_flops(parameters, targets)))
    packed = PACKED_BYTES.get(base_dtype)
    return LoraTime(trainable, forward, 2 * b * s * h * r, base_dtype,
                    Rational(*packed) if packed else None,
                    L * Add(*(term.count for term in states.weight_matrices(parameters))) if packed else 0)


def _key(model: ModelConfig, layout: Layout) -> tuple:
    return (layout_structure(model, layout), layout.sp, layout.recompute, layout.zero, layout.pp > 1, layout.interleave > 1,
            layout.cp > 1, layout.optimizer, layout.dtype, layout.ep > 1,
            (layout.lora_targets, layout.base_dtype) if layout.lora else ())


def derivation_for(model: ModelConfig, layout: Layout) -> TimeDerivation:
    return time_derivation(*_key(model, layout))


@dataclass(frozen=True)
class StoredTime:
    """A :class:`TimeDerivation` as text (``sympy.sstr``), as the bill's derivation is cached:
    evaluated with Fractions, it prices a bill without importing sympy."""

    compute: tuple          #: (name, attention_core, kernel)
    formulas: tuple         #: the texts of :meth:`TimeDerivation.expressions`, in order
    comm: tuple             #: (key, group, collective, phase, overlap, names)

    @classmethod
    def of(cls, derivation: TimeDerivation) -> "StoredTime":
        from .derive import sstr  # the bill's printer, memoised per subexpression
        return cls(tuple((x.name, x.attention_core, x.kernel) for x in derivation.compute),
                   tuple(sstr(x) for x in derivation.expressions()),
                   tuple((x.key, x.group, x.collective, x.phase, x.overlap, list(x.names)) for x in derivation.comm))

    def to_json(self) -> str:
        return json.dumps({"compute": self.compute, "formulas": self.formulas, "comm": self.comm})

    @classmethod
    def from_json(cls, text: str) -> "StoredTime":
        data = json.loads(text)
        return cls(tuple(tuple(x) for x in data["compute"]), tuple(data["formulas"]),
                   tuple(tuple(x) for x in data["comm"]))

    def shell(self) -> TimeDerivation:
        """The derivation's structure (names, groups, rules) for :func:`price`, without the expressions."""
        compute = [ComputeLine(name, None, None, core, 0, kernel) for name, core, kernel in self.compute]
        comm = [CommClass(key, group, coll, phase, overlap, None, None, None, tuple(names))
                for key, group, coll, phase, overlap, names in self.comm]
        return TimeDerivation(compute, None, None, None, None, comm)


def stored(model: ModelConfig, layout: Layout) -> StoredTime:
    """The time derivation's text: from the bill's cache folder (an entry checked
    as the bill's are: :func:`symbolic.bill.cache.read_entry`), or derived (sympy)
    and stored there atomically."""
    return stored_for(_key(model, layout))


def stored_for(derivation_key: tuple, load=StoredTime.from_json) -> StoredTime:
    """:func:`stored` by the arguments of :func:`time_derivation` (a plan's groups share the bill's
    entries); ``load`` reads an entry's text and may refuse it (any exception: derived afresh)."""
    from .cache import entry_path, read_entry, write_entry

    model_structure, *choices = derivation_key  # the Structure as its stable tuple (the cache key of record)
    # "v": the stored shape (2: each compute line's kernel and call shape, ledgers.kernels)
    key = json.dumps({"time": [list(model_structure.key()), *choices], "v": 2}, sort_keys=True, default=list)
    path = entry_path(key, "time-")
    if path is not None and (path.exists() or path.is_symlink()):
        found = read_entry(path, key, load)
        if found is not None:
            return found
    text = StoredTime.of(time_derivation(*derivation_key))
    if path is not None:
        write_entry(path, key, text.to_json())
    return text


def letters(model: ModelConfig, layout: Layout, params_hand: int | None = None, params_count: int | None = None):
    """The dimension values of the bill, with B (sequences per iteration) and Ψ."""
    values = layout.values(model)
    values["B"] = layout.global_batch or layout.micro_batch * layout.dp
    if params_hand is not None:
        values["Psi"] = params_hand
    elif params_count is not None:
        values["Psi"] = params_count
    return values


def step_time(model: ModelConfig, layout: Layout, hardware: Hardware, *, overlap: Overlap = Overlap(),
              gpus_per_node: int | None = None, params_hand: int | None = None,
              params_count: int | None = None) -> StepTime:
    """The priced iteration of ``model`` under ``layout`` on ``hardware``, every factor kept.
    Its expressions come from :func:`stored` and are evaluated exactly (Fractions) before pricing."""
    from ..core.expressions import evaluate_formula

    if params_count is None and params_hand is None:
        from ..core.numeric import exact
        from ..ledgers import params as params_ledger
        from .derive import inventories
        params_count = int(exact(params_ledger.count(inventories(model)[0]), layout.values(model)))
    text = stored(model, layout)
    values = letters(model, layout, params_hand, params_count)
    numbers = [float(evaluate_formula(formula, values)) for formula in text.formulas]
    # The weight GEMMs at the FP8 peak when the layout trains in FP8 (Layout.gemm_dtype), else BF16:
    # --dtype is the activations' storage, not the GEMMs' precision.
    schedule = ((layout.pipeline_schedule(), layout.interleave, layout.iteration_micro_batches())
                if layout.own_schedule and layout.pp > 1 else None)
    step = price(text.shell(), numbers, values, hardware, overlap=overlap, gpus_per_node=gpus_per_node,
                 gemm_dtype=layout.gemm_dtype, detail=True, schedule=schedule)
    step.factors["not_priced"] = not_priced(layout)
    step.factors["precision"] = layout.precision
    if layout.gemm_dtype != "bf16" and not str(step.factors.get("gemm_dtype", "")).startswith("bf16"):
        moved = quantize_traffic(step)
        seconds = moved / float(step.factors["hbm_bandwidth_effective"])
        step.factors["not_priced"].append(
            f"the {layout.precision if layout.precision != 'bf16' else 'FP8'} recipe's cast/quantize kernels: at most "
            f"{moved / 1e9:.2f} GB of HBM traffic per GPU per iteration, {seconds * 1e3:.2f} ms at the memory-bound "
            "kernels' bandwidth (each FP8 GEMM's input and output gradient read in BF16 and written row- and "
            "column-wise, 4 B per element; each weight once per step, 4 B per element) — less where Transformer "
            "Engine fuses the cast into the norm or the activation (LayerNormLinear)")
    return step


#: Bytes a quantize kernel moves per element, at most: 2 B read in BF16, 1 B written row-wise and 1 B
#: column-wise (TE's cast-transpose: the FP8 copy and its transpose, or MXFP8's two directions).
QUANTIZE_BYTES_PER_ELEMENT = 4


def quantize_traffic(step) -> float:
    """HBM bytes per GPU per iteration of a low-precision recipe's cast/quantize kernels, at most, from the
    priced compute lines (GEMM (m, n, k): input m×k, output gradient m×n, weight k×n per group): every
    forward's input (recomputed ones too), every backward's output gradient once (dgrad and wgrad read the
    same), every weight once per step (TE caches it across micro-batches), each at
    :data:`QUANTIZE_BYTES_PER_ELEMENT`. Scales and amaxes not counted (a 1/32 or less of the bytes)."""
    micro_batches = float(step.factors.get("micro_batches_per_pipeline", 1.0))
    total = 0.0
    for line in step.compute_lines:
        if not line.get("low_precision"):
            continue
        groups, m, n, k = (float(x) for x in line["shape"])
        passes, call = float(line["passes"]), float(line["gemm_flops_per_call"])
        if passes <= 0 or call <= 0:
            continue
        calls = float(line["flops_on_pacing_stage"]) / call / passes      # forward calls, backward ones alike
        total += calls * groups * ((passes - 2) * m * k + m * n) * QUANTIZE_BYTES_PER_ELEMENT
        total += calls / max(micro_batches, 1.0) * groups * k * n * QUANTIZE_BYTES_PER_ELEMENT
    return total


def not_priced(layout: Layout) -> list[str]:
    """What of ``layout`` the step-time model leaves out, so a printed step time never hides it."""
    out = []
    if layout.ep > 1:
        out.append("the expert-parallel all-to-all is priced for balanced routing (each rank sends (e−1)/e of its "
                   "k·tokens rows): routing imbalance and the capacity factor's padding are not")
    if layout.precision == "fp8-blockwise":
        out.append("fp8-blockwise's GEMMs are priced at the tensorwise FP8 efficiency (mamf-finder's FP8 ceiling ratio) — "
                   "but for the grouped GEMMs' forward pass on an H800/H100, DeepGEMM's measured blockwise figure: "
                   "the per-128 scaling's cost — DeepSeek-V3 §3.3.2 promotes the partial sums to CUDA cores every "
                   "128 elements of K — is not priced apart")
    if layout.ep > 1 and layout.precision == "fp8-blockwise":
        out.append("DeepSeek-V3 dispatches its tokens to the experts in FP8 (§3.3.2: 1 B + an fp32 scale per 1×128 "
                   "tile, against bf16's 2 B): the all-to-all is priced in the activations' dtype, as Megatron-Core's "
                   "alltoall dispatcher sends it under TE's Float8BlockScaling")
    if layout.uneven_stages:
        out.append("uneven pipeline stages: the slowest stage is judged on compute alone (its collectives scale "
                   "with its layers); the gradient reduce and optimizer step are priced at Ψ/(t·p) per GPU")
    if layout.own_schedule and layout.pp > 1:
        plan = layout.pipeline_schedule()
        out.append(f"the {plan.name} schedule's bubble is its order simulated with every chunk's F, B and W equal to "
                   "the pacing stage's (uneven stages' own times not simulated), and the ranks' start skew not "
                   "counted (each stage's optimizer step runs on its own gradients)"
                   + ("; its F&B pairs run their two computations one after the other, and hide each one's "
                      "all-to-all and sends under the other's computation, the unpaired warm-up and cool-down "
                      "ops' exposed" if plan.overlaps else ""))
    if layout.moe_pad_to_capacity:
        out.append("the experts' zero-padded rows (--moe-pad-to-capacity): the step is priced on the routed "
                   "tokens' GEMMs; the bill's flops lines count the padded rows")
    if layout.lora and layout.zero == 3:
        out.append("LoRA under ZeRO-3: the frozen weights' gathers are priced as full training's (every weight "
                   "gathered), their gradient reduce-scatters too")
    if layout.offload == "optimizer-states":
        out.append("optimizer-state offload (--offload optimizer-states): the optimizer step is priced as the GPU's HBM "
                   "pass; the CPU's Adam step and the gradient shards' and updated weights' PCIe copies are not")
    elif layout.offload == "optimizer":
        out.append("ZeRO-Offload (--offload optimizer): the optimizer step is priced as the GPU's HBM pass; the "
                   "CPU's Adam step and the gradients' and updated weights' PCIe copies are not")
    elif layout.offload == "params":
        out.append("parameter offload (--offload params): the optimizer step is priced as the GPU's HBM pass; "
                   "the CPU's Adam step and every layer's weights fetched over PCIe each forward and backward are not")
    if layout.activation_offload:
        out.append("activation offload: the saved activations' copies to CPU memory and back over PCIe are not "
                   "priced (taken as hidden behind compute)")
    if layout.base_dtype != "bf16":
        out.append(f"{layout.base_dtype} base: the dequantisation pass reads the packed weights, not their "
                   "quantisation constants (QLoRA's 0.127 bits/param)")
    return out
