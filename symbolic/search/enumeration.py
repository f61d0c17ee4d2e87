"""Every valid layout of a model on N GPUs, as columns of numpy arrays (:func:`enumerate_layouts`).

t·p·d·c = N over the divisors of N (:func:`divisors`), the expert grid (e, e_t) of a mixture of experts,
micro-batch sizes, interleaving, ZeRO stages, SP and recompute policies; :meth:`Layout.is_valid` — the one
rule set every command applies — decides each discrete choice once per (c, t, p) block. What is fixed by
the caller (:data:`FIXABLE`) is held; past :data:`MAX_LAYOUTS` the sweep is refused with what to fix.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..layout.layout import Layout, stage_layers
from ..layout.stages import balanced_splits, lightest_ends
from ..models.config import ConfigError, ModelConfig, positive_int
from .formulas import RECOMPUTE_ORDER


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


def _chunks(schedule: str, stages: tuple[int, ...], pp: int) -> list[int]:
    """The chunks per rank (v) to try on ``pp`` stages holding ``stages`` layers under ``schedule``: Megatron's
    ("") 1 and every v > 1 dividing each stage's count; 1F1B, ZB-H1/H2, DualPipe 1; interleaved the v > 1; the
    V shapes (ZB-V, DualPipeV) 2 — each rank's layers in two chunks."""
    if pp == 1:
        return [1]
    interleaved = [vv for vv in divisors(math.gcd(*stages)) if vv > 1]
    if schedule == "":
        return [1] + interleaved
    if schedule == "interleaved":
        return interleaved
    if schedule in ("zb-v", "dualpipev"):
        return [2]
    return [1]


def _schedule_admits(schedule, pp: int, micro_batches: int) -> bool:
    """Whether ``schedule``'s reference code runs ``micro_batches`` per pipeline on ``pp`` stages
    (:func:`symbolic.layout.schedules.check_schedule`'s asserts on p and m)."""
    from ..layout.schedules import check_schedule
    try:
        check_schedule(schedule, pp, schedule.chunks or 1, micro_batches)
    except ConfigError:
        return False
    return True


def enumerate_layouts(model: ModelConfig, gpus: int, *, seq: int = 0, global_batch: int = 0,
                      max_micro_batch: int = 16, gpus_per_node: int = 8,
                      fixed: Mapping[str, object] | None = None,
                      moe_capacity=1, first_stage_layers: int = 0,
                      last_stage_layers: int = 0, levers: Mapping | None = None, schedule: str = "",
                      search_splits: bool | str = True) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every valid layout of ``model`` on ``gpus`` GPUs, as columns of numpy arrays.

    Micro-batch sizes: with ``global_batch``, every b with b·d dividing it;
    without, the powers of two up to ``max_micro_batch`` (one micro-batch per
    data-parallel rank per iteration, as the bill's default).
    ``first_stage_layers`` / ``last_stage_layers``: uneven stages for every
    layout (:func:`symbolic.layout.layout.stage_layers`): only the p (and v)
    they make valid are kept; column ``L_1`` holds the first stage's layers. Without them, a p that does
    not divide the layers is searched over Megatron-Core's uneven first/last stages
    (:func:`symbolic.layout.stages.balanced_splits`, ``search_splits``; ``"lightest"``: of them the one with the
    lightest first and last stages, :func:`~symbolic.layout.stages.lightest_ends`); columns ``first_layers`` and
    ``last_layers`` hold each layout's (0: Megatron's None), ``L_1``, ``L_m``, ``L_p`` its stages' layers.
    ``schedule``: the pipeline schedule of every layout with p > 1 (``layout.schedules``; "" Megatron's,
    1F1B or interleaved by v): its chunks per rank and its own asserts on m decide which layouts are kept.
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
    elif search_splits:
        rules[3] = (f"p·v divides the layers ({layers}); where p does not, Megatron-Core's uneven first/last "
                    f"stages (--decoder-first/last-pipeline-num-layers, get_num_layers_to_build: the layers left "
                    f"divide over the other stages, v divides every stage's count), "
                    + ("each split whose fullest stage holds ⌈L/p⌉ layers" if search_splits != "lightest" else
                       "of the splits whose fullest stage holds ⌈L/p⌉ layers the one with the lightest first and "
                       "last stages (p swept: --pp P searches every split of P)"))
    own = None
    if schedule:
        from ..layout.schedules import schedule_named
        own = schedule_named(schedule)
        rules[-1] = (f"schedule {schedule} on every layout with p > 1 (p = 1: no pipeline, no schedule)"
                     + (f": interleaving (v > 1) with micro-batches per pipeline a multiple of p (Megatron-LM)"
                        if schedule == "interleaved" else
                        f": {own.chunks} chunk(s) per rank" + (", v divides each stage's layers" if own.chunks > 1
                                                               else "")))
        if own.min_micro_batches or own.even_micro_batches or own.even_pp:
            rules[-1] += ("; " + ", ".join(filter(None, (
                "p even" if own.even_pp else "",
                f"m ≥ {own.min_micro_batches}·p" if own.min_micro_batches else "",
                "m even" if own.even_micro_batches else ""))) + f" ({own.source.split(' ')[0]} asserts)")
        if own.megatron:
            own = None  # Megatron's two: chunks by v, Megatron's rules (LAYOUT_RULES), no asserts of their own
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
             "ep", "etp", "L_1", "L_p", "L_m", "first_layers", "last_layers")
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
                splits = [(first_stage_layers, last_stage_layers)]
            elif layers % pp:  # Megatron-Core's uneven first/last stages, the fullest stage at ⌈L/p⌉ layers
                splits = list(balanced_splits(layers, pp)) if search_splits else []
                if splits and search_splits == "lightest":  # p swept: its split with the lightest ends
                    splits = [lightest_ends(tuple(splits), layers, pp)]
            else:
                splits = [(0, 0)]
            if not splits:
                continue
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
            whole_rounds = m_of % pp == 0  # what Megatron's interleaving (v > 1) needs of each b
            # the schedule's own asserts on m (DualPipe: m ≥ 2p and even; schedules.check_schedule), per b
            runs = own is not None and pp > 1
            schedule_ok = (np.array([_schedule_admits(own, pp, int(m)) for m in m_of], dtype=bool) if runs
                           else np.ones(micro.size, dtype=bool))
            zeros = [0] if dp * cp == 1 else ([0, 1] if pp > 1 else [0, 1, 2, 3])
            sps = [False, True] if tp > 1 and s_ % (tp * cp) == 0 else [False]
            expert_grids = _expert_grids(model, tp * dp * cp, tp, gpus_per_node, fixed)
            # The rules read a split only through its stages' counts (stage_layers with v: every stage a
            # multiple of v); the rest of a (v, ZeRO, SP, expert grid) choice's verdict is the same for every
            # split of this p, so it is decided at the first split v admits and kept for the others.
            decided: dict[int, list] = {}
            for first, last in splits:
                try:
                    stages = stage_layers(layers, pp, 1, first, last) if first or last else (layers // pp,) * pp
                except ConfigError:
                    continue
                chunks = _chunks(schedule if pp > 1 else "", stages, pp)
                valid = []  # (v, ZeRO, SP, ep, etp) the rules accept, in the loops' order
                for vv in chunks:
                    if fixed.get("interleave", vv) != vv:
                        continue
                    rounds = whole_rounds if vv > 1 and not runs else np.ones(micro.size, dtype=bool)
                    admitted = micro[rounds & schedule_ok]
                    if not admitted.size:
                        continue
                    if vv in decided:
                        valid += decided[vv]
                        continue
                    before = len(valid)
                    for zero in zeros:
                        # A fixed ZeRO stage over one data-parallel rank, or SP at t = 1, changes nothing:
                        # that layout is ZeRO-0 / no SP (layout.settle_no_ops), not refused.
                        if fixed.get("zero", zero) != zero and not (dp * cp == 1 and zero == 0):
                            continue
                        for sp, ep, etp in ((sp, ep, etp) for sp in sps for ep, etp in expert_grids):
                            if (fixed.get("sp", sp) != sp and not (tp == 1 and not sp)) or not Layout(
                                    micro_batch=int(admitted[0]), seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, interleave=vv,
                                    zero=zero, global_batch=global_batch, cp=cp, ep=ep, etp=etp,
                                    moe_capacity=moe_capacity, first_stage_layers=first, last_stage_layers=last,
                                    schedule=schedule if pp > 1 else "", **(levers or {})).is_valid(model):
                                continue
                            valid.append((vv, zero, int(sp), ep, etp or tp))
                    decided[vv] = valid[before:]
                if not valid:
                    continue
                choices = np.array(valid, dtype=np.int64)
                interleaved = (choices[None, :, 0] > 1) & (not runs)  # Megatron's interleaving: whole rounds
                keep = (~interleaved | whole_rounds[:, None]) & schedule_ok[:, None]  # (b, choice)
                b_index, c_index = np.nonzero(keep)
                b_index = np.repeat(b_index, recomputes.size)
                c_index = np.repeat(c_index, recomputes.size)
                block = np.empty((b_index.size, len(names)), dtype=np.int64)
                # L_m: a middle stage's layers, the first's where p ≤ 2 has none (plan's ARG_NAMES)
                block[:, [0, 1, 2, 9, 12, 13, 14, 15, 16]] = (tp, pp, dp, cp, stages[0], stages[-1],
                                                              stages[1 if pp > 2 else 0], first, last)
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
