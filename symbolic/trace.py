"""Trace a real ``nn.Module``: what autograd saves, what FlopCounterMode counts.

Optional extra ``torch`` (``pip install -e ".[torch]"``, pinned ``torch==2.13.0``).

Three steps, each usable alone:

1. :func:`trace_module` runs one forward (training mode) and one backward and
   records every tensor autograd saves for backward
   (``torch.autograd.graph.saved_tensors_hooks``), de-duplicated by storage
   (Q, K and V saved as views of one QKV output count once), counting only
   what is still held when the forward returns (a tensor saved on a branch
   that never reaches the output — a router's expert choice — is freed by
   autograd at once and is not counted), excluding the module's parameters and buffers and the inputs shared by every layer (the
   rotary tables, the attention mask: tensors passed in that do not require a
   gradient), each with the module and the torch function that saved it; and
   the forward and backward FLOPs ``torch.utils.flop_counter.FlopCounterMode``
   counts, per module and op.
2. :func:`fit` runs a factory at several small, distinct dimension values and
   solves, exactly (rational arithmetic, no least squares), for the integer
   coefficients of a basis of monomials in the dimensions — per saved tensor
   and for the totals. A record whose sizes the basis cannot reproduce at
   every run (zero residual) is reported in ``Fit.unfitted``, not forced.
3. :func:`compare` sets a fitted expression against a declared one
   (an inventory's sum) monomial by monomial and returns the difference.

Conditions: CPU, the dtype the factory builds the module in; FLOPs are what
FlopCounterMode's registry knows (matmuls and attention kernels only, and in
torch 2.13.0 not the CPU flash-attention kernel: pytorch/pytorch#195460, see
:func:`cpu_sdpa_flops`).
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Mapping, Sequence

from sympy import Add, Expr, Integer, Mul, Rational, Symbol, expand, sympify

TORCH_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "bool": 1, "uint8": 1,
               "int8": 1, "int32": 4, "int64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1}


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - the message is the point
        raise ValueError("tracing needs PyTorch: pip install -e '.[torch]' (torch==2.13.0)") from None
    return torch


# --- one run ----------------------------------------------------------------

@dataclass(frozen=True)
class SavedRecord:
    """One storage autograd keeps for backward, attributed to its first saver.

    ``key`` is ``module/op#n`` (the n-th storage that module's ``op`` saved),
    stable between runs of the same code at other dimension values.
    """

    key: str
    module: str
    op: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int


@dataclass(frozen=True)
class Trace:
    """What one training step of a module saved and counted.

    ``saved``: the de-duplicated storages; ``shared``: storages of inputs that
    need no gradient (per-model tables every layer reads: not the layer's);
    ``forward_flops``/``backward_flops``: ``{(module, op): FLOPs}``.
    """

    saved: tuple[SavedRecord, ...]
    shared: tuple[SavedRecord, ...]
    forward_flops: dict[tuple[str, str], int]
    backward_flops: dict[tuple[str, str], int]

    @property
    def saved_bytes(self) -> int:
        return sum(r.bytes for r in self.saved)

    @property
    def forward_total(self) -> int:
        return sum(self.forward_flops.values())

    @property
    def backward_total(self) -> int:
        return sum(self.backward_flops.values())

    def bytes_by(self, what: str = "op") -> dict[str, int]:
        """Saved bytes summed by ``op``, ``module`` or ``dtype``."""
        out: dict[str, int] = defaultdict(int)
        for r in self.saved:
            out[getattr(r, what)] += r.bytes
        return dict(out)


def _module_names(module) -> dict[int, str]:
    return {id(m): (name or type(module).__name__) for name, m in module.named_modules()}


def _storage(tensor):
    # A wrapper subclass — a DTensor (torch.distributed.tensor), whose inner tensor is this rank's
    # shard; a functional collective's AsyncCollectiveTensor — has no storage of its own: what the
    # rank holds is its inner tensor's.
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    while is_traceable_wrapper_subclass(tensor):
        inner, _ = tensor.__tensor_flatten__()
        tensor = getattr(tensor, inner[0])
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def _flop_table(counter) -> dict[tuple[str, str], int]:
    """FlopCounterMode's counts, each op credited to the deepest module that ran
    it (the counter also credits every enclosing module and ``Global``)."""
    counts = {name: {str(op).split(".")[-1]: n for op, n in ops.items()}
              for name, ops in counter.get_flop_counts().items()}
    table: dict[tuple[str, str], int] = {}

    def within(child: str, parent: str) -> bool:
        return child != parent and (parent == "Global" or child.startswith(parent + "."))

    for name, ops in counts.items():
        # the nearest enclosing counted modules: a container never called (nn.ModuleList) has no entry
        inside = [c for c in counts if within(c, name) and c != "Global"]
        children = [c for c in inside if not any(within(c, other) for other in inside)]
        for op, n in ops.items():
            own = n - sum(counts[c].get(op, 0) for c in children)
            if own:
                table[name, op] = own
    return table


def trace_module(module, args: Sequence = (), kwargs: Mapping | None = None, *,
                 custom_flops: Mapping | None = None, output: Callable | None = None,
                 count_flops: bool = True) -> Trace:
    """Run ``module(*args, **kwargs)`` in training mode, then backward.

    ``custom_flops``: extra ``{aten op: formula}`` for FlopCounterMode (e.g.
    :func:`cpu_sdpa_flops`). ``output``: picks the tensor to back-propagate
    from the module's output (default: the output, or its first element).
    The gradient fed to backward is all ones. ``count_flops=False``: no
    FlopCounterMode (its flop tables are empty), for code whose dispatch it
    does not pass through (DTensor's ``loss_parallel`` backward).
    """
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils.flop_counter import FlopCounterMode

    kwargs = dict(kwargs or {})
    module.train()
    names = _module_names(module)
    own = {_storage(t)[0] for t in itertools.chain(module.parameters(), module.buffers())}
    inputs = [x for x in itertools.chain(args, kwargs.values())
              if isinstance(x, torch.Tensor)] + [y for x in itertools.chain(args, kwargs.values())
                                                 if isinstance(x, (tuple, list))
                                                 for y in x if isinstance(y, torch.Tensor)]
    shared_ptrs = {_storage(x)[0] for x in inputs if not x.requires_grad}

    module_stack: list[str] = []
    op_stack: list[str] = []

    class _Ops(TorchFunctionMode):
        def __torch_function__(self, func, types, fargs=(), fkwargs=None):
            op_stack.append(getattr(func, "__name__", str(func)))
            try:
                return func(*fargs, **(fkwargs or {}))
            finally:
                op_stack.pop()

    def pre(mod, _inputs):
        module_stack.append(names.get(id(mod), type(mod).__name__))

    def post(mod, _inputs, _output):
        module_stack.pop()

    seen: dict[int, SavedRecord] = {}
    shared: dict[int, SavedRecord] = {}
    per_key: Counter = Counter()
    # Weak references to every tensor packed per storage: a storage autograd frees before backward
    # (saved on a branch that never reaches the output, e.g. a router's choice of experts) is dead
    # once the forward returns, and is not counted; its address may then be reused by a new storage.
    holders: dict[int, list] = defaultdict(list)

    def alive(ptr: int) -> bool:
        return any(ref() is not None for ref in holders.get(ptr, ()))

    def pack(tensor):
        ptr, nbytes = _storage(tensor)
        if ptr in own or nbytes == 0:
            return tensor
        # Autograd keeps what this returns. A detached alias (same storage, no grad_fn) keeps the
        # values without the cycle a saved output would make with its own grad_fn (node -> output
        # -> node), so a dead branch is freed when the forward returns, as it is without hooks.
        alias = tensor.detach()
        if (ptr in seen or ptr in shared) and alive(ptr):
            holders[ptr].append(weakref.ref(alias))
            return alias
        mod = module_stack[-1] if module_stack else names[id(module)]
        op = op_stack[0] if op_stack else "?"
        n = per_key[mod, op]
        per_key[mod, op] += 1
        dtype = str(tensor.dtype).removeprefix("torch.")
        record = SavedRecord(f"{mod}/{op}#{n}", mod, op, tuple(tensor.shape), dtype, nbytes)
        if ptr in seen or ptr in shared:  # the earlier storage at this address was freed: drop its record
            seen.pop(ptr, None) or shared.pop(ptr, None)
        holders[ptr] = [weakref.ref(alias)]
        (shared if ptr in shared_ptrs else seen)[ptr] = record
        return alias

    handles = [m.register_forward_pre_hook(pre) for m in module.modules()]
    handles += [m.register_forward_hook(post) for m in module.modules()]
    # The objects alive before the forward (the model, torch, transformers, sympy: hundreds of thousands)
    # are set aside while the forward's garbage is collected: gc.collect() then walks only what the
    # forward made (~0.4 s a call less in a test process), and they go back to the collector after.
    # (A caller that froze objects of its own keeps them frozen: then nothing is frozen or thawed here.)
    thaw = gc.get_freeze_count() == 0
    if thaw:
        gc.freeze()
    try:
        def counter():
            if count_flops:
                return FlopCounterMode(display=False, custom_mapping=dict(custom_flops or {}))
            return contextlib.nullcontext(None)

        with counter() as fwd:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x), _Ops():
                out = module(*args, **kwargs)
        gc.collect()  # what only a dead branch of the graph referenced is gone now
        if thaw:
            gc.unfreeze()
        kept = {ptr: record for ptr, record in seen.items() if alive(ptr)}
        kept_shared = {ptr: record for ptr, record in shared.items() if alive(ptr)}
        loss_of = output or (lambda o: o[0] if isinstance(o, (tuple, list)) else o)
        result = loss_of(out)
        with counter() as bwd:
            result.backward(torch.ones_like(result))
    finally:
        if thaw:
            gc.unfreeze()  # (again where the forward raised; a no-op once thawed)
        for handle in handles:
            handle.remove()
    return Trace(tuple(kept.values()), tuple(kept_shared.values()), _flop_table(fwd) if fwd else {},
                 _flop_table(bwd) if bwd else {})


def _sdpa_cpu_forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count
    return sdpa_flop_count(query, key, value)


def _sdpa_cpu_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count
    return sdpa_backward_flop_count(grad_out, query, key, value)


def cpu_sdpa_flops() -> dict:
    """The FlopCounterMode formulas torch 2.13.0 lacks for CPU attention.

    ``F.scaled_dot_product_attention`` on CPU runs
    ``aten._scaled_dot_product_flash_attention_for_cpu``, which has no entry in
    ``flop_registry``: FlopCounterMode counts it as 0 FLOPs
    (https://github.com/pytorch/pytorch/issues/195460). The fix upstream
    (pull 195801) registers it and its backward with the existing SDPA
    formulas; this mapping does the same through ``custom_mapping``, so the
    comparison stays exact. Shapes are (B, H, S, D) as for the other kernels.
    A grouped convolution's backward (Mamba2's and LFM2's depthwise conv1d) is
    :func:`grouped_conv_flops`'s; :func:`flop_fixes` gives both.
    """
    torch = _torch()
    aten = torch.ops.aten
    return {aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward}


def _conv_backward_grouped(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                           _output_padding, groups, output_mask, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import conv_flop_count

    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])
    flops = 0
    if output_mask[0]:  # the input's gradient, a transposed conv by the weight: torch's own count
        flops += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1]:  # the weight's gradient: torch's count is over every (in, out) channel pair, / groups
        pair = (t(grad_out_shape), t(x_shape)) if transposed else (t(x_shape), t(grad_out_shape))
        flops += conv_flop_count(*pair, t(out_shape[1]), transposed=False) // groups
    return flops


def grouped_conv_flops() -> dict:
    """The weight gradient of a grouped convolution, counted per group.

    torch 2.13.0's ``conv_backward_flop`` (torch/utils/flop_counter.py) counts the weight's gradient as a
    conv of the input by the output gradient over every pair of input and output channels, whatever
    ``groups`` is: a depthwise conv1d of h channels (LFM2's short convolution, Qwen3-Next's, Mamba2's) is counted h
    times its multiply-adds. Each output channel of a grouped conv reads only its group's inputs, so this
    formula divides that term by ``groups``; the input's gradient (torch's count is per group already) is
    unchanged. Through ``custom_mapping``, as :func:`cpu_sdpa_flops`."""
    torch = _torch()
    return {torch.ops.aten.convolution_backward: _conv_backward_grouped}


def flop_fixes() -> dict:
    """Every formula this module gives FlopCounterMode: :func:`cpu_sdpa_flops`, :func:`grouped_conv_flops`."""
    return {**cpu_sdpa_flops(), **grouped_conv_flops()}


# --- fitting ----------------------------------------------------------------

def monomials(symbols: Sequence[Symbol], degree: int, extra: Iterable[Expr] = ()) -> list[Expr]:
    """Every monomial of total degree <= ``degree`` in ``symbols``, plus ``extra``."""
    out: list[Expr] = []
    for d in range(degree + 1):
        for combo in itertools.combinations_with_replacement(symbols, d):
            out.append(Mul(*combo))
    for e in extra:
        if e not in out:
            out.append(e)
    return out


def basis_of(*exprs: Expr, extra: Iterable[Expr] = ()) -> list[Expr]:
    """The monomials (coefficients dropped) of the expanded ``exprs``, plus ``extra``."""
    out: list[Expr] = []
    for e in itertools.chain(exprs, extra):
        for mono in expand(sympify(e)).as_coefficients_dict():
            if mono not in out:
                out.append(mono)
    return out


def _solve_exact(rows: list[list[Fraction]], ys: list[Fraction]) -> list[Fraction] | None:
    """Exact solution of the (possibly over-determined) system, or None when it
    has no solution; raises when the basis is not identifiable from the runs."""
    n = len(rows[0])
    aug = [row[:] + [y] for row, y in zip(rows, ys)]
    pivots, r = [], 0
    for c in range(n):
        pivot = next((i for i in range(r, len(aug)) if aug[i][c] != 0), None)
        if pivot is None:
            continue
        aug[r], aug[pivot] = aug[pivot], aug[r]
        inv = 1 / aug[r][c]
        aug[r] = [x * inv for x in aug[r]]
        for i in range(len(aug)):
            if i != r and aug[i][c] != 0:
                factor = aug[i][c]
                aug[i] = [x - factor * y for x, y in zip(aug[i], aug[r])]
        pivots.append(c)
        r += 1
    if len(pivots) < n:
        raise ValueError(f"the runs do not determine the basis ({len(pivots)} of {n} monomials): "
                         "add runs at other distinct dimension values")
    if any(aug[i][n] != 0 for i in range(r, len(aug))):
        return None
    return [aug[pivots.index(c)][n] for c in range(n)]


@dataclass(frozen=True)
class FitResult:
    """A fitted polynomial, or why it does not fit."""

    key: str
    expr: Expr | None
    observed: tuple[int, ...]


def fit_values(basis: Sequence[Expr], points: Sequence[Mapping[Symbol, int]], ys: Sequence[int]) -> Expr | None:
    """The unique integer combination of ``basis`` equal to ``ys`` at every
    point, exactly, or None when there is none (the observations are outside
    the basis, or need fractional coefficients)."""
    rows = [[_value(m, pt) for m in basis] for pt in points]
    coeffs = _solve_exact(rows, [Fraction(y) for y in ys])
    if coeffs is None or any(c.denominator != 1 for c in coeffs):
        return None  # bytes and FLOPs are whole multiples of monomials: a fraction means no fit
    return Add(*(Rational(c.numerator, c.denominator) * b for c, b in zip(coeffs, basis)))


@dataclass
class Fit:
    """Fitted inventory of a module: per saved storage, totals and FLOPs.

    ``saved``: ``{record key: bytes expression}``; ``unfitted``: the records
    whose bytes no combination of the basis reproduces, with their observed
    bytes at each run; ``records``: the first run's record of each key (shape,
    dtype, module, op) for display.
    """

    points: list[dict]
    basis: list[Expr]
    saved: dict[str, Expr]
    saved_total: Expr | None
    forward_flops: Expr | None
    backward_flops: Expr | None
    flops_by_op: dict[tuple[str, str, str], Expr]
    unfitted: list[FitResult] = field(default_factory=list)
    records: dict[str, SavedRecord] = field(default_factory=dict)


def fit(factory: Callable[..., tuple], points: Sequence[Mapping[Symbol, int]], basis: Sequence[Expr],
        custom_flops: Mapping | None = None, progress: Callable[[], None] | None = None) -> Fit:
    """Trace ``factory(**{name: value})`` at each point and fit the inventory.

    ``factory`` returns ``(module, args)`` or ``(module, args, kwargs)`` built
    at the given dimension values. The number of points must at least match
    the basis; extra points check the fit (zero residual or reported).
    ``progress``, if given, is called after each traced run (the CLI's progress bar).
    """
    if len(points) < len(basis):
        raise ValueError(f"{len(points)} runs cannot determine {len(basis)} monomials: give more points")
    traces = []
    for pt in points:
        built = factory(**{str(k): v for k, v in pt.items()})
        module, args, kwargs = (tuple(built) + ({},))[:3]
        traces.append(trace_module(module, args, kwargs, custom_flops=custom_flops))
        if progress is not None:
            progress()

    saved, unfitted = {}, []
    keys = list(dict.fromkeys(r.key for t in traces for r in t.saved))
    misfits: dict[str, list[str]] = defaultdict(list)
    everywhere = set.intersection(*({r.key for r in t.saved} for t in traces))
    for key in keys:
        ys = [sum(r.bytes for r in t.saved if r.key == key) for t in traces]
        expr = fit_values(basis, points, ys) if key in everywhere else None
        if expr is None:
            misfits[key.rsplit("#", 1)[0]].append(key)
        else:
            saved[key] = expr
    # Storages whose count or size depends on data (one per expert hit by the routing): their
    # sum over the module's op may still fit (it does for MoE: linear in the s·b·k assignments).
    for group, members in misfits.items():
        ys = [sum(r.bytes for r in t.saved if r.key.rsplit("#", 1)[0] == group) for t in traces]
        expr = fit_values(basis, points, ys)
        if expr is not None:
            saved[f"{group} (all)"] = expr
            continue
        for key in members:
            unfitted.append(FitResult(key, None, tuple(sum(r.bytes for r in t.saved if r.key == key)
                                                       for t in traces)))

    total = fit_values(basis, points, [t.saved_bytes for t in traces])
    fwd = fit_values(basis, points, [t.forward_total for t in traces])
    bwd = fit_values(basis, points, [t.backward_total for t in traces])
    by_op = {}
    for phase in ("forward", "backward"):
        ops = sorted({k for t in traces for k in getattr(t, f"{phase}_flops")})
        for mod, op in ops:
            ys = [getattr(t, f"{phase}_flops").get((mod, op), 0) for t in traces]
            expr = fit_values(basis, points, ys)
            if expr is None:
                unfitted.append(FitResult(f"{phase} FLOPs {mod}/{op}", None, tuple(ys)))
            else:
                by_op[phase, mod, op] = expr
    first = {}
    for t in traces:
        for r in t.saved:
            first.setdefault(r.key, r)
            first.setdefault(f"{r.key.rsplit('#', 1)[0]} (all)", r)
    return Fit([dict(p) for p in points], list(basis), saved, total, fwd, bwd, by_op, unfitted, first)


def compare(fitted: Expr, declared: Expr) -> dict[Expr, tuple[Expr, Expr]]:
    """``{monomial: (fitted coefficient, declared coefficient)}`` where they differ
    (empty: the two are equal term by term)."""
    got = expand(fitted).as_coefficients_dict()
    want = expand(declared).as_coefficients_dict()
    diff = {}
    for mono in set(got) | set(want):
        g, w = got.get(mono, Integer(0)), want.get(mono, Integer(0))
        if g != w:
            diff[mono] = (g, w)
    return diff


def match(fitted: Mapping[str, Expr], inventory) -> tuple[list[tuple[str, Expr, str | None]], list[str]]:
    """Pair each declared saved tensor with a fitted storage of the same bytes.

    Returns ``[(term name, declared bytes, record key or None)]`` and the
    record keys no term claimed. Storages of equal size (Q and the attention
    output, say) are told apart only by order: the pairing is by size.
    """
    free = dict(fitted)
    pairs = []
    for term in inventory:
        key = next((k for k, expr in free.items() if expand(expr - term.bytes) == 0), None)
        if key is not None:
            del free[key]
        pairs.append((term.name, term.bytes, key))
    return pairs, list(free)


def _value(expr: Expr, point: Mapping[Symbol, int]) -> Fraction:
    """A monomial (coefficient × powers of symbols) at ``point``, exactly; sympy only as a fallback."""
    expr = sympify(expr)
    out = Fraction(1)
    for base, exp in expr.as_powers_dict().items():
        if base.is_Symbol and exp.is_Integer and base in point:
            out *= Fraction(point[base]) ** int(exp)
        elif base.is_Rational and exp == 1:
            out *= Fraction(int(base.p), int(base.q))
        else:
            v = Rational(expr.xreplace({k: Integer(x) for k, x in point.items()}))
            return Fraction(int(v.p), int(v.q))
    return out


def design_points(basis: Sequence[Expr], ranges: Mapping[Symbol, Sequence[int]],
                  valid: Callable[[dict], bool] = lambda pt: True, check: int = 2, seed: int = 0) -> list[dict]:
    """Points from the grid ``ranges`` (those passing ``valid``) that determine
    ``basis``: each kept point adds a new independent row (exact elimination),
    until the basis is determined; then ``check`` more points that the fit
    must also reproduce (the zero residual is tested, not assumed)."""
    import random

    names = list(ranges)
    grid = [dict(zip(names, combo)) for combo in itertools.product(*(ranges[n] for n in names))]
    grid = [pt for pt in grid if valid(pt)]
    random.Random(seed).shuffle(grid)
    reduced: list[tuple[int, list[Fraction]]] = []  # (pivot column, row) in echelon form
    chosen, spare = [], []
    for pt in grid:
        row = [_value(m, pt) for m in basis]
        for col, other in reduced:
            if row[col] != 0:
                factor = row[col] / other[col]
                row = [x - factor * y for x, y in zip(row, other)]
        pivot = next((i for i, x in enumerate(row) if x != 0), None)
        if pivot is not None and len(reduced) < len(basis):
            reduced.append((pivot, row))
            chosen.append(pt)
        else:
            spare.append(pt)
    if len(reduced) < len(basis):
        raise ValueError(f"the ranges determine only {len(reduced)} of {len(basis)} monomials: widen them")
    if len(spare) < check:
        raise ValueError(f"no {check} spare points left to check the fit: widen the ranges")
    return chosen + spare[:check]


# --- HuggingFace decoder layers -------------------------------------------------

#: How each supported ``model_type`` names the dimensions, and its layer class.
#: ``f`` is the dense MLP width; ``f_e`` an expert's (Mixtral's intermediate_size).
HF_MODELS: dict[str, dict] = {
    "llama": {"arch": "llama", "layer": "LlamaDecoderLayer", "rotary": "LlamaRotaryEmbedding",
              "dims": {"h": "hidden_size", "a": "num_attention_heads", "g": "num_key_value_heads",
                       "f": "intermediate_size", "V": "vocab_size", "L": "num_hidden_layers"}},
    "mixtral": {"arch": "moe", "layer": "MixtralDecoderLayer", "rotary": "MixtralRotaryEmbedding",
                "dims": {"h": "hidden_size", "a": "num_attention_heads", "g": "num_key_value_heads",
                         "f_e": "intermediate_size", "E": "num_local_experts", "k": "num_experts_per_tok",
                         "V": "vocab_size", "L": "num_hidden_layers"}},
    "qwen2_moe": {"arch": "moe", "layer": "Qwen2MoeDecoderLayer", "rotary": "Qwen2MoeRotaryEmbedding",
                  "dims": {"h": "hidden_size", "a": "num_attention_heads", "g": "num_key_value_heads",
                           "f_e": "moe_intermediate_size", "E": "num_experts", "k": "num_experts_per_tok",
                           "V": "vocab_size", "L": "num_hidden_layers"}},
    "gpt2": {"arch": "gpt", "layer": "GPT2Block", "rotary": None,
             "dims": {"h": "n_embd", "a": "n_head", "f": "n_inner", "V": "vocab_size", "L": "n_layer"}},
}


def hf_config(config: Mapping, attention: str = "sdpa", **overrides):
    """A transformers config object from a ``config.json`` dict (``model_type``
    picks the class), with ``attn_implementation`` and ``overrides`` applied."""
    _torch()
    from transformers import AutoConfig

    config = dict(config)
    model_type = config.pop("model_type", None)
    if model_type not in HF_MODELS:
        raise ValueError(f"model_type {model_type!r} cannot be traced; supported: {', '.join(HF_MODELS)}")
    for key in ("architectures", "transformers_version", "torch_dtype", "dtype", "auto_map"):
        config.pop(key, None)
    config.update(overrides)
    cfg = AutoConfig.for_model(model_type, **config)
    cfg._attn_implementation = attention
    if HF_MODELS[model_type]["arch"] == "moe":
        cfg._experts_implementation = "eager"
    return cfg


def hf_values(cfg) -> dict[str, int]:
    """The dimension values (papers' letters) of a transformers config."""
    spec = HF_MODELS[cfg.model_type]
    values = {name: getattr(cfg, key) for name, key in spec["dims"].items()}
    if "g" in values and values["g"] is None:
        values["g"] = values["a"]
    if "f" in values and values["f"] is None:  # GPT-2: n_inner None means 4h
        values["f"] = 4 * values["h"]
    if cfg.model_type == "qwen2_moe":  # one shared MLP of E_s expert widths
        shared, width = cfg.shared_expert_intermediate_size, cfg.moe_intermediate_size
        if shared % width:
            raise ValueError(f"shared_expert_intermediate_size {shared} is not a multiple of "
                             f"moe_intermediate_size {width}: the inventory counts E_s experts of width f_e")
        values["E_s"] = shared // width
    head_dim = getattr(cfg, "head_dim", None)
    if head_dim not in (None, values["h"] // values["a"]):
        raise ValueError(f"head_dim {head_dim} != hidden/heads: the inventories assume head width h/a")
    return values


def hf_layer_factory(cfg, dtype: str = "bfloat16", seed: int = 0) -> Callable[..., tuple]:
    """``factory(s=, b=, **dims)`` -> (one decoder layer of ``cfg``, args, kwargs).

    The layer is built once per set of widths (and reused while only s and b
    change); its input requires a gradient (the previous layer's output);
    the rotary tables are computed outside it, as the model does once for
    all layers. Dimension overrides (``h=``, ``a=``, ...) rebuild the config.
    """
    torch = _torch()
    import importlib

    spec = HF_MODELS[cfg.model_type]
    modeling = importlib.import_module(f"transformers.models.{cfg.model_type}.modeling_{cfg.model_type}")
    layer_cls = getattr(modeling, spec["layer"])
    cache: dict = {}

    def factory(s: int, b: int, **dims):
        key = tuple(sorted(dims.items()))
        if key not in cache:
            overrides = {spec["dims"][name]: value for name, value in dims.items()}
            c = cfg.__class__(**{**cfg.to_dict(), **overrides})
            if getattr(c, "head_dim", None) is not None:  # derived from h and a, not a free width here
                c.head_dim = c.hidden_size // c.num_attention_heads
            c._attn_implementation = cfg._attn_implementation
            if hasattr(cfg, "_experts_implementation"):
                c._experts_implementation = cfg._experts_implementation
            torch.manual_seed(seed)
            layer = layer_cls(c, layer_idx=0)
            with torch.no_grad():  # some weights (Mixtral's router, experts) are torch.empty until a model inits them
                for param in layer.parameters():
                    if param.dim() > 1:
                        param.normal_(0.0, 0.02)
            layer = layer.to(getattr(torch, dtype))
            rotary = getattr(modeling, spec["rotary"])(c) if spec["rotary"] else None
            cache.clear()
            cache[key] = (layer, rotary, c)
        layer, rotary, c = cache[key]
        torch.manual_seed(seed + 1)
        x = torch.randn(b, s, c.hidden_size if spec["rotary"] else c.n_embd, dtype=getattr(torch, dtype),
                        requires_grad=True)
        kwargs = {}
        if rotary is not None:
            positions = torch.arange(s)[None].expand(b, s)
            kwargs = {"position_embeddings": rotary(x, positions), "attention_mask": None}
        return layer, (x,), kwargs

    return factory


@dataclass(frozen=True)
class FitProblem:
    """A layer to fit (``factory``), where (``points``), in which monomials
    (``basis``), and what the inventory declares for it: saved bytes, forward
    and backward FLOPs."""

    factory: Callable[..., tuple]
    points: list
    basis: list
    saved: Expr
    forward: Expr
    backward: Expr


def llama_layer_fit_problem() -> FitProblem:
    """HF's ``LlamaDecoderLayer`` (sdpa attention, GQA, bf16) at distinct small
    (s, b, h, a, g, f): the trace-fit the tests check and the benchmark times."""
    from .core.dims import a, b, f, g, h, s
    from .ledgers.activations import total_bytes
    from .models.architectures import llama

    cfg = hf_config({"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "intermediate_size": 48}, "sdpa")
    saved = total_bytes(llama.saved_tensors())
    layer_mm = llama.matmuls().select("layer")
    forward = Add(*(mm.forward_flops for mm in layer_mm))
    backward = Add(*(mm.backward_flops for mm in layer_mm)) + llama.fused_backward_recompute(layer_mm)
    basis = basis_of(saved, forward, backward)
    points = design_points(basis, {s: [3, 4, 5], b: [2, 3], h: [24, 48, 96], a: [2, 4, 6], g: [1, 2],
                                   f: [16, 40]}, lambda p: p[h] % p[a] == 0 and p[a] % p[g] == 0)
    return FitProblem(hf_layer_factory(cfg), points, basis, saved, forward, backward)


def hf_declared(cfg, backend: str = "cpu", dtype: str = "bfloat16"):
    """The declared (saved tensors, matmuls) inventories for a transformers
    config, and the FLOPs the attention kernel adds to backward.

    ``dtype="float32"``: activations in fp32; HF's eager attention then casts
    the fp32 softmax to fp32 — a no-op — so the probabilities are the softmax
    output, one tensor, and the ``attention/probabilities`` term goes.
    """
    saved, mms, extra = _hf_declared(cfg, backend)
    if dtype == "float32":
        from .layout.strategies import activation_dtype
        saved = activation_dtype(saved, "fp32")
        if cfg.model_type != "gpt2":
            saved = saved.map(lambda x: None if x.name == "attention/probabilities" else x, "fp32: one softmax tensor")
    return saved, mms, extra


def _hf_declared(cfg, backend: str):
    from .models.architectures import ARCHITECTURES, gpt, llama, moe
    from .models.architectures import conventions as conv

    arch = HF_MODELS[cfg.model_type]["arch"]
    attention = "explicit" if cfg._attn_implementation == "eager" else "fused"
    if arch == "gpt":
        if cfg._attn_implementation != "eager":
            raise ValueError("GPT-2 is declared for eager attention only (attn_implementation='eager')")
        return conv.with_conventions(gpt.saved_tensors(), backend), gpt.matmuls(), Integer(0)
    module = ARCHITECTURES[arch]
    if arch == "moe" and cfg.model_type == "qwen2_moe":
        from dataclasses import replace
        style = replace(moe.QWEN2_MOE, renormalize=bool(cfg.norm_topk_prob))
        saved = moe.saved_tensors(attention=attention, style=style)
        mms = moe.matmuls(style=style)
    elif arch == "moe":
        saved = moe.saved_tensors(shared_experts=0, attention=attention)
        mms = moe.matmuls(shared_experts=0)
    else:
        saved, mms = llama.saved_tensors(attention=attention), module.matmuls()
    extra = llama.fused_backward_recompute(mms) if attention == "fused" else Integer(0)
    return saved, mms, extra


#: Keys of a saved ``config.json`` that are not the config class's fields (metadata, symbolic's own block).
NOT_CONFIG = ("_symbolic", "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map")

#: Per-layer fields transformers derives when a config leaves them out (its configs' ``__post_init__``), and
#: writes out for the file's own layer count when it saves one: ``layer_types`` (one kind per layer), Llama 4's
#: ``no_rope_layers`` (one RoPE flag per layer) and ``moe_layers`` (the MoE layers' indices).
DERIVED_PER_LAYER = ("layer_types", "no_rope_layers", "moe_layers")


def _resized(model_type: str, config: dict, layers: int) -> dict:
    """``config`` (no ``model_type`` key) with ``layers`` layers, every per-layer field consistent
    (:func:`symbolic.models.hf_fields.resized`). Built with more layers than the file has, a field of
    :data:`DERIVED_PER_LAYER` that is the family's default pattern for the file's own count (a one-layer file as
    transformers saves it: Llama 4's ``no_rope_layers`` [1] and ``moe_layers`` [0]) is left out, so transformers
    rebuilds its default for ``layers``; another ``layer_types`` or ``no_rope_layers`` is refused (extending a
    hand-written pattern would guess); another ``moe_layers`` keeps its indices (the new layers dense, as
    transformers reads the list)."""
    from transformers import AutoConfig

    from .models.config import ConfigError
    from .models.hf_fields import resized

    out = resized(dict(config, model_type=model_type), layers)
    out.pop("model_type")
    own = config.get("n_layer" if model_type == "gpt2" else "num_hidden_layers")
    if not isinstance(own, int) or layers <= own:
        return out
    for key in DERIVED_PER_LAYER:
        given = config.get(key)
        if not isinstance(given, list):
            continue
        rest = {name: value for name, value in config.items() if name != key and name not in NOT_CONFIG}
        default = getattr(AutoConfig.for_model(model_type, **rest), key, None)
        if given == list(default or []):
            out.pop(key, None)  # transformers' own pattern for the file's count: rebuilt for ``layers``
        elif key != "moe_layers":
            raise ConfigError(f"{key} {given!r} is not {model_type}'s default pattern for {own} layers "
                              f"({list(default or [])!r}): a model of {layers} layers cannot be built from it without "
                              "guessing; give a config with at least that many layers")
    return out


def resized_config(config: Mapping, layers: int) -> dict:
    """A ``config.json`` dict (with its ``model_type``) as :func:`hf_model` builds it with ``layers`` layers: what
    the bill is read from when a traced layer is set against it."""
    config = dict(config)
    model_type = config.pop("model_type")
    return {**_resized(model_type, config, layers), "model_type": model_type}


def hf_model(config: Mapping, attention: str = "sdpa", layers: int | None = None, dtype: str = "bfloat16",
             seed: int = 0):
    """A tiny causal LM of any family ``AutoConfig`` knows, from a ``config.json`` dict, with
    ``layers`` decoder layers, its weights drawn N(0, 0.02), in ``dtype``, eager experts."""
    torch = _torch()
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()
    from .models.hf import family_of

    config = dict(config)
    model_type = family_of(config)  # Kimi-K2's kimi_k2: built as the deepseek_v3 its architectures names
    config.pop("model_type")
    for key in NOT_CONFIG:
        config.pop(key, None)
    if layers is not None:
        config = _resized(model_type, config, layers)
    cfg = AutoConfig.for_model(model_type, **config)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(cfg, key, None), int) and getattr(cfg, key) >= cfg.vocab_size:
            setattr(cfg, key, None)
    cfg._attn_implementation = attention
    cfg._experts_implementation = "eager"
    # HF's hybrid cache fails on a model without an attention layer (get_seq_length, LFM2's and Qwen3-Next's first
    # layers as their files have them): such a model is built without a cache (what it changes is stated by the
    # family: Qwen3-Next's last chunk state at s ≤ 64)
    types = getattr(cfg, "layer_types", None)
    if types and not {"full_attention", "sliding_attention"} & set(types):
        cfg.use_cache = False
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # some weights (routers, experts) are torch.empty until a checkpoint loads
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    model = model.to(getattr(torch, dtype))
    # what from_pretrained(dtype=...) keeps in fp32 (DeepSeek's router weight and bias): kept so here too
    strict = getattr(model, "_keep_in_fp32_modules_strict", None) or []
    with torch.no_grad():
        for name, tensor in itertools.chain(model.named_parameters(), model.named_buffers()):
            if any(part in name.split(".") or name.endswith(part) for part in strict):
                tensor.data = tensor.data.float()
    return model


def hf_layer_by_difference(config: Mapping, attention: str, s: int, b: int, layers: int = 1,
                           seed: int = 0, checkpointing: bool = False) -> tuple[int, int, int]:
    """(saved bytes, forward FLOPs, backward FLOPs) of one decoder layer of ``config``: the
    model with ``layers + 1`` layers less the model with ``layers`` (same weights drawn from the
    same seed), so the embeddings, rotary tables, masks, final norm and loss cancel. The last
    layer is the one measured (DeepSeek's first_k_dense_replace picks its kind). ``checkpointing``:
    HF's activation checkpointing (``torch.utils.checkpoint``, non-reentrant) on every layer — full
    recompute as it runs."""
    torch = _torch()
    results = []
    for n in (layers, layers + 1):
        model = hf_model(config, attention, layers=n, seed=seed)
        if checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        torch.manual_seed(seed + 1)
        ids = torch.randint(0, model.config.vocab_size, (b, s))
        trace = trace_module(model, (), {"input_ids": ids}, custom_flops=flop_fixes(),
                             output=lambda out: out.logits.float().sum())
        results.append((trace.saved_bytes, trace.forward_total, trace.backward_total))
    return tuple(big - small for big, small in zip(results[1], results[0]))


def hf_family_declared(config: Mapping, attention: str = "sdpa", backend: str = "cpu", dense: bool = False,
                       nope: bool = False, seq: int | None = None, windowed: bool | None = None,
                       kinds: tuple = (), mamba: bool | None = None, layers: int = 1):
    """(saved tensors, layer matmuls, the FLOPs the kernel adds to backward, values) of one decoder
    layer of a ``config.json`` dict of any family :mod:`symbolic.models.hf` reads, as the bill
    declares it for HF's ``attention`` (``sdpa`` or ``eager``) on ``backend``.

    sdpa is the fused kernel, eager the explicit one; MLA under sdpa on CPU is SDPA's math path
    when V is not as wide as Q and K (the CPU flash kernel needs equal widths). ``dense``: for a
    model with dense-first layers, the dense layer (L_d = L), else an MoE layer (L_d = 0); ``nope``:
    for a model with NoPE layers (Llama 4), a NoPE layer (L_n = L), else a RoPE one (L_n = 0); the
    values have L = 1. ``windowed``: the measured layer (the second of two) has a sliding window (None:
    as the config's rule gives it, :mod:`symbolic.models.windows`); with ``seq`` ≥ w, HF's SDPA path on it
    runs with the window's mask materialised (the ``masked`` kernel). ``kinds``: Gemma 3n's letters of the
    measured layer's kinds (``L_kv``: KV-shared, ``L_sp``: sparse; = L when named, else 0). ``mamba``: for
    a hybrid with Mamba layers (Granite-4.0-H), a Mamba layer (L_s = L), else an attention one (L_s = 0) —
    None: the kind of the config's last layer (``layer_types``; none given: every layer Mamba).
    A hybrid's kinds of layer (:data:`symbolic.models.layer_kinds.LAYER_KINDS`) are the measured layer's: the
    kind :func:`hf_layer_by_difference` adds to a model of ``layers`` layers.
    """
    from .models import hf
    from .models.architectures import composed, conventions, gpt, llama, moe

    model = hf.from_hf_dict(dict(config), "traced")
    kernel = "explicit" if attention == "eager" else "fused"
    if model.recipe is not None:
        widths = dict(model.dims)
        if model.recipe.attention == "mla" and kernel == "fused" and widths["d_v"] != widths["d_n"] + widths["d_r"]:
            kernel = "math"
        # Falcon's multi_query passes one K/V head to SDPA without enable_gqa: torch's math path
        if model.recipe.falcon_core and kernel == "fused" and not model.recipe.kv_materialized and model.kv_heads:
            kernel = "math"
        # dropout on the probabilities: torch SDPA on CPU has no fused kernel with dropout and takes its math path
        if model.recipe.attention_dropout and kernel == "fused" and conventions.conventions(backend).name == "cpu":
            kernel = "math"
        if model.recipe.window:
            if windowed is None:  # the second layer of two is windowed if the two-layer model has one more
                windowed = (dict(hf.from_hf_dict(resized_config(config, 2), "traced").dims).get("L_w", 0)
                            > dict(hf.from_hf_dict(resized_config(config, 1), "traced").dims).get("L_w", 0))
            if windowed and kernel == "fused" and seq is not None and seq >= widths["w"]:
                kernel = "masked"
        saved = composed.saved_tensors(model.recipe, kernel, backend)
        mms = composed.matmuls(model.recipe, kernel, backend)
    elif model.arch == "llama":
        saved, mms = llama.saved_tensors(attention=kernel), llama.matmuls()
    elif model.arch == "moe":
        saved, mms = moe.saved_tensors(shared_experts=0, attention=kernel), moe.matmuls(shared_experts=0)
    else:
        saved = conventions.with_conventions(gpt.saved_tensors(activation=model.mlp), backend)
        mms = gpt.matmuls()
    layer = mms.select("layer")
    extra = Add(*(mm.forward_flops for mm in layer if mm.name.endswith("attention/scores"))) \
        if kernel in ("fused", "masked") else Integer(0)
    values = model.values()
    values["L"] = 1
    if "L_w" in values:
        values["L_w"] = 1 if windowed else 0
    if "L_d" in values:
        values["L_d"] = 1 if dense else 0
    if "L_n" in values:
        values["L_n"] = 1 if nope else 0
    for letter in ("L_kv", "L_sp"):  # Gemma 3n's layer kinds: the measured layer is of the kinds named
        if letter in values:
            values[letter] = 1 if letter in kinds else 0
    if "L_s" in values:  # a hybrid's measured layer: a Mamba layer (L_s = L) or an attention one
        if mamba is None and "attn_layer_indices" in config:  # Bamba: the attention layers by index
            mamba = config["num_hidden_layers"] - 1 not in (config["attn_layer_indices"] or ())
        elif mamba is None:
            from .models.families.granitemoehybrid import MAMBA
            types = config.get("layer_types") or config.get("layers_block_type")
            mamba = types is None or types[-1] in MAMBA
        values["L_s"] = 1 if mamba else 0
    if "L_a" in values:  # Nemotron-H: the measured (last) block an attention one (L_a = L), else 0
        types = config.get("layers_block_type") or config.get("layer_types") or []
        values["L_a"] = 1 if types and types[-1] in ("full_attention", "attention") else 0
    from .models.layer_kinds import LAYER_KINDS
    if not LAYER_KINDS.keys() & values.keys():  # one kind of layer
        return saved, layer, extra, values
    around = [dict(hf.from_hf_dict(resized_config(config, n), "traced").dims) for n in (layers, layers + 1)]
    for letter in (letter for letter in LAYER_KINDS if letter in values):  # the kind of layer index ``layers``
        values[letter] = around[1].get(letter, 0) - around[0].get(letter, 0)
    if sum(around[1].get(letter, 0) for letter in LAYER_KINDS) == layers + 1 and config.get("use_cache") is not False:
        # no attention layer: hf_model builds the model without a cache (HF's fails), as use_cache false declares it
        return hf_family_declared({**config, "use_cache": False}, attention, backend, dense, nope, seq=seq,
                                  windowed=windowed, kinds=kinds, mamba=mamba, layers=layers)
    return saved, layer, extra, values
