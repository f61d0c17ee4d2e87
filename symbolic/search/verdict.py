"""The bill's verdict over arrays of layouts sharing a group (:func:`sweep`), and exactly for one
(:func:`exact_totals`).

:func:`sweep` evaluates a group's formulas (:mod:`symbolic.search.formulas`) in blocks of
:data:`SWEEP_BLOCK` configurations: by their expression form, by the group's compiled kernel
(:mod:`symbolic.search.kernel`) past :data:`KERNEL_MIN`, by one C loop (:mod:`symbolic.search.native`) past
:data:`NATIVE_MIN` — the same doubles each way. Floats screen and rank; :func:`exact_totals` evaluates the
same formulas in ints and Fractions, equal to ``make_bill``'s totals.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Mapping

import numpy as np

from ..layout.layout import Layout
from ..ledgers.buffers import CommSettings
from ..models.config import ModelConfig
from .formulas import ARG_NAMES, Group, GroupFormulas, _letters, group_formulas


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


def schedule_in_flight_array(schedule: str, pp, interleave, micro_batches, stage: str):
    """:meth:`symbolic.layout.layout.Layout.in_flight` of a schedule beyond Megatron's (zero-bubble, DualPipe)
    over arrays of layouts: the most chunk instances the stage's rank holds in the schedule's own order
    (``schedules.peak_in_flight`` at ``schedules.simulated_micro_batches``), computed once per distinct
    (p, v, m); 1 where p = 1 (no pipeline). ``stage`` ``middle``: rank 1, the first's where p ≤ 2 (as
    :func:`_middle_values`)."""
    p_, v_, m_ = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (pp, interleave, micro_batches)))
    out = np.ones(p_.shape, dtype=np.int64)
    if not p_.size:
        return out
    triples, inverse = np.unique(np.stack([p_.ravel(), v_.ravel(), m_.ravel()]), axis=1, return_inverse=True)
    counts = np.array([_schedule_in_flight(schedule, int(p), int(v), int(m), stage) for p, v, m in triples.T],
                      dtype=np.int64)
    return counts[np.asarray(inverse).ravel()].reshape(p_.shape)


@lru_cache(maxsize=4096)
def _schedule_in_flight(schedule: str, pp: int, interleave: int, micro_batches: int, stage: str) -> int:
    from ..layout.layout import stage_rank_of
    from ..layout.schedules import peak_in_flight, schedule_named, simulated_micro_batches

    if pp == 1:
        return 1
    if stage == "middle" and pp <= 2:
        stage = "first"
    plan = schedule_named(schedule)
    return peak_in_flight(plan, pp, interleave, simulated_micro_batches(plan, pp, micro_batches),
                          stage_rank_of(stage, pp))
