"""Pipeline schedules as data: which chunks a rank holds, the order it runs them in, and what follows.

Each schedule of :data:`SCHEDULES` is a :class:`Schedule` — where a rank's model chunks sit on the
micro-batch's path (``placement``), whether its backward is split into the input gradient B and the
weight gradient W (``splits_backward``), which communication it hides behind the paired micro-batch
(``overlaps``), its parameter copies, its paper's bubble — and a generator of each rank's order of
F, B and W (:func:`order`), ported from the reference code at a commit. Everything else is read from
that order by one machinery, the same for every schedule:

* **in flight** (:func:`peak_in_flight`): the (micro-batch, chunk) instances a rank holds at its
  fullest, counting a forward from its F until its memory is freed — at its B when the backward is
  whole, at its W when the schedule defers W. Zero-bubble schedules keep, between B and W, the
  tensors the weight gradient dW = dYᵀ·X needs: every linear layer's saved input X and its output
  gradient dY (Qi et al., arXiv 2401.10241 §2, Table 1: M_W < M_B); the rest (softmax outputs,
  masks, activation inputs) is freed after B. The engine counts a W-pending instance whole — an
  approximation named with its size in ``W_PENDING`` (:func:`w_pending_at_peak` counts the
  instances it applies to: none at the fullest moment of ZB-V, DualPipe and DualPipeV; ZB-H1's and
  ZB-H2's last stage);
* **bubble** (:func:`simulate`): every rank's order run against its dependencies (F after the
  previous stage's F of the micro-batch, B after the next stage's B, W after its own B) with F, B
  and W durations; the bubble is the makespan less a rank's busy time. 1F1B's and interleaved 1F1B's
  closed forms are what the time ledger keeps for them (``ledgers.time``); the simulation of their
  order reproduces them (``tests/test_schedules.py``), and the zero-bubble papers' formulas too.

Reference code read (orders ported op for op):

* 1F1B, interleaved 1F1B — Megatron-LM d98e8a6 ``megatron/core/pipeline_parallel/schedules.py``
  (:func:`schedule`);
* ZB-H1 — PyTorch 2.13 (cf30153c) ``torch/distributed/pipelining/schedules.py``
  ``ScheduleInterleavedZeroBubble`` with one stage per rank (``_get_1f1b_rank_ops`` with
  ``enable_zero_bubble``, warm-up p − 1 − r, ``num_1f1b_microbatches = r``): rank r defers its W by r
  micro-batches, so every rank holds p in flight (the paper's "same number of in-flight
  micro-batches on all stages");
* ZB-H2 — Qi et al. §2.2, Figure 3 (bottom): 2(p − 1 − r) + 1 warm-up forwards, then F B W
  (the first rank holds 2p − 1: the paper's (2p − 1)·M_B);
* ZB-V — PyTorch 2.13 ``ScheduleZBVZeroBubble._calculate_single_rank_operations`` (Qi et al. §6;
  torchtitan b5bcd76c ``torchtitan/distributed/pipeline_parallel.py`` places its stages ``style="v"``:
  rank r holds virtual stages r and 2p − 1 − r);
* DualPipe, DualPipeV — deepseek-ai/DualPipe 3da1bbe ``dualpipe/dualpipe.py`` and
  ``dualpipe/dualpipev.py`` ``step`` (steps 1–8: nF0, nF0F1, nB1W1F1, nF0B1F1B0, nB1F1B0, nB1B0,
  nWB0, nW). DualPipe: p stages, rank r holds stages r and p − 1 − r (two parameter copies, its
  README's "2×"), micro-batches fed from both ends, m/2 each way. DualPipeV: DualPipe "cut in
  half" — 2p stages in a V, rank r holds stages r and 2p − 1 − r, one parameter copy. Their
  ``_forward_backward_chunk`` runs one micro-batch's forward beside another's backward so that each
  one's expert-parallel all-to-all and pipeline sends run under the other's computation (DeepSeek-V3,
  arXiv 2412.19437 §3.2.1); :func:`paired_share` counts those steps.

Megatron-Core at d98e8a6 has none of the zero-bubble or DualPipe schedules; its
``overlap_moe_expert_parallel_comm`` (``megatron/core/pipeline_parallel/combined_1f1b.py``) pairs a
forward and a backward of the interleaved schedule for the same all-to-all hiding.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import lru_cache

from ..models.config import ConfigError

#: What a W-pending instance is counted as: whole (a named over-count of what B frees).
W_PENDING = ("an instance whose weight gradient W is deferred is counted whole until W runs; W keeps each linear "
             "layer's saved input X and its output gradient dY (no saved activation under 1F1B), B frees the rest: "
             "for a GPT layer (Korthikanti's 34sbh + 5as²b bytes) W keeps 14sbh of inputs (QKV, projection, fc1: "
             "2sbh each; fc2: 8sbh) and 18sbh of output gradients (6sbh + 2sbh + 8sbh + 2sbh), 32sbh: counted whole, "
             "a W-pending layer is 2sbh + 5as²b over (2sbh with FlashAttention), before the TP/SP split")

DUALPIPE = "deepseek-ai/DualPipe 3da1bbe"
TORCH = "PyTorch 2.13 (cf30153c) torch/distributed/pipelining/schedules.py"
ZB_PAPER = "Qi et al., Zero Bubble Pipeline Parallelism, arXiv 2401.10241"


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule, as data the engine's ledgers read.

    name: the ``--schedule`` value. chunks: model chunks per rank — 0 means the layout's
    ``interleave`` (v), else that number (the V shapes and DualPipe: 2). placement: where chunk c of
    rank r sits on a micro-batch's path — ``loop`` (Megatron: virtual stage c·p + r), ``v`` (c = 0:
    stage r, c = 1: stage 2p − 1 − r), ``dual`` (DualPipe: p stages, chunk 0 = stage r on the path
    from rank 0, chunk 1 = stage p − 1 − r on the path from rank p − 1). parameter_copies: a rank's
    parameters in units of one stage's layers (p stages of L/p layers; DualPipe 2). splits_backward:
    the backward split into B (input gradient) and W (weight gradient), W deferred. overlaps: the
    communication each paired forward-and-backward hides (``ep``: the expert all-to-all, ``pp``: the
    stage sends), none where the schedule pairs nothing. bubble: the paper's or README's bubble, in
    its notation. activation: the paper's peak activation memory. source: where the order comes from.
    min_micro_batches: the reference code's lower bound on m, as a multiple of p (0: none).
    even_micro_batches / even_pp: the reference code's asserts.
    """

    name: str
    chunks: int
    placement: str
    parameter_copies: int
    splits_backward: bool
    overlaps: tuple[str, ...]
    bubble: str
    activation: str
    source: str
    min_micro_batches: int = 0
    even_micro_batches: bool = False
    even_pp: bool = False

    @property
    def megatron(self) -> bool:
        """Whether this is one of Megatron-LM's own schedules (1F1B, interleaved), priced by their closed form."""
        return self.name in ("1f1b", "interleaved")


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("1f1b", 1, "loop", 1, False, (),
             "(p−1)(F+B+W) (Narayanan et al. 2021 §2.2.1; B+W the whole backward)", "p·M_B on the first stage",
             "Megatron-LM d98e8a6 megatron/core/pipeline_parallel/schedules.py "
             "forward_backward_pipelining_without_interleaving"),
    Schedule("interleaved", 0, "loop", 1, False, (),
             "(p−1)(F+B+W)/v (Narayanan et al. 2021 §2.2.2)",
             "(1 + (p−1)/(p·v))·p·M_B on the first stage (Korthikanti §4.2.3)",
             "Megatron-LM d98e8a6 megatron/core/pipeline_parallel/schedules.py "
             "forward_backward_pipelining_with_interleaving"),
    Schedule("zb-h1", 1, "loop", 1, True, (),
             "(p−1)(T_F+T_B−T_W) (" + ZB_PAPER + " §2.1, Table 2; DualPipe README's ZB1P (PP−1)(F+B−2W), "
             "B there the whole backward)", "p·M_B on every stage (Qi et al. Table 2)",
             TORCH + " ScheduleInterleavedZeroBubble with one stage per rank (_get_1f1b_rank_ops, "
             "enable_zero_bubble)"),
    Schedule("zb-h2", 1, "loop", 1, True, (),
             "(p−1)(T_F+T_B−2T_W), 0 when T_F+T_B ≤ 2T_W (" + ZB_PAPER + " §2.2, Table 2)",
             "(2p−1)·M_B on the first stage (Qi et al. Table 2)",
             ZB_PAPER + " §2.2, Figure 3 (bottom): 2(p−1−r)+1 warm-up forwards, then F B W"),
    Schedule("zb-v", 2, "v", 1, True, (),
             "0 when T_F = T_B = T_W (" + ZB_PAPER + " §6; sail-sg/zero-bubble-pipeline-parallelism 39f2c18 "
             "README: ZBV bubble rate 0, activation 1×, pipeline communication 2×)",
             "p·M_B on every stage (2p chunk instances of L/(2p) layers)",
             TORCH + " ScheduleZBVZeroBubble._calculate_single_rank_operations (any m: it pads to 2p − 1 "
             "micro-batches and drops the padded ones)"),
    Schedule("dualpipe", 1, "dual", 2, True, ("ep", "pp"),
             "(PP/2−1)(F&B+B−3W) (" + DUALPIPE + " README; DeepSeek-V3 arXiv 2412.19437 §3.2.1 Table 2; "
             "B the whole backward, F&B an overlapped forward-and-backward pair)",
             "(PP+1) chunk activations per device (README)",
             DUALPIPE + " dualpipe/dualpipe.py DualPipe.step (steps 1-8)",
             min_micro_batches=2, even_micro_batches=True, even_pp=True),
    Schedule("dualpipev", 2, "v", 1, True, ("ep", "pp"),
             "(PP/2−1)(F&B+B−3W) with PP = 2p stages (" + DUALPIPE + " README)",
             "(PP+1) chunk activations per device, PP = 2p stages of L/(2p) layers (README)",
             DUALPIPE + " dualpipe/dualpipev.py DualPipeV.step (steps 1-8; it and PyTorch's ScheduleDualPipeV "
             "assert m ≥ 2p)", min_micro_batches=2),
)}


def schedule_named(name: str) -> Schedule:
    """The schedule called ``name``, or :class:`ConfigError` naming the choices."""
    if name not in SCHEDULES:
        raise ConfigError(f"schedule must be one of {', '.join(SCHEDULES)}, not {name!r}")
    return SCHEDULES[name]


def check_schedule(schedule: Schedule, pp: int, interleave: int, micro_batches: int) -> None:
    """The schedule's own requirements on p, v and m, as its reference code asserts them; ConfigError names the fix."""
    name = schedule.name
    if pp == 1:
        if name not in ("1f1b",):
            raise ConfigError(f"--schedule {name} is a pipeline schedule: set --pp > 1, or drop --schedule")
        return
    if name == "1f1b" and interleave > 1:
        raise ConfigError(f"--schedule 1f1b with --interleave {interleave}: the interleaved schedule is "
                          "--schedule interleaved (or drop --interleave)")
    if name == "interleaved" and interleave == 1:
        raise ConfigError("--schedule interleaved needs model chunks per stage: set --interleave v ≥ 2 "
                          "(Megatron-LM's --num-layers-per-virtual-pipeline-stage)")
    if schedule.chunks and interleave not in (1, schedule.chunks):
        raise ConfigError(f"--schedule {name} places {schedule.chunks} chunk(s) per rank by itself: drop "
                          f"--interleave {interleave}")
    if schedule.even_pp and pp % 2:
        raise ConfigError(f"--schedule {name} needs an even pp (DualPipe.step asserts num_ranks % 2 == 0), "
                          f"not {pp}; choose --pp {pp + 1} or {pp - 1}")
    if schedule.min_micro_batches and micro_batches < schedule.min_micro_batches * pp:
        need = schedule.min_micro_batches * pp
        raise ConfigError(f"--schedule {name} needs at least {need} micro-batches per pipeline "
                          f"({schedule.min_micro_batches}·p; {schedule.source.split(' ')[0]} asserts it), not "
                          f"{micro_batches}: raise --global-batch")
    if schedule.even_micro_batches and micro_batches % 2:
        raise ConfigError(f"--schedule {name} feeds half the micro-batches from each end: their number per "
                          f"pipeline must be even, not {micro_batches}; change --global-batch")


def chunks_of(schedule: Schedule, interleave: int) -> int:
    """Model chunks per rank (the layout's v for the interleaved schedule)."""
    return schedule.chunks or interleave


def layers_per_chunk_divisor(schedule: Schedule, interleave: int) -> int:
    """What a stage's L/p layers are divided by to give one chunk: v under Megatron's interleaving,
    2 under the V shapes (a rank's L/p layers in two chunks), 1 under DualPipe (each chunk a whole
    stage of L/p layers; the rank holds two)."""
    if schedule.placement == "dual":
        return 1
    return chunks_of(schedule, interleave)


# --- the orders ----------------------------------------------------------------------------------------

#: An op of a rank's order: (kind "F" | "B" | "W", micro-batch, the rank's chunk, paired). "B" is the
#: whole backward unless a "W" of the same (micro-batch, chunk) follows; paired: run beside the other
#: op of its F&B pair (DualPipe's ``_forward_backward_chunk``).
Op = tuple


def schedule(pp: int, interleave: int, micro_batches: int, rank: int) -> list[tuple[str, int, int]]:
    """The ops of pp ``rank`` in Megatron-LM's order: ("F" | "B", micro-batch, chunk).

    Interleaved (v > 1): warm-up ``(p − rank − 1)·2 + (v − 1)·p`` forwards, capped at the m·v of the
    iteration, then one forward and one backward per step, then the remaining backwards; the k-th
    forward runs chunk ``(k mod p·v) // p`` of micro-batch ``(k // p·v)·p + k mod p``, the k-th backward
    chunk ``v − 1 − (k mod p·v) // p`` (``get_schedule_table`` with ``microbatch_group_size_per_vp_stage``
    = p, its default, and ``get_model_chunk_id``). v = 1: 1F1B, warm-up ``min(p − rank − 1, m)``.

    With m = p every rank runs all m·v forwards first, as :func:`symbolic.layout.layout.in_flight`
    counts it (Megatron-LM's ``num_microbatches == pipeline_parallel_size`` rule before the schedule
    table). At d98e8a6 only the ranks whose warm-up reaches m·v do (``num_warmup_microbatches >=
    total_num_microbatches``): the first stage always, the last stage not — there it holds
    (v − 1)·p + 1 chunk instances, not m·v. The engine keeps the one rule of ``in_flight`` for every
    path; the difference is named here and only arises at m = p on the later stages.
    """
    p, v, m = pp, interleave, micro_batches
    total = m * v
    if v == 1:
        warm_up = min(p - rank - 1, m)
    else:
        warm_up = total if m == p else min((p - rank - 1) * 2 + (v - 1) * p, total)
    group = p * v

    def forward(k):
        return ("F", (k // group) * p + k % p, (k % group) // p)

    def backward(k):
        return ("B", (k // group) * p + k % p, v - 1 - (k % group) // p)

    ops = [forward(k) for k in range(warm_up)]
    for k in range(total - warm_up):
        ops += [forward(warm_up + k), backward(k)]
    ops += [backward(k) for k in range(total - warm_up, total)]
    return ops


def _megatron(pp: int, v: int, m: int, rank: int) -> list[Op]:
    return [(kind, mb, chunk, False) for kind, mb, chunk in schedule(pp, v, m, rank)]


def _zb_h1(p: int, m: int, r: int) -> list[Op]:
    warm = min(p - 1 - r, m)
    ops: list[Op] = [("F", k, 0, False) for k in range(warm)]
    weights = 0

    def backward(k):
        nonlocal weights
        ops.append(("B", k, 0, False))
        if k >= r:                                  # num_1f1b_microbatches = rank: W lags r behind
            ops.append(("W", weights, 0, False))
            weights += 1
    for k in range(m - warm):
        ops.append(("F", warm + k, 0, False))
        backward(k)
    for k in range(m - warm, m):
        backward(k)
    ops += [("W", k, 0, False) for k in range(weights, m)]
    return ops


@lru_cache(maxsize=64)
def _zb_h2_orders(p: int, m: int) -> tuple:
    """ZB-H2 for every rank: Qi et al. §2.2 lays it out at T_F = T_B = T_W (Figure 3, bottom) — up to
    2p − 1 micro-batches in flight, B as soon as its gradient arrives, an extra F in the warm-up while
    memory allows, W to fill what is left (the paper's §3 heuristic: "W fills the bubbles"). Built
    here by stepping every rank in unit time with that priority: B, then F under the 2p − 1 cap, then
    the oldest pending W."""
    cap = 2 * p - 1
    ops: list[list[Op]] = [[] for _ in range(p)]
    f_next, b_next = [0] * p, [0] * p
    pending: list[list[int]] = [[] for _ in range(p)]
    f_done: dict = {}
    b_done: dict = {}
    t = 0
    while any(len(o) < 3 * m for o in ops):
        for r in range(p):
            if len(ops[r]) == 3 * m:
                continue
            k = b_next[r]
            ready_b = k < f_next[r] and ((r == p - 1 and f_done.get((r, k), t + 1) <= t)
                                         or (r < p - 1 and b_done.get((r + 1, k), t + 1) <= t))
            k_f = f_next[r]
            freed = sum(1 for op in ops[r] if op[0] == "W")
            ready_f = (k_f < m and (r == 0 or f_done.get((r - 1, k_f), t + 1) <= t)
                       and f_next[r] - freed < cap)
            if ready_b:
                ops[r].append(("B", k, 0, False)); b_done[(r, k)] = t + 1; b_next[r] += 1; pending[r].append(k)
            elif ready_f:
                ops[r].append(("F", k_f, 0, False)); f_done[(r, k_f)] = t + 1; f_next[r] += 1
            elif pending[r]:
                ops[r].append(("W", pending[r].pop(0), 0, False))
        t += 1
        if t > 10 * (m + p) * 3:
            raise RuntimeError("ZB-H2's greedy order did not finish")
    return tuple(tuple(o) for o in ops)


def _zb_h2(p: int, m: int, r: int) -> list[Op]:
    return list(_zb_h2_orders(p, m)[r])


def _zb_v(p: int, m: int, r: int) -> list[Op]:
    # torch ScheduleZBVZeroBubble._calculate_single_rank_operations, chunk 0 = stage r, 1 = stage 2p-1-r
    n = max(2 * p - 1, m)
    ops: list[Op] = []
    f0 = f1 = b0 = b1 = 0
    for _ in range(2 * (p - r) - 1):
        ops.append(("F", f0, 0)); f0 += 1
    for _ in range(r):
        ops.append(("F", f1, 1)); f1 += 1
        ops.append(("F", f0, 0)); f0 += 1
    for _ in range(p - r):
        ops.append(("F", f1, 1)); f1 += 1
        ops += [("B", b1, 1), ("W", b1, 1)]; b1 += 1
    while f1 < f0 or f0 < n:
        if f0 < n:
            ops.append(("F", f0, 0)); f0 += 1
        ops += [("B", b0, 0), ("W", b0, 0)]; b0 += 1
        ops.append(("F", f1, 1)); f1 += 1
        ops += [("B", b1, 1), ("W", b1, 1)]; b1 += 1
    w0, w1 = b0, b1
    for _ in range(r):
        ops.append(("B", b0, 0)); b0 += 1
        ops.append(("B", b1, 1)); b1 += 1
    for _ in range(p - r):
        ops.append(("B", b0, 0)); b0 += 1
        ops.append(("W", w0, 0)); w0 += 1
    while w1 < b1:
        ops.append(("W", w1, 1)); w1 += 1
    while w0 < b0:
        ops.append(("W", w0, 0)); w0 += 1
    return [(kind, mb, chunk, False) for kind, mb, chunk in ops if mb < m]   # the padded micro-batches dropped


def _dual(p: int, m: int, r: int, v_shape: bool) -> list[Op]:
    """DualPipe.step / DualPipeV.step, steps 1-8, as ops. DualPipe: ``half`` = p/2 ranks per half,
    the rank's place in its half ``hr``, m/2 micro-batches each way; DualPipeV: p ranks, hr = r, m
    micro-batches through both chunks. A phase is a chunk: DualPipe's first half runs phase 0 on the
    path from rank 0 (chunk 0), its second half phase 0 on the path from rank p − 1 (chunk 1)."""
    if v_shape:
        half, hr, per_phase = p, r, m
        chunk_of = (0, 1)
        middle = r == p - 1                          # DualPipeV's is_last_rank: its first F&B not overlapped
    else:
        half, hr, per_phase = p // 2, min(r, p - 1 - r), m // 2
        chunk_of = (0, 1) if r < p // 2 else (1, 0)
        middle = hr == half - 1                      # is_middle_rank
    count = {"F": [0, 0], "B": [0, 0]}
    ops: list[Op] = []
    pending: list[tuple[int, int]] = []              # WeightGradStore's queue: (micro-batch, chunk)

    def forward(phase, paired=False):
        i = count["F"][phase]; count["F"][phase] += 1
        chunk = chunk_of[phase]
        ops.append(("F", i + (per_phase if chunk == 1 and not v_shape else 0), chunk, paired))

    def backward(phase, zb=False, paired=False):
        i = count["B"][phase]; count["B"][phase] += 1
        chunk = chunk_of[phase]
        ident = i + (per_phase if chunk == 1 and not v_shape else 0)
        ops.append(("B", ident, chunk, paired))
        if zb:
            pending.append((ident, chunk))

    def weight():
        ident, chunk = pending.pop(0)
        ops.append(("W", ident, chunk, False))

    for _ in range((half - hr - 1) * 2):                         # step 1: nF0
        forward(0)
    for _ in range(hr + 1):                                      # step 2: nF0F1
        forward(0); forward(1)
    for _ in range(half - hr - 1):                               # step 3: nB1W1F1 (zero bubble)
        backward(1, zb=True); weight(); forward(1)
    for i in range(per_phase - 2 * half + hr + 1):               # step 4: nF0B1F1B0 (main step)
        first_not_paired = i == 0 and middle
        forward(0, paired=not first_not_paired); backward(1, paired=not first_not_paired)
        forward(1, paired=True); backward(0, paired=True)
    for _ in range(half - hr - 1):                               # step 5: nB1F1B0
        backward(1); forward(1, paired=True); backward(0, paired=True)
    zb = False
    for i in range(hr + 1):                                      # step 6: nB1B0 (second half zero bubble)
        if i == (hr + 1) // 2 and hr % 2 == 1:
            zb = True
        backward(1, zb=zb)
        if i == (hr + 1) // 2 and hr % 2 == 0:
            zb = True
        backward(0, zb=zb)
    for _ in range(half - hr - 1):                               # step 7: nWB0 (zero bubble)
        weight(); backward(0, zb=True)
    for _ in range(hr + 1):                                      # step 8: nW
        weight()
    assert not pending, "DualPipe's WeightGradStore must be empty at the end of the step"
    return ops


def order(schedule: Schedule | str, pp: int, interleave: int, micro_batches: int, rank: int) -> list[Op]:
    """Rank ``rank``'s ops in the schedule's own order (see :data:`Op`)."""
    s = schedule_named(schedule) if isinstance(schedule, str) else schedule
    p, m = pp, micro_batches
    if p == 1:
        return [("F", k, 0, False) for k in range(m)][:1] + [("B", 0, 0, False)]
    if s.megatron:
        return _megatron(p, interleave if s.name == "interleaved" else 1, m, rank)
    return {"zb-h1": lambda: _zb_h1(p, m, rank), "zb-h2": lambda: _zb_h2(p, m, rank),
            "zb-v": lambda: _zb_v(p, m, rank), "dualpipe": lambda: _dual(p, m, rank, False),
            "dualpipev": lambda: _dual(p, m, rank, True)}[s.name]()


def freed_at(ops: list[Op]) -> dict:
    """(micro-batch, chunk) -> the index in ``ops`` where its activations are freed: its W when one
    follows its B, else its B."""
    out = {}
    for i, (kind, mb, chunk, _) in enumerate(ops):
        if kind == "B" and (mb, chunk) not in out:
            out[(mb, chunk)] = i
        elif kind == "W":
            out[(mb, chunk)] = i
    return out


def live_counts(ops: list[Op]) -> list[int]:
    """The chunk instances alive (forwarded, not yet freed) after each op of ``ops``."""
    free = freed_at(ops)
    live, out = 0, []
    for i, (kind, mb, chunk, _) in enumerate(ops):
        if kind == "F":
            live += 1
        elif free.get((mb, chunk)) == i:
            live -= 1
        out.append(live)
    return out


def w_pending_at_peak(schedule: Schedule | str, pp: int, interleave: int, micro_batches: int, rank: int) -> int:
    """Of the instances rank ``rank`` holds at its fullest (the first moment it holds the most), how many have
    run their B and wait for their W — each counted whole though B freed what W does not need (:data:`W_PENDING`)."""
    ops = order(schedule, pp, interleave, micro_batches, rank)
    free = freed_at(ops)
    live = live_counts(ops)
    peak = live.index(max(live))
    backward_done = {(mb, c) for kind, mb, c, _ in ops[:peak + 1] if kind == "B"}
    return sum(1 for key in backward_done if free.get(key, -1) > peak)


def peak_in_flight(schedule: Schedule | str, pp: int, interleave: int, micro_batches: int, rank: int) -> int:
    """The most chunk instances rank ``rank`` holds at once (a W-pending one counted whole: :data:`W_PENDING`)."""
    return max(live_counts(order(schedule, pp, interleave, micro_batches, rank)))


@lru_cache(maxsize=4096)
def paired_share(schedule: Schedule | str, pp: int, interleave: int, micro_batches: int) -> float:
    """The least share, over the ranks, of a rank's forwards and backwards run as one of an overlapped
    F&B pair (0 for a schedule that pairs nothing): the share of its communication that can hide
    behind the other micro-batch's computation."""
    s = schedule_named(schedule) if isinstance(schedule, str) else schedule
    if not s.overlaps or pp == 1:
        return 0.0
    shares = []
    for rank in range(pp):
        ops = [op for op in order(s, pp, interleave, micro_batches, rank) if op[0] in ("F", "B")]
        shares.append(sum(1 for op in ops if op[3]) / len(ops))
    return min(shares)


# --- the path of a micro-batch and the simulated step ---------------------------------------------------

def position(schedule: Schedule, pp: int, interleave: int, micro_batches: int, rank: int, chunk: int,
             micro_batch: int) -> tuple[int, int]:
    """(place of (rank, chunk) on the micro-batch's path, the path's length)."""
    p = pp
    if schedule.placement == "loop":
        v = chunks_of(schedule, interleave)
        return chunk * p + rank, p * v
    if schedule.placement == "v":
        return (rank if chunk == 0 else 2 * p - 1 - rank), 2 * p
    # dual: micro-batches < m/2 enter at rank 0 (chunk 0 = stage r), the others at rank p − 1
    return (rank if chunk == 0 else p - 1 - rank), p


def simulate(schedule: Schedule | str, pp: int, interleave: int, micro_batches: int,
             forward: float, backward_input: float, backward_weight: float) -> dict:
    """Run every rank's order against its dependencies with a chunk's F, B (input gradient) and W
    durations (a whole backward B + W where the schedule does not defer W) and no communication time —
    floats, or arrays of one duration per layout (each layout's figures as its own floats would give);
    an overlapped F&B pair starts when both its inputs have arrived. Returns the makespan, each rank's
    busy time and idle time between its first op's start and its last op's end, and the bubble: the
    most idle rank's idle time. The ranks' start skew (rank r's first input arrives r forwards late)
    is not a bubble: each stage's optimizer step runs when its own gradients are done (the
    zero-bubble paper's optimizer post-validation, §4; the data-parallel reduce is per stage), and
    the papers' formulas count it out — 1F1B's rank 0 idles (p − 1)(F + B + W) between its first
    and last op, the whole of Narayanan's bubble."""
    s = schedule_named(schedule) if isinstance(schedule, str) else schedule
    p, m = pp, micro_batches
    orders = [order(s, p, interleave, m, r) for r in range(p)]
    deferred = [{(mb, c) for kind, mb, c, _ in ops if kind == "W"} for ops in orders]
    place = {}                                         # (micro-batch, path place) -> rank, chunk
    for r in range(p):
        for kind, mb, c, _ in orders[r]:
            if kind == "F":
                place[(mb, position(s, p, interleave, m, r, c, mb)[0])] = (r, c)
    done: dict = {}
    clock = [0.0] * p
    first = [None] * p                                 # when each rank's first op starts
    busy = [0.0] * p
    index = [0] * p
    remaining = sum(len(o) for o in orders)

    def needs(r, i):
        """(the op's dependency, its seconds, its key)"""
        kind, mb, c, _ = orders[r][i]
        at, length = position(s, p, interleave, m, r, c, mb)
        if kind == "F":
            return (("F", mb, at - 1) if at > 0 else None), forward, ("F", mb, at)
        if kind == "B":
            dep = ("B", mb, at + 1) if at < length - 1 else ("F", mb, at)
            return dep, backward_input + (0.0 if (mb, c) in deferred[r] else backward_weight), ("B", mb, at)
        return ("B", mb, at), backward_weight, ("W", mb, at)

    while remaining:
        progressed = False
        for r in range(p):
            while index[r] < len(orders[r]):
                i = index[r]
                # an overlapped F&B pair (paired F then paired B) is one kernel stream: it starts when both can
                unit = [i, i + 1] if (orders[r][i][3] and orders[r][i][0] == "F" and i + 1 < len(orders[r])
                                      and orders[r][i + 1][3] and orders[r][i + 1][0] == "B") else [i]
                deps = [needs(r, j) for j in unit]
                if any(dep is not None and dep not in done and dep != deps[0][2] for dep, _, _ in deps):
                    break
                start = _most([clock[r]] + [done[dep] for dep, _, _ in deps if dep is not None and dep in done])
                if first[r] is None:
                    first[r] = start
                for dep, seconds, key in deps:
                    clock[r] = _most([clock[r], start]) + seconds
                    busy[r] += seconds
                    done[key] = clock[r]
                index[r] += len(unit)
                remaining -= len(unit)
                progressed = True
        if not progressed:
            raise RuntimeError(f"schedule {s.name} deadlocks at p={p}, m={m}: its order is inconsistent")
    idle = [clock[r] - first[r] - busy[r] for r in range(p)]
    return {"makespan": _most(clock), "busy": busy, "idle": idle, "bubble": _most(idle),
            "skew": _most(clock) - _least([first[r] + busy[r] + idle[r] for r in range(p)])}


def _most(values: list):
    """The largest of ``values``: floats by ``max``; where one is an array (:func:`simulate` over many layouts
    at once, one duration per layout) element by element — the same comparisons, so the same doubles."""
    if not any(hasattr(x, "shape") for x in values):
        return max(values)
    import numpy as np
    return functools.reduce(np.maximum, values)


def _least(values: list):
    if not any(hasattr(x, "shape") for x in values):
        return min(values)
    import numpy as np
    return functools.reduce(np.minimum, values)


def simulated_micro_batches(schedule: Schedule, pp: int, micro_batches: int) -> int:
    """The micro-batches a step is simulated with: m up to 6p; beyond, 6p (even where the schedule
    needs it). Past its warm-up and cool-down (each under 3p ops) a schedule's steady state repeats,
    so its bubble in seconds no longer depends on m (``tests/test_schedules.py`` holds 6p and 10p equal)."""
    if micro_batches <= 6 * pp:
        return micro_batches
    return 6 * pp


def describe(schedule: Schedule, interleave: int = 1) -> str:
    """The schedule in one line: its chunks, parameter copies, backward split and overlap."""
    chunks = chunks_of(schedule, interleave)
    parts = [f"{chunks} chunk(s) per rank ({schedule.placement} placement)",
             f"{schedule.parameter_copies}× a stage's parameters per rank",
             "B and W split, W deferred" if schedule.splits_backward else "whole backward",
             ("overlaps " + " and ".join({'ep': 'the expert all-to-all', 'pp': 'the stage sends'}[k]
                                        for k in schedule.overlaps) + " with the paired micro-batch")
             if schedule.overlaps else "no compute-communication pairing"]
    return f"{schedule.name}: " + "; ".join(parts) + f" — bubble {schedule.bubble}"
