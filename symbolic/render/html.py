"""The HTML calculator: seed 001 §5's six steps as one self-contained page.

Every formula the page evaluates is generated here from the engine's sympy
expressions with sympy's JavaScript printer — the same sums ``make_bill``
evaluates — never written by hand. Each expression is printed as a numerator
and a denominator with integer coefficients, so the page evaluates both as
exact integers while they stay below 2^53 (JavaScript numbers are doubles) and
rounds their ratio half-up with integer arithmetic, as
:func:`symbolic.core.numeric.round_half_up` does. Above 2^53 (FLOPs of large steps)
it falls back to doubles and marks the number ``data-exact="false"``.

Every built-in model is on the page with the formulas of its own inventory
(the composed families' letters as page fields), and a mixture of experts takes
the expert-parallel size e, as ``bill --ep`` does.

The page's G left empty is the bill's default without a global batch (a pipeline's steady state,
``steady/G``); LoRA, QLoRA and offload (:func:`lever_formulas`, the LLaMA inventory), activation
offload and the loss kernels (``…@KERNEL``) are the bill's own terms too.

The step time (issue 23 item 5) is the bill's own ``ledgers.time.price`` run once on symbols
(:mod:`symbolic.render.page_time`, the symbolic backend of ``ledgers.arrays``): per discrete choice the
derivation's expressions (``timing.time_derivation``) are printed as functions of the page's letters
(B = b·d·G), each compute line's seconds by a function of its kernel, and the rest of ``price`` —
collectives, overlap, pacing, bubble, optimizer — by a function of the choice's collectives, both taking
the chosen GPU's figures (``page_time.HARDWARE_FIGURES``: one set of functions for every hardware file); the page sums the lines into ``price``'s four compute totals in its loop's order. A kernel
table lookup is ``nearestEfficiency(table, dims…)`` over the tables embedded as data, ``Table.nearest``'s
rule in ten lines. A choice the page does not price (``page_time.scope_text``) is said in one line.
The memory bar draws one segment per part alive at the verdict's instant (the summary's parts).

The page needs no network: its CSS, data and script are inline.
"""
from __future__ import annotations

import hashlib
import html
import json
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

from sympy import Add, Expr, Integer, Piecewise, Rational, Symbol, ceiling, factor_terms, floor, fraction, together
from sympy.printing.jscode import JavascriptCodePrinter

from ..claims.quantities import evaluate
from ..claims.sources import cite, keys, reference
from ..core.dims import (E, E_s, L, L_d, P, Psi, V, a, b, d, d_h, d_n, d_r, d_v, e, f, f_e, f_s, g, h, k, m, p,
                         r, r_kv, r_q, s, t, v, L_n, L_w, w, L_c, K_c, L_l, H_k, H_v, D_k, D_v)
from ..layout.layout import Layout, default_loss, steady_state_batch
from ..layout.choices import RECOMPUTE
from ..layout.strategies import FLOAT_ACTIVATION_DTYPES, Strategy, in_flight_formula
from ..ledgers import activations, flops, params, states
from ..models.architectures import gpt
from ..models.builtin import presets as builtin_presets
from ..models.config import ConfigError, ModelConfig
from ..models.losses import LOSS_KERNELS

#: Gradient-accumulation steps: micro-batches per data-parallel rank per
#: iteration (seed 001 §5 step 5: tokens/step = b·s·d·grad_accum). A page
#: input, not a dimension of the inventories, so it lives here.
G = Symbol("G", positive=True, integer=True)

#: Micro-batch chunks in flight on the last pipeline stage (m: on the first), page values
#: computed by the ``inflight/…`` formulas (``Layout.in_flight``'s rule).
m_last = Symbol("m_last", positive=True, integer=True)

#: The arguments of every generated function, in this order: the GPT letters, then the
#: LLaMA/MoE ones (key/value heads, experts, top-k, shared experts, expert width), then the
#: chunks in flight on the first and the last stage, then the composed layers' own letters
#: (``symbolic.models.architectures.composed``: head width, dense layers, shared-expert width,
#: MLA's ranks and head widths), a learned table's rows, and the expert-parallel size e (the
#: routed experts over e ranks, each expert's width over e_t = t: Megatron-Core's default).
ARGUMENTS = (s, b, h, a, L, V, t, p, d, f, v, Psi, G, g, E, k, E_s, f_e, m, m_last,
             d_h, L_d, f_s, r_q, r_kv, d_n, d_r, d_v, P, e, r, L_n, L_w, w, L_c, K_c, L_l, H_k, H_v, D_k, D_v)

#: The page's inputs of the model's letters beyond the GPT ones, each shown for the inventories
#: whose formulas use it (``page_archs``), with its label and the least value it takes.
MODEL_FIELDS = {"g": ("g KV heads", 1), "E": ("E experts", 1), "k": ("k experts/token", 1),
                "E_s": ("E_s shared experts", 0), "f_e": ("f_e expert FFN", 1), "d_h": ("d_h head width", 1),
                "L_d": ("L_d dense layers", 0), "f_s": ("f_s shared-expert FFN", 0), "r_q": ("r_q query rank", 1),
                "r_kv": ("r_kv KV latent rank", 1), "d_n": ("d_n Q/K width, no RoPE", 1),
                "d_r": ("d_r Q/K RoPE width", 1), "d_v": ("d_v value width", 1), "P": ("P position rows", 1),
                "L_n": ("L_n NoPE layers", 0), "L_w": ("L_w sliding-window layers", 0),
                "w": ("w window (keys)", 1), "L_c": ("L_c conv layers", 0), "K_c": ("K_c conv kernel", 1),
                "L_l": ("L_l linear-attention layers", 0), "H_k": ("H_k linear key heads", 1),
                "H_v": ("H_v linear value heads", 1), "D_k": ("D_k linear key width", 1),
                "D_v": ("D_v linear value width", 1)}

#: Activation dtypes with the same bytes: the verdict's formulas are printed once for them.
PEAK_DTYPE = {"bf16": "bf16", "fp16": "bf16", "fp32": "fp32", "fp8": "fp8"}

#: The inventories the page always has formulas for; keys of the non-GPT ones start with ``arch:``.
#: Every other model (a composed family, HF's GPT-2) gets its own by :func:`page_arch`.
PAGE_ARCHITECTURES = ("gpt", "llama", "moe")


def page_arch(model: ModelConfig) -> str:
    """The page's name of ``model``'s layer inventory: ``gpt``, ``llama`` or ``moe`` for the three
    the page always has, else ``<family>-<hash of its structure>`` (a composed recipe; HF's GPT-2
    with its gelu_new chain and n_positions table), whose formulas :func:`native_formulas` generates
    from the inventories the bill itemises for it."""
    from ..bill.derive import structure

    key = structure(model)
    if model.arch in PAGE_ARCHITECTURES and key.plain:
        return model.arch
    family = model.recipe.family if model.recipe is not None else f"{model.arch}-{model.mlp}"
    digest = hashlib.sha256(repr(structure(_symbolic_ffn(model, tied=True)).key()).encode()).hexdigest()[:8]
    return f"{family}-{digest}".replace("_", "-")


def _symbolic_ffn(model: ModelConfig, **changes) -> ModelConfig:
    """``model`` with its FFN width given (GPT's 0 means 4h), so its inventories carry the letter f
    the page sets (a GPT layer of ffn 0 would be derived at 4h, whatever the page's f)."""
    return replace(model, ffn=model.ffn or 4 * model.hidden, **changes)


def page_models(extra: tuple[ModelConfig, ...] = ()) -> dict[str, ModelConfig]:
    """One model per inventory beyond the three the page always has: the built-in models', and
    ``extra`` (the page's own model), by :func:`page_arch`."""
    out: dict[str, ModelConfig] = {}
    for model in (*builtin_presets().values(), *extra):
        arch = page_arch(model)
        if arch not in PAGE_ARCHITECTURES:
            out.setdefault(arch, model)
    return out

PIPELINES = {"none": dict(pipeline=False), "1f1b": dict(pipeline=True),
             "interleaved": dict(pipeline=True, interleaved=True)}


@dataclass(frozen=True)
class Formula:
    """One engine expression, ready for the page."""

    key: str
    expr: Expr
    source: str
    condition: str = ""

    def parts(self) -> tuple[Expr, Expr]:
        """Numerator and denominator with integer coefficients (the page
        evaluates both exactly while they stay below 2^53)."""
        num, den = _numerator_denominator(self.expr)
        for part in (num, den):
            # inside a ceiling or floor (torchtune's chunked loss: ceil(s/8)) a coefficient may be 1/2^k:
            # the double s·2^-k is exact below 2^53, so Math.ceil/Math.floor of it is the exact integer
            rounded = part.atoms(ceiling, floor)
            for inner in rounded:
                for coefficient in inner.atoms(Rational):
                    q = coefficient.q
                    if q & (q - 1):
                        raise ValueError(f"{self.key}: {coefficient} inside {inner} is not exact as a double")
            for coefficient in part.xreplace({x: Symbol("rounded") for x in rounded}).atoms(Rational):
                if not coefficient.is_Integer:
                    raise ValueError(f"{self.key}: non-integer coefficient {coefficient} in {part}")
            if part.free_symbols - set(ARGUMENTS):
                raise ValueError(f"{self.key}: {part.free_symbols - set(ARGUMENTS)} not among the page inputs")
        return num, den


@lru_cache(maxsize=None)
def _numerator_denominator(expr: Expr) -> tuple[Expr, Expr]:
    """``expr`` as (numerator, denominator), common factors pulled out (cached: a third of the
    page's expressions repeat — fp16 as bf16, the instants' terms every recompute shares)."""
    if isinstance(expr, Piecewise):  # integer-valued branches (counts, buffer sizes)
        return expr, Integer(1)
    return fraction(factor_terms(together(expr)))


@lru_cache(maxsize=None)
def _printed(expr: Expr) -> tuple[str, str]:
    """(text, text with f = 4h) of ``expr``, as the page shows its formulas (cached as above): ``sympy.sstr``'s
    text by the bill's memoised printer (each distinct subexpression printed once: the page's 740 distinct
    expressions share most of their terms across models and strategies)."""
    from ..bill.derive import sstr
    return sstr(expr), sstr(expr.subs(f, gpt.GPT_FFN)) if f in expr.free_symbols else sstr(expr)


@lru_cache(maxsize=None)
def _javascript_code(expr: Expr) -> str:
    return JavascriptCodePrinter().doprint(expr)


def activation_key(sp: bool, recompute: str, pipeline: str, dtype: str) -> str:
    return f"activations/{'sp' if sp else 'nosp'}/{recompute}/{pipeline}/{dtype}"


def activation_formulas(prefix: str, saved, source: str, experts: bool = False) -> list[Formula]:
    """The stage's activation bytes for every strategy the page offers (SP ×
    recompute × pipeline schedule × dtype), keyed ``prefix + activation_key``;
    ``experts``: the routed experts dispatched over e expert-parallel ranks."""
    out = []
    for sp in (False, True):
        for recompute in RECOMPUTE:
            for pipeline, pipe_options in PIPELINES.items():
                for dtype in FLOAT_ACTIVATION_DTYPES:
                    strategy = page_strategy(sp, recompute, pipeline, dtype, experts=experts)
                    out.append(Formula(prefix + activation_key(sp, recompute, pipeline, dtype),
                                       activations.stage(strategy, saved), source,
                                       strategy.describe() + "; transformer layers only"))
    return out


def page_strategy(sp: bool, recompute: str, pipeline: str, dtype: str, stage: str = "first",
                  experts: bool = False) -> Strategy:
    """The bill's strategy of ``stage`` with its chunks in flight as the page's m (m_last on the last stage).
    ``experts``: expert parallelism over the letter e (``Layout.strategy``'s with ep > 1; at e = 1 its
    terms are those of no expert parallelism, so one formula serves every e)."""
    in_flight = None if pipeline == "none" else (m if stage == "first" else m_last)
    return Strategy(tensor_parallel=True, sequence_parallel=sp, recompute=recompute, dtype=dtype,
                    in_flight=in_flight, stage=stage, expert_parallel=experts, **PIPELINES[pipeline])


#: The loss kernels the page offers (``--loss``), transformers' eager first (the unsuffixed keys), and
#: the verdict's terms a kernel changes: what it keeps and its work tensors (``output.saved_tensors``,
#: ``peak.layer_work_tensors``), keyed ``…/TERM@KERNEL``.
LOSS_TERMS = ("output_side", "loss_work")


def peak_formulas(prefix: str, arch: str, saved, norm: str | None = None, param_inv=None,
                  experts: bool = False, output_weight_grad: bool = True) -> list[Formula]:
    """The terms of the verdict's candidate instants (``symbolic.ledgers.peak.basis``) for every
    strategy the page offers, keyed ``prefix + peak/SP/RECOMPUTE/DTYPE/TERM`` (RECOMPUTE ``any`` for
    the terms recompute does not change: work tensors and the output side). The page composes them
    by :func:`instant_compositions`. ``output_weight_grad``: False for LoRA's keys (a frozen output
    layer: Liger's loss keeps and allocates no weight gradient, ``output.loss_saved``)."""
    from ..ledgers import peak
    from ..models.architectures import output
    from ..models.structure import Structure

    out = []
    for sp in (False, True):
        for dtype in sorted(set(PEAK_DTYPE.values())):
            by_policy = {}
            for recompute in RECOMPUTE:
                strategy = replace(page_strategy(sp, recompute, "none", dtype, experts=experts),
                                   output_weight_grad=output_weight_grad)
                # a frozen output side (LoRA) keeps neither the output layer's input nor the final norm's x·rstd
                kept = strategy.shard(output.saved_tensors(norm=norm or Structure(arch).output_norm,
                                                           weight_grad=output_weight_grad))
                by_policy[recompute] = peak.basis(strategy, saved, kept)
            for name in peak.BASIS:
                if name == "gathered_weights":
                    continue  # ZeRO-3 only: peak/gathered/BYTES, below
                exprs = {recompute: by_policy[recompute][name] for recompute in RECOMPUTE}
                policies = ["any"] if len(set(exprs.values())) == 1 else list(RECOMPUTE)
                for recompute in policies:
                    out.append(Formula(f"{prefix}peak/{'sp' if sp else 'nosp'}/{recompute}/{dtype}/{name}",
                                       exprs["none" if recompute == "any" else recompute], peak.SOURCE,
                                       f"{name.replace('_', ' ')}: one micro-batch, one layer"
                                       + (" (every recompute policy)" if recompute == "any" else "")))
            # the loss kernels (--loss): what they keep (the output side) and their work tensors; every
            # other term is the same under each kernel (checked, never assumed)
            for loss in LOSS_KERNELS[1:]:
                by_loss = {}
                for recompute in RECOMPUTE:
                    strategy = replace(page_strategy(sp, recompute, "none", dtype, experts=experts), loss=loss,
                                       output_weight_grad=output_weight_grad)
                    kept = strategy.shard(output.saved_tensors(norm=norm or Structure(arch).output_norm, loss=loss,
                                                               weight_grad=output_weight_grad))
                    by_loss[recompute] = peak.basis(strategy, saved, kept)
                for name in peak.BASIS:
                    exprs = {recompute: by_loss[recompute][name] for recompute in RECOMPUTE}
                    if name not in LOSS_TERMS:
                        if exprs != {recompute: by_policy[recompute][name] for recompute in RECOMPUTE}:
                            raise ValueError(f"{prefix}{name}: the loss kernel {loss} changes it; the page has no key")
                        continue
                    policies = ["any"] if len(set(exprs.values())) == 1 else list(RECOMPUTE)
                    for recompute in policies:
                        out.append(Formula(f"{prefix}peak/{'sp' if sp else 'nosp'}/{recompute}/{dtype}/{name}@{loss}",
                                           exprs["none" if recompute == "any" else recompute], peak.SOURCE,
                                           f"{name.replace('_', ' ')} under the {loss} loss kernel: one micro-batch"))
    param_inv = param_inv if param_inv is not None else architecture_inventories_for_page(arch, saved)
    # the copy ZeRO-3 gathers: each recipe's working bytes under each activation dtype (Recipe.working_bytes)
    for size in sorted({recipe.working_bytes(dtype) for recipe in page_recipes().values() for dtype in FLOAT_ACTIVATION_DTYPES}):
        out.append(Formula(f"{prefix}peak/gathered/{size}", peak.gathered_weights(param_inv, Integer(size), 3),
                           peak.SOURCE, f"ZeRO-3: the largest weight matrix gathered and one prefetched, {size} B each"))
    return out


def architecture_inventories_for_page(arch: str, saved):
    """The parameter inventory the page's formulas use for ``arch`` (GPT: FFN width f)."""
    if arch == "gpt":
        return gpt.parameters(ffn=f)
    from ..bill.derive import architecture_inventories
    from ..models.structure import Structure
    return architecture_inventories(Structure(arch, True, True, "rope", True))[0]


def instant_compositions(activation_offload: bool = False) -> dict[str, list[dict]]:
    """For each pipeline schedule, the candidate instants as data: (stage, phase, [(multiplicity
    formula key, term)]) — ``symbolic.ledgers.peak.compositions`` with the page's m (m_last);
    ``activation_offload``: the saved tensors in CPU memory, a two-layer double buffer on the GPU."""
    from ..ledgers import peak

    out = {}
    for pipeline in PIPELINES:
        rows = []
        # the page's stages are even (it has no first/last-stage counts): every middle stage holds the
        # first's L/p layers with fewer in flight, so the first and the last are the verdict's (bill.derive)
        for stage in ("first",) if pipeline == "none" else ("first", "last"):
            for phase, composition in peak.compositions(_K, _N, pipeline == "none" or stage == "last",
                                                        activation_offload):
                rows.append({"stage": stage, "phase": phase if pipeline == "none" else f"{stage} stage, {phase}",
                             "terms": [[_multiplicity_key(pipeline, stage, multiplicity), name]
                                       for multiplicity, name in composition]})
        out[pipeline] = rows
    return out


#: The chunks in flight (k) and layers per chunk (n) as letters, so each composition's multiplicity
#: is read off as an expression: 1, k·n or k·n − 1.
_K, _N = Symbol("k_chunks", positive=True), Symbol("n_layers", positive=True)


def _multiplicity_key(pipeline: str, stage: str, multiplicity: Expr) -> str | None:
    """The formula key of a composition's multiplicity: None for 1, else k·n or k·n − 1 of the stage;
    any other multiplicity has no formula on the page and is refused, not guessed."""
    if multiplicity == 1:
        return None
    if multiplicity == 2:  # activation offload's double buffer: two layers' saved tensors
        return "peakcount/double"
    for name, expr in (("held", _K * _N), ("held-1", _K * _N - 1)):
        if (multiplicity - expr).expand() == 0:
            return f"peakcount/{pipeline}/{stage}/{name}"
    raise ValueError(f"the calculator has no formula for the multiplicity {multiplicity} of a verdict instant")


def multiplicity_formulas() -> list[Formula]:
    """k·n and k·n − 1 for each schedule and stage: chunks in flight × layers per chunk."""
    out = []
    for pipeline in PIPELINES:
        for stage in ("first",) if pipeline == "none" else ("first", "last"):
            in_flight, layers = page_strategy(False, "none", pipeline, "bf16", stage).layers_held()
            for kind, expr in (("held", in_flight * layers), ("held-1", in_flight * layers - 1)):
                out.append(Formula(f"peakcount/{pipeline}/{stage}/{kind}", expr, "symbolic.ledgers.peak.compositions",
                                   f"{stage} stage: chunks in flight × layers per chunk" + (" − 1" if kind == "held-1" else "")))
    return out


def verdict_formulas() -> list[Formula]:
    """What every instant adds or the optimizer step holds: the communication buffers
    (``CommSettings``, a communicator per group wider than one) and the optimizer step's temporaries."""
    from sympy import Gt, Piecewise

    from ..ledgers import peak
    from ..ledgers.transients import CommSettings

    settings = CommSettings()
    staging = Integer(settings.nccl_buffsize * settings.channels)
    comm = Integer(0)
    for size in (t, d, p):
        comm += Piecewise((staging, Gt(size, 1)), (Integer(0), True))
    comm += Piecewise((Integer(settings.bucket_bytes), Gt(d, 1)), (Integer(0), True))
    out = multiplicity_formulas()
    out += [Formula("comm", comm, "seed 004 §02.4, §05.4 (NCCL_BUFFSIZE × channels; DDP bucket)",
                   "NCCL staging 4 MiB × 16 channels per group wider than one (TP, DP, PP); one 25 MiB bucket")]
    for sharded in (False, True):
        out.append(Formula(f"peak/optimizer/{int(sharded)}", peak.optimizer_temporary(1 if sharded else 0),
                           peak.SOURCE, "optimizer step: one fp32 temporary per parameter of the shard"))
    out.append(Formula("peakcount/double", Integer(2), "seed 004 §05.2 (activation offload)",
                       "activation offload: a double buffer of two layers' saved tensors stays on the GPU"))
    # the bill's G without --global-batch (layout.steady_state_batch): m = p with a pipeline, else 1
    out.append(Formula("steady/G", Piecewise((p, Gt(p, 1)), (Integer(1), True)),
                       "symbolic.layout.layout.steady_state_batch; Korthikanti et al. 2022 §4.2.3",
                       "without a global batch: a pipeline in its steady state, m = p micro-batches; else 1"))
    for stage in ("first", "last"):
        out.append(Formula(f"inflight/{stage}", in_flight_formula(G, stage), "symbolic.layout.layout.in_flight",
                           f"micro-batch chunks in flight on the {stage} stage (m = G per iteration)"))
    return out


def page_recipes() -> dict:
    """The recipes the page offers: those with per-parameter bytes (a factored optimizer needs the
    parameters' shapes: ``symbolic bill`` itemises it)."""
    return {name: recipe for name, recipe in states.RECIPES.items() if not recipe.factored}


def formulas(models: dict[str, ModelConfig] | None = None) -> list[Formula]:
    """Every expression the page evaluates, keyed as the page selects them.

    Parameters, model states, activations and FLOPs come from the ledgers over
    the GPT inventories with the FFN width ``f`` (the page sets f = 4h unless
    given), exactly as :func:`symbolic.bill.derive.make_bill` builds them; then the
    LLaMA and MoE inventories', and those of ``models`` (:func:`page_models`, the
    built-in models' by default), keyed ``arch:`` + the GPT key.
    """
    models = page_models() if models is None else models
    # this process's lists by the models' repr (the page's cold build and a test reading them all build
    # them once; a copy returned, the frozen Formulas shared)
    key = tuple((arch, repr(model)) for arch, model in models.items())
    if key not in _FORMULA_LISTS:
        _FORMULA_LISTS[key] = _formulas(models)
    return list(_FORMULA_LISTS[key])


_FORMULA_LISTS: dict = {}


def _formulas(models: dict[str, ModelConfig]) -> list[Formula]:
    out: list[Formula] = []
    for tied in (True, False):
        for positions in ("learned", "rope"):
            inventory = gpt.parameters(ffn=f, tied=tied, positions=positions)
            out.append(Formula(f"params/{'tied' if tied else 'untied'}/{positions}", params.count(inventory),
                               gpt.MEGATRON_PARAMS, "every parameter tensor of the inventory, layers × L"))
            if tied:
                out.append(Formula(f"params_eq2/{positions}", params.count(inventory, params.eq2_scopes()),
                                   gpt.MEGATRON_PARAMS, "Megatron Eq 2: layers + embedding, no final LayerNorm"))
    for name, recipe in page_recipes().items():
        for zero in states.ZERO_STAGES:
            out.append(Formula(f"states/{name}/{zero}", states.per_gpu(recipe, zero), recipe.source,
                               f"{recipe.condition}; {recipe.tally} B/param; ZeRO-{zero}; "
                               "even split over t·p (first order)"))
    out += activation_formulas("", gpt.saved_tensors(ffn=f), gpt.KORTHIKANTI)
    out += peak_formulas("", "gpt", gpt.saved_tensors(ffn=f))
    out += verdict_formulas()
    matmuls = gpt.matmuls(ffn=f)
    micro_batches = d * G
    for recompute in RECOMPUTE:
        out.append(Formula(f"flops/hardware/{recompute}", flops.hardware_training(recompute, matmuls) * micro_batches,
                           gpt.NARAYANAN, "hardware FLOPs per iteration: forward (1×) + backward "
                           "(2×: input and weight gradients)"
                           + ("" if recompute == "none" else f" + {recompute} recompute") + ", d·G micro-batches"))
    out.append(Formula("flops/model", flops.model_training(matmuls) * micro_batches, gpt.NARAYANAN,
                       "model FLOPs per iteration: forward + backward, no recompute"))
    tokens = b * s * micro_batches
    out.append(Formula("tokens", tokens, "seed 001 §5 step 5", "tokens/step = b·s·d·G"))
    kaplan_n = params.non_embedding_weights(gpt.parameters(ffn=f))
    out.append(Formula("flops/kaplan", evaluate("flops.per_param_per_token") * kaplan_n * tokens,
                       "Kaplan et al. 2020 §2.1", "6N·tokens: N without embeddings, short context, no recompute"))
    for arch in PAGE_ARCHITECTURES[1:]:
        out += native_formulas(arch)
    out += lever_formulas(LEVER_ARCH)
    for arch, model in models.items():
        out += native_formulas(arch, model)
    return out


def native_formulas(arch: str, model: ModelConfig | None = None) -> list[Formula]:
    """The LLaMA or MoE formulas — or, with ``model``, those of its own inventory (a composed
    family, HF's GPT-2) — keyed ``arch:`` + the GPT key, from the inventories
    :func:`symbolic.bill.derive.make_bill` itemises (the LLaMA/MoE ones with RoPE and the MoE's
    shared experts as the symbol E_s, 0 for none; a model's at its positions), with the fused
    attention kernel's backward recompute in the hardware FLOPs and, for a mixture of experts,
    N_active (``ARCH:params_active/...``)."""
    from ..bill.derive import (active_parameters, architecture_inventories, fused_backward_recompute,
                               inventories, output_norm, recompute_for_flops)
    from ..models.architectures import ARCHITECTURES, composed
    from ..models.structure import Structure

    positions = "rope" if model is None else model.positions
    experts = arch == "moe" if model is None else bool(model.experts)
    out: list[Formula] = []
    for tied in (True, False):
        if model is None:
            param_inv, saved, matmuls = architecture_inventories(Structure(arch, True, tied, "rope", True))
            active = ARCHITECTURES["moe"].parameters(tied=tied, active=True) if experts else None
        else:
            param_inv, saved, matmuls = inventories(_symbolic_ffn(model, tied=tied))
            active = active_parameters(_symbolic_ffn(model, tied=tied))
        if tied:
            tied_params = param_inv
        source = param_inv.terms[0].source
        out.append(Formula(f"{arch}:params/{'tied' if tied else 'untied'}/{positions}", params.count(param_inv),
                           source, "every parameter tensor of the inventory, layers × L"
                           + ("; N_total: every expert" if experts else "")))
        if tied:
            out.append(Formula(f"{arch}:params_eq2/{positions}", params.count(param_inv, params.eq2_scopes()), source,
                               "Megatron Eq 2 scopes: layers + word embedding"))
        if active is not None:
            out.append(Formula(f"{arch}:params_active/{'tied' if tied else 'untied'}/{positions}",
                               params.count(active), source, "N_active: the k experts a token goes through"))
    out += activation_formulas(f"{arch}:", saved, saved.terms[0].source, experts)
    if model is None:
        out += peak_formulas(f"{arch}:", arch, saved, experts=experts)
    else:
        out += peak_formulas(f"{arch}:", arch, saved, output_norm(model), tied_params, experts)
    if experts:
        out += expert_grid_formulas(arch, tied_params)
    micro_batches = d * G
    fused = fused_backward_recompute(saved, matmuls)
    mm_source = matmuls.terms[0].source
    for recompute in RECOMPUTE:
        out.append(Formula(f"{arch}:flops/hardware/{recompute}",
                           (flops.hardware_training(recompute_for_flops(recompute, saved), matmuls) + fused)
                           * micro_batches, mm_source,
                           "hardware FLOPs per iteration: forward (1×) + backward (2×: input and weight gradients)"
                           + ("" if recompute_for_flops(recompute, saved) == "none" else f" + {recompute} recompute")
                           + " + the fused attention kernel's Q·Kᵀ recompute, d·G micro-batches"))
    out.append(Formula(f"{arch}:flops/model", flops.model_training(matmuls) * micro_batches, mm_source,
                       "model FLOPs per iteration: forward + backward, no recompute"))
    # the named quantity reads a model's own layer under its registered name (composed.register)
    named = arch if model is None else (composed.register(model) if model.recipe is not None else None)
    kaplan = (evaluate("flops.kaplan_training_per_token", arch=named, context=False) if named is not None
              else flops.per_token(flops.model_training(type(matmuls)(
                  tuple(mm for mm in matmuls if mm.weight and mm.scope == "layer")))))
    out.append(Formula(f"{arch}:flops/kaplan", kaplan * b * s * micro_batches,
                       "Kaplan et al. 2020 §2.1", "6N·tokens: N the weights a token multiplies by"
                       + (" (N_active)" if experts else "") + ", no embeddings, short context"))
    return out


#: The inventory the page prices LoRA, QLoRA and offload for (``bill --lora/--base-dtype/--offload``):
#: the LLaMA layer (RMSNorm, GQA, SwiGLU, fused attention; RoPE). Any other refuses them on the page.
LEVER_ARCH = "llama"
#: The page's base storage choices: (``--base-dtype``, ``--double-quant``).
LORA_BASES = {"bf16": ("bf16", True), "int8": ("int8", True), "nf4": ("nf4", True), "nf4-nodq": ("nf4", False)}
#: The weights the page's adapters adapt (``--lora-targets``' default, QLoRA's).
LORA_TARGETS_PAGE = "all-linear"


def lever_formulas(arch: str) -> list[Formula]:
    """The bill's lever terms for ``arch``'s inventory, keyed ``arch:`` (``bill.derive.derive`` with
    ``--lora`` r, ``--base-dtype``, ``--offload``, ``--activation-offload``):

    - ``lora/base/TIED/BASE/ZERO/OFFLOAD``: the frozen base on the GPU (``states.state_terms``'
      terms that are not adapters; with ``--offload params`` the two gathered layers);
    - ``lora/adapters/RECIPE/ZERO/OFFLOAD``: the adapters' recipe blocks on the GPU;
    - ``offload/states/RECIPE/ZERO/OFFLOAD``: full training with offload, the GPU's state terms;
    - ``lora/trainable``, ``lora/peak/optimizer/0|1``: the adapters' count and the optimizer step's
      fp32 temporaries over them;
    - ``lora/`` + the activation and verdict-term keys: the saved tensors with the adapters' A·x
      (``derive.lora_saved``), ``lora/peak/gathered/BASE`` ZeRO-3's gathered frozen weights;
    - ``lora/flops/hardware/RECOMPUTE``, ``lora/flops/model``: frozen weights skip their weight
      gradients, the adapters' matmuls train (``derive.lora_forward_flops``)."""
    from ..bill.derive import (architecture_inventories, fused_backward_recompute, lora_forward_flops, lora_saved,
                               recompute_for_flops)
    from ..layout.choices import OFFLOAD
    from ..ledgers import peak
    from ..models.structure import Structure

    lora = Layout(lora=1, lora_targets=LORA_TARGETS_PAGE)  # lora_saved reads the two fields; the rank is the letter r
    out: list[Formula] = []
    for tied in (True, False):
        param_inv, saved, matmuls = architecture_inventories(Structure(arch, True, tied, "rope", True))
        for base, (dtype, double_quant) in LORA_BASES.items():
            for zero in states.ZERO_STAGES:
                for offload in OFFLOAD:
                    terms, _ = states.state_terms(states.RECIPES["bf16-adam"], zero, param_inv, lora=True,
                                                  lora_targets=LORA_TARGETS_PAGE, base_dtype=dtype,
                                                  double_quant=double_quant, offload=offload)
                    frozen = [x for x in terms if x.device == "gpu" and not x.name.startswith("LoRA adapters")]
                    out.append(Formula(f"{arch}:lora/base/{'tied' if tied else 'untied'}/{base}/{zero}/{offload}",
                                       Add(*(x.bytes for x in frozen)), states.LORA,
                                       "; ".join(dict.fromkeys(f"{x.name}: {x.condition}" for x in frozen))
                                       or "the frozen base in CPU memory"))
    # the rest does not depend on the tied embedding: the adapters are on the layers' matrices
    param_inv, saved, matmuls = architecture_inventories(Structure(arch, True, True, "rope", True))
    for name, recipe in page_recipes().items():
        for zero in states.ZERO_STAGES:
            for offload in OFFLOAD:
                terms, trainable = states.state_terms(recipe, zero, param_inv, lora=True, lora_targets=LORA_TARGETS_PAGE,
                                                      offload=offload)
                adapters = [x for x in terms if x.device == "gpu" and x.name.startswith("LoRA adapters")]
                out.append(Formula(f"{arch}:lora/adapters/{name}/{zero}/{offload}", Add(*(x.bytes for x in adapters)),
                                   f"{states.LORA}; {recipe.source}",
                                   f"LoRA adapters ({LORA_TARGETS_PAGE}, rank r): {recipe.tally} B/param; ZeRO-{zero}"
                                   + ("" if offload == "none" else f"; offload {offload}: the rest in CPU memory")))
                if offload == "none":
                    continue
                full, _ = states.state_terms(recipe, zero, param_inv, offload=offload)
                out.append(Formula(f"{arch}:offload/states/{name}/{zero}/{offload}",
                                   Add(*(x.bytes for x in full if x.device == "gpu")),
                                   states.PARAM_OFFLOAD if offload == "params" else states.ZERO_OFFLOAD,
                                   f"{recipe.tally} B/param; ZeRO-{zero}; offload {offload}: on the GPU "
                                   + ", ".join(x.name for x in full if x.device == "gpu")))
    out.append(Formula(f"{arch}:lora/trainable", trainable, states.LORA,
                       f"the adapters B·A of rank r on every {LORA_TARGETS_PAGE} matrix, L layers"))
    for sharded in (False, True):
        out.append(Formula(f"{arch}:lora/peak/optimizer/{int(sharded)}",
                           peak.optimizer_temporary(1 if sharded else 0, trainable=trainable), peak.SOURCE,
                           "optimizer step: one fp32 temporary per adapter parameter of the shard"))
    adapted = lora_saved(saved, param_inv, lora)
    out += activation_formulas(f"{arch}:lora/", adapted, states.LORA)
    out += [item for item in peak_formulas(f"{arch}:lora/", arch, adapted, param_inv=param_inv,
                                           output_weight_grad=False)  # LoRA freezes the output layer
            if "/peak/gathered/" not in item.key]
    for base, (dtype, _) in LORA_BASES.items():
        out.append(Formula(f"{arch}:lora/peak/gathered/{base}",
                           peak.gathered_weights(param_inv, states.BASE_DTYPE_BYTES[dtype], 3), peak.SOURCE,
                           f"ZeRO-3: the largest frozen weight matrix gathered and one prefetched ({dtype})"))
    micro_batches = d * G
    weights = type(matmuls)(tuple(mm for mm in matmuls if mm.weight))
    adapter_forward = Add(*(forward for _, forward in lora_forward_flops(param_inv, LORA_TARGETS_PAGE)))
    fused = fused_backward_recompute(adapted, matmuls)
    for recompute in RECOMPUTE:
        policy = recompute_for_flops(recompute, adapted)
        redo = adapter_forward if policy == "full" else 0
        out.append(Formula(f"{arch}:lora/flops/hardware/{recompute}",
                           (flops.hardware_training(policy, matmuls) - flops.forward(weights) + 3 * adapter_forward
                            + redo + fused) * micro_batches, states.LORA,
                           "LoRA: frozen weights forward + input gradient; the adapters forward + both gradients"
                           + (" + full recompute" if redo else "") + "; fused attention's Q·Kᵀ recompute; d·G micro-batches"))
    out.append(Formula(f"{arch}:lora/flops/model",
                       (flops.model_training(matmuls) - flops.forward(weights) + 3 * adapter_forward) * micro_batches,
                       states.LORA, "model FLOPs: frozen weights forward + input gradient, the adapters 3× forward"))
    return out


def expert_grid_formulas(arch: str, param_inv) -> list[Formula]:
    """What a mixture of experts holds on Megatron-Core's expert grid, keyed ``arch:``: the model
    states with the routed experts split e·e_t·p ways (e_t = t), ZeRO over edp = t·d/(e·e_t) = d/e
    (``states.expert_blocks``, as the bill's ``model_state_blocks``); the optimizer step's fp32
    temporaries the same way; and the communication buffers with the expert-parallel all-to-all's
    staging and the expert grid's communicators (``transients.communication_buffers``). At e = 1
    each equals the dense grid's formula."""
    from sympy import And, Gt, Piecewise

    from ..bill.derive import routed_expert_parameters
    from ..layout.experts import MEGATRON
    from ..ledgers import peak
    from ..ledgers.transients import CommSettings, all_to_all_staging

    routed = routed_expert_parameters(param_inv)
    out = []
    for name, recipe in page_recipes().items():
        for zero in states.ZERO_STAGES:
            blocks = states.expert_blocks(recipe, zero, routed, Psi, expert_parallel=e)
            out.append(Formula(f"{arch}:states/{name}/{zero}", Add(*blocks.values()), recipe.source,
                               f"{recipe.condition}; {recipe.tally} B/param; ZeRO-{zero}; dense part over t·p, "
                               f"routed experts over e·t·p (ZeRO over edp = d/e); {MEGATRON}"))
    for sharded in (False, True):
        temporaries = states.expert_blocks(states.FP32_TEMPORARY, 1 if sharded else 0, routed, Psi, expert_parallel=e)
        out.append(Formula(f"{arch}:peak/optimizer/{int(sharded)}", Add(*temporaries.values()), peak.SOURCE,
                           "optimizer step: one fp32 temporary per parameter of the shard (expert grid)"))
    settings = CommSettings()
    staging = Integer(settings.nccl_buffsize * settings.channels)
    dense = next(item.expr for item in verdict_formulas() if item.key == "comm")
    # Megatron-Core's expert grid (layout.experts.expert_groups): the expert-parallel group (e > 1) and the
    # expert-data-parallel one, edp = t·d/(e·e_t) = d/e with e_t = t, where it differs from d (e > 1)
    # and is wider than one (d > e)
    groups = (Piecewise((staging, Gt(e, 1)), (Integer(0), True))
              + Piecewise((staging, And(Gt(e, 1), Gt(d, e))), (Integer(0), True)))
    for sp in (False, True):
        all_to_all = Add(*(size for _, size in all_to_all_staging(sequence_parallel=sp)))
        out.append(Formula(f"{arch}:comm/{'sp' if sp else 'nosp'}",
                           dense + groups + Piecewise((all_to_all, Gt(e, 1)), (Integer(0), True)),
                           "seed 004 §02.4, §05.4 (NCCL staging; DDP bucket; EP all-to-all staging)",
                           "NCCL staging per group wider than one (TP, DP, PP, EP, EDP); one 25 MiB bucket; "
                           "with e > 1 the all-to-all's dispatch and combine buffers, rows s·b·k" + ("/t" if sp else "")))
    return out


#: The first line of the generated ``FORMULAS`` table.
JAVASCRIPT_HEAD = "// GENERATED by symbolic.render.html from the engine's sympy expressions; do not edit.\n"


def javascript(items: list[Formula] | None = None) -> str:
    """The generated ``FORMULAS`` table: key -> {num, den, text, text4h, source,
    condition}; ``text4h`` is the expression with the GPT FFN width f = 4h. Without ``items``: the
    page's formulas over :func:`page_models` (through the cache, :func:`formula_section`)."""
    if items is None:
        return formula_section(page_models())[0]
    args = ", ".join(symbol.name for symbol in ARGUMENTS)
    entries = []
    for item in items:
        num, den = item.parts()
        text, text4h = _printed(item.expr)
        entries.append(
            f"  {json.dumps(item.key)}: {{\n"
            f"    num: function ({args}) {{ return {_javascript_code(num)}; }},\n"
            f"    den: function ({args}) {{ return {_javascript_code(den)}; }},\n"
            f"    text: {json.dumps(text)},\n"
            f"    text4h: {json.dumps(text4h)},\n"
            f"    source: {json.dumps(cite(item.source))},\n"
            f"    condition: {json.dumps(item.condition)}\n  }}")
    return (JAVASCRIPT_HEAD +
            f"const ARGUMENTS = {json.dumps([x.name for x in ARGUMENTS])};\n"
            "const FORMULAS = {\n" + ",\n".join(entries) + "\n};\n")


def formula_section(models: dict[str, ModelConfig]) -> tuple[str, dict]:
    """(:func:`javascript` of :func:`formulas` over ``models``, their :func:`formula_facts`): the page's
    sympy work (``together``/``factor_terms`` and printing of some 2,400 expressions, ~15 s of CPU), cached
    in the bill's cache folder like the page's step time — keyed by every model the formulas are generated
    from (its full ``repr``: the formulas are a function of those and of the package, whose fingerprint
    names the folder), read back only through :func:`symbolic.bill.cache.read_entry` (its fingerprint and
    hash checked) and only as text of the generated table's shape."""
    key, path = _formula_entry_path(models)
    if key in _FORMULA_SECTIONS:
        return _FORMULA_SECTIONS[key]

    def build() -> tuple[tuple[str, dict], str]:
        items = formulas(models)
        section = javascript(items), formula_facts(items)
        return section, json.dumps({"javascript": section[0], "facts": section[1]})

    from .page_time import cached_section  # one process builds it, another sharing the folder waits and reads it
    found = cached_section(path, key, _formula_entry, build)
    _FORMULA_SECTIONS[key] = found
    return found


def _formula_entry_path(models: dict[str, ModelConfig]) -> tuple:
    """:func:`formula_section`'s key over ``models`` and its entry's path in the cache folder (None: the cache off)."""
    from ..bill.cache import entry_path

    key = json.dumps({"page-formulas": {arch: repr(model) for arch, model in models.items()}, "v": 1})
    return key, entry_path(key, "page-formulas-")


def _formula_entry(text: str) -> tuple[str, dict]:
    """A stored :func:`formula_section`, checked for its shape (anything else raises: no entry)."""
    entry = json.loads(text)
    code, facts = entry["javascript"], entry["facts"]
    if not (isinstance(code, str) and code.startswith(JAVASCRIPT_HEAD) and code.endswith("\n};\n")):
        raise ValueError("not a generated FORMULAS table")
    if set(facts) != {"used", "positions", "sources"} or not all(isinstance(facts[k], dict) for k in ("used", "positions")) \
            or not all(isinstance(x, str) for x in facts["sources"]) or not all(
            isinstance(names, list) and all(isinstance(n, str) for n in names)
            for k in ("used", "positions") for names in facts[k].values()):
        raise ValueError("its facts are not the formulas' letters, positions and sources")
    return code, facts


_FORMULA_SECTIONS: dict = {}   # this process's sections by key (a page rendered twice generates its formulas once)


#: The layout a built-in model is published with, which picking it on the page sets (with its
#: size label as the hand-filled N): Korthikanti et al. 2022 Table 3 (b = 1, TP + SP, t = 8 and
#: p = 1/8/35/64 for 22B/175B/530B/1T); seed 001 §5's 7B example (b = 4, t = 8, SP). A model
#: without one opens on one GPU: nothing of the previous model's layout carries over.
REFERENCE_LAYOUTS = {
    "gpt-22b": (Layout(tp=8, sp=True), "Korthikanti et al. 2022 Table 3"),
    "gpt-175b": (Layout(tp=8, pp=8, sp=True), "Korthikanti et al. 2022 Table 3"),
    "gpt-530b": (Layout(tp=8, pp=35, sp=True), "Korthikanti et al. 2022 Table 3"),
    "gpt-1t": (Layout(tp=8, pp=64, sp=True), "Korthikanti et al. 2022 Table 3"),
    "gpt-7b": (Layout(micro_batch=4, tp=8, sp=True), "seed 001 §5, Figure 5-1"),
}
ONE_GPU = (Layout(), "no published layout: one GPU")


def _g_field(layout: Layout) -> int | str:
    """The page's G of ``layout``: empty where it is the bill's default without ``--global-batch``
    (:func:`symbolic.layout.layout.steady_state_batch`: m = p with a pipeline, one micro-batch
    without), which the page then computes as the bill does; else the micro-batches per iteration."""
    default = steady_state_batch(0, layout.pp, layout.micro_batch, layout.dp)
    return "" if layout.global_batch in (0, default) else layout.iteration_micro_batches()


def _layout_fields(layout: Layout) -> dict:
    """The page's layout fields of ``layout`` (the preset menu sets them all)."""
    return {"b": layout.micro_batch, "t": layout.tp, "p": layout.pp, "d": layout.dp, "v": layout.interleave,
            "G": _g_field(layout), "sp": layout.sp, "e": layout.ep}


def _preset_data(model: ModelConfig, layout: Layout | None = None, params_hand: int | None = None,
                 layout_source: str = "") -> dict:
    """A preset of the page: the config, and every field it implies — the
    hand-filled N (its size label) and the layout (its published one)."""
    values = model.values()
    reference, reference_source = REFERENCE_LAYOUTS.get(model.name, ONE_GPU)
    label = _count_text(params_hand) if layout is not None else (model.params_label or "")
    return {"name": model.name, "L": model.layers, "h": model.hidden, "a": model.heads, "V": model.vocab,
            "s": (layout.seq if layout is not None and layout.seq else model.seq), "f": model.ffn,
            "tied": model.tied, "positions": model.positions,
            "source": model.source, "label": model.params_label,
            "arch": page_arch(model), "g": values.get("g", model.heads), "E": model.experts,
            "k": model.experts_per_token, "E_s": model.shared_experts, "f_e": values.get("f_e", 0),
            # a composed layer's own letters (d_h, L_d, f_s, MLA's), a learned table's rows (P)
            **{letter: values[letter] for letter in MODEL_FIELDS if letter not in ("g", "E", "k", "E_s", "f_e")
               and letter in values},
            "approximations": list(getattr(model, "approximations", ())),
            # the loss kernel the bill assumes for it (layout.default_loss), or the page's own layout's
            # the loss at t = 1 (the page follows the bill's default_loss as t changes)
            "loss_usual": default_loss(model),
            "N": label, "layout": {**_layout_fields(layout if layout is not None else reference),
                                   "loss": layout.loss if layout is not None else default_loss(model, reference.tp)},
            "layout_source": layout_source or reference_source}


#: What the page's inventory menu says of the three inventories it always has.
ARCH_TITLES = {"gpt": "GPT (LayerNorm, MHA, GeLU MLP, dropout)",
               "llama": "LLaMA (RMSNorm, GQA, SwiGLU, fused attention)",
               "moe": "MoE (LLaMA attention, routed SwiGLU experts)"}


def formula_facts(items: list[Formula]) -> dict:
    """What the page's data reads off its formulas: per inventory, the letters its formulas use and the
    positions it has parameter formulas for (both sorted), and every formula's source, in order, once
    (JSON-ready: :func:`formula_section` caches it beside the generated ``FORMULAS``)."""
    used: dict[str, set] = {}
    positions: dict[str, set] = {}
    for item in items:
        arch, _, rest = item.key.rpartition(":") if ":" in item.key else ("gpt", "", item.key)
        used.setdefault(arch, set()).update(x.name for x in item.expr.free_symbols)
        if rest.startswith("params/"):
            positions.setdefault(arch, set()).add(rest.rsplit("/", 1)[1])
    return {"used": {arch: sorted(names) for arch, names in used.items()},
            "positions": {arch: sorted(names) for arch, names in positions.items()},
            "sources": list(dict.fromkeys(item.source for item in items))}


def page_archs(items: list[Formula] | dict, models: dict[str, ModelConfig]) -> dict[str, dict]:
    """The page's inventories: for each, its menu title, the model fields its formulas use
    (:data:`MODEL_FIELDS`, read off their free symbols), the positions it has formulas for,
    whether its heads have their own width (no h/a rule) and whether it routes experts.
    ``items``: the formulas, or their :func:`formula_facts`."""
    from ..bill.derive import structure_has_experts
    from ..bill.evaluate import structure

    facts = items if isinstance(items, dict) else formula_facts(items)
    used, positions = facts["used"], facts["positions"]
    out = {}
    for arch in (*PAGE_ARCHITECTURES, *models):
        model = models.get(arch)
        if model is None:
            title = ARCH_TITLES[arch]
        else:
            title = (f"{model.recipe.family} composed layer, as {model.name}" if model.recipe is not None
                     else f"HF {model.arch.upper()} layer ({model.mlp}, learned table of P rows), as {model.name}")
        fields = [name for name in MODEL_FIELDS if name in used.get(arch, ())]
        out[arch] = {"title": title, "fields": fields, "positions": sorted(positions.get(arch, ())),
                     "own_width": "d_h" in fields or "d_v" in fields,
                     "experts": arch == "moe" or (model is not None and structure_has_experts(structure(model)))}
    return out


def page_data(model: ModelConfig, layout: Layout, params_hand: int | None, gpu_memory: int | None,
              items: list[Formula] | dict | None = None) -> dict:
    """The page's defaults and choices (no formulas: those are in ``FORMULAS``, ``items``: the
    formulas or their :func:`formula_facts`)."""
    from ..ledgers import peak as peak_terms
    from .summary import PART_NAMES

    models = page_models((model,))
    facts = items if isinstance(items, dict) else formula_facts(formulas(models) if items is None else items)
    # Every built-in model (its approximations, if any, listed next to it), and the page's own model.
    presets = {name: _preset_data(m) for name, m in builtin_presets().items()}
    # The page's own model opens on the layout and N it was written with; picking it again restores them.
    presets[model.name] = _preset_data(model, layout, params_hand, "the layout this page was written with")
    cited = dict.fromkeys(key for source in facts["sources"] for key in keys(source))
    cited.update(dict.fromkeys(keys("seed 001")))
    return {
        "presets": presets,
        "archs": page_archs(facts, models),
        "fields": {name: {"label": label, "min": least} for name, (label, least) in MODEL_FIELDS.items()},
        "references": [reference(key) for key in cited],
        "instants": instant_compositions(),
        "instants_offloaded": instant_compositions(activation_offload=True),
        "lever_arch": LEVER_ARCH, "losses": list(LOSS_KERNELS), "lora_bases": {name: {"bytes": str(states.BASE_DTYPE_BYTES[dtype])}
                                                 for name, (dtype, _) in LORA_BASES.items()},
        "peak_dtype": PEAK_DTYPE,
        # the class of each verdict term and the words every output names them by (the one breakdown)
        "peak_classes": dict(peak_terms.BASIS), "part_names": dict(PART_NAMES),
        "recipes": {name: {"tally": r.tally, "bytes": str(r.bytes_per_param), "condition": r.condition,
                             "source": r.source, "param_bytes": r.bytes_of("parameters"),
                             "working_bytes": {dtype: r.working_bytes(dtype) for dtype in FLOAT_ACTIVATION_DTYPES}}
                    for name, r in page_recipes().items()},
        "defaults": {**_preset_data(model), "model": model.name, "b": layout.micro_batch,
                     "s": layout.seq or model.seq, "t": layout.tp, "p": layout.pp, "d": layout.dp,
                     "sp": layout.sp, "v": layout.interleave, "G": _g_field(layout), "e": layout.ep,
                     "recompute": layout.recompute, "zero": layout.zero, "optimizer": layout.optimizer,
                     "dtype": layout.dtype, "N": _count_text(params_hand),
                     "gpu": _memory_text(gpu_memory), "loss": layout.loss, "lora": layout.lora, "base_dtype": layout.base_dtype,
                     "double_quant": layout.double_quant, "offload": layout.offload,
                     "activation_offload": layout.activation_offload},
    }


def _count_text(count: int | None) -> str:
    """7000000000 -> '7B', 46700000000 -> '46.7B', as a user types them; else digits."""
    if count is None:
        return ""
    for suffix, size in (("T", 10**12), ("B", 10**9), ("M", 10**6)):
        scaled = Decimal(count) / size
        if scaled >= 1 and scaled == scaled.quantize(Decimal("0.001")):
            return f"{scaled.normalize():f}{suffix}"
    return str(count)


def _memory_text(gpu_memory: int | None) -> str:
    if gpu_memory is None:
        return ""
    for unit, size in (("GiB", 2**30), ("GB", 10**9)):
        if gpu_memory % size == 0:
            return f"{gpu_memory // size}{unit}"
    return f"{gpu_memory}B"


#: The step time's pipeline schedules (:data:`PIPELINES`' names): (pipeline, interleaved).
SCHEDULES = {"none": (False, False), "1f1b": (True, False), "interleaved": (True, True)}


def time_structures(models: dict) -> dict:
    """(page inventory, tied, positions, loss) → the :class:`Structure` its step time is derived on: the
    GPT inventory with the letter f (the page sets f = 4h when empty) at either positions, the LLaMA and
    MoE inventories (RoPE; the MoE's shared experts the letter E_s) and each model of ``models`` (its own
    positions), tied and untied; the eager loss (GPT: and Megatron's vocab-parallel)."""
    from dataclasses import replace

    from ..bill.derive import structure
    from ..models.structure import Structure

    out = {}
    for tied in (True, False):
        for positions in ("learned", "rope"):
            for loss in ("eager", "vocab-parallel"):
                out[("gpt", tied, positions, loss)] = Structure("gpt", True, tied, positions, loss=loss)
        for arch in ("llama", "moe"):
            out[(arch, tied, "rope", "eager")] = Structure(arch, True, tied, "rope", True)
        for arch, model in models.items():
            out[(arch, tied, model.positions, "eager")] = replace(structure(_symbolic_ffn(model, tied=tied)),
                                                               loss="eager")
    return out


def time_combos(models: dict, opening=None) -> dict:
    """:func:`combo_key` → (the arguments of ``time_derivation``, the GEMM dtype) for every discrete time
    choice the page prices: each structure of :func:`time_structures` × SP × recompute × ZeRO × pipeline
    schedule (ZeRO-2/3 with a pipeline is refused by the layout rules) × expert parallelism (a mixture of
    experts) at ``page_time.TIME_OPTIMIZERS`` × ``TIME_DTYPES``, LoRA on the LLaMA inventory
    (``TIME_LORA_BASES``); ``opening`` (inventory, tied, positions, loss, optimizer, dtype) adds the
    page's own opening choices."""
    from itertools import product

    from ..layout.layout import Layout
    from ..layout.choices import RECOMPUTE
    from .page_time import TIME_DTYPES, TIME_LORA_BASES, TIME_OPTIMIZERS, combo_key

    structures = time_structures(models)
    choices = [(key, optimizer, dtype) for key in structures for optimizer in TIME_OPTIMIZERS for dtype in TIME_DTYPES]
    if opening is not None:
        arch, tied, positions, loss, optimizer, dtype = opening
        key = (arch, tied, positions, loss)
        if key not in structures:
            from dataclasses import replace
            base = structures.get((arch, tied, positions, "eager"))
            if base is not None:
                structures[key] = replace(base, loss=loss)
        if key in structures:
            choices.append((key, optimizer, dtype))
    out = {}
    for (arch, tied, positions, loss), optimizer, dtype in dict.fromkeys(choices):
        structure = structures[(arch, tied, positions, loss)]
        gemm = Layout(optimizer=optimizer, dtype=dtype).gemm_dtype
        bases = ("",) + (TIME_LORA_BASES if arch == LEVER_ARCH else ())
        for sp, recompute, zero, schedule, ep, base in product(
                (False, True), RECOMPUTE, (0, 1, 2, 3), SCHEDULES, (False, True) if structure.has_experts else (False,),
                bases):
            pipeline, interleaved = SCHEDULES[schedule]
            if zero >= 2 and pipeline:
                continue
            lora = (LORA_TARGETS_PAGE, base) if base else ()
            out[combo_key(arch, tied, positions, loss, sp, recompute, zero, schedule, optimizer, dtype, ep, base)] = (
                (structure, sp, recompute, zero, pipeline, interleaved, False, optimizer, dtype, ep, lora), gemm)
    return out


def render(model: ModelConfig, layout: Layout = Layout(), params_hand: int | None = None,
           gpu_memory: int | None = None, hardware: str = "a100-80gb") -> str:
    """The calculator page, defaults from ``model`` and ``layout``.

    The page evaluates the GPT, LLaMA and MoE inventories and those of every built-in
    model and of ``model`` (a composed family, HF's GPT-2: :func:`page_models`), as
    :func:`symbolic.bill.derive.make_bill` does. A model with approximations (a feature
    its inventory leaves out) opens with them listed next to its name.
    """
    layout.validate(model)
    from . import page_time

    models = page_models((model,))
    opening = (page_arch(model), model.tied, model.positions, layout.loss, layout.optimizer, layout.dtype)

    def time_part() -> str:
        return page_time.time_section(time_combos(models, opening), ARGUMENTS, b * d * G)

    # The two sections are independent: where another process is building the formulas now (a cold cache
    # shared by the suite's two workers), price the step time first rather than wait for it.
    time_code = time_part() if page_time.being_built(_formula_entry_path(models)[1]) else None
    formulas_js, facts = formula_section(models)
    template = (Path(__file__).with_name("calculator.html")).read_text(encoding="utf-8")
    # "</" inside a <script> would end it early; JSON allows the escaped form.
    page = page_data(model, layout, params_hand, gpu_memory, facts)
    page["defaults"]["hardware"] = hardware
    data = json.dumps(page, ensure_ascii=False).replace("</", "<\\/")
    time_js = ((time_code if time_code is not None else time_part())
               + f"TIME.scope = {json.dumps(page_time.scope_text())};\n"
               + f"TIME.not_priced = {json.dumps(page_time.not_priced_lines(), ensure_ascii=False)};\n")
    return (template
            .replace("/*@FORMULAS@*/", formulas_js)
            .replace("/*@DATA@*/", f"const DATA = {data};")
            .replace("/*@TIME@*/", time_js)
            .replace("@TITLE@", html.escape(f"symbolic calculator: {model.name}")))
