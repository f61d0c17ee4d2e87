"""Symbolic limits: the largest micro-batch or sequence length that fits, solved exactly.

The memory per GPU of a layout — the bill's verdict ``total_bytes``, the peak
of the step on the busiest stage — is the largest of the candidate instants of
:mod:`symbolic.ledgers.peak`, each a polynomial in b (linear) and in s
(quadratic: the attention scores are s×s; linear too with learned positions
through the parameter count), every coefficient non-negative. The maximum is
at most the usable memory exactly when every candidate is, so
:func:`solve_limit` substitutes every other dimension, solves ``candidate =
gpu_memory − margin`` for the positive root of each with sympy, keeps the
smallest bound (the binding instant), takes the largest integer at or below it
(an instant with a rounding term — ``ceiling(s/8)``, a loss kernel's chunk —
is no polynomial: :func:`_largest_integer` brackets it with the ceilings
relaxed both ways and bisects on the exact expression)
that makes a valid layout (s a multiple of t under sequence parallelism, b·d
dividing a given global batch), and checks the answer with
:func:`symbolic.bill.derive.make_bill`: the answer fits, and the next valid value does
not. With a pipeline and a fixed global batch the chunks in flight depend on b
(m = B/(b·d)): then the valid micro-batches (b·d dividing B) are few and are
checked with the bill one by one, smallest first (the memory does not
decrease with b: b·min(m, p) = min(B/d, b·p)).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sympy import Dummy, Eq, Expr, Integer, Rational, ceiling, expand, floor, solve, sstr

from ..core.dims import Psi, b, s
from ..core.numeric import substitute
from ..layout.layout import Layout
from ..layout.recipes import RECIPES
from ..models.config import ConfigError, ModelConfig, positive_int
from ..ledgers.transients import CommSettings
from .formulas import Group, _check_arch
from .verdict import layout_values

#: What can be solved for: the layout field and its dimension symbol.
TARGETS = {"micro_batch": b, "seq": s}
#: How far past the answer to look for the next valid value (s steps by t under SP).
_SEARCH = 1 << 16
#: The stated range of an answer: a limit above it means a memory no training GPU has (refused, not searched).
MAX_ANSWER = {"micro_batch": 10**6, "seq": 10**8}


@dataclass
class Limit:
    """The answer and how it was found and checked."""

    model: ModelConfig
    target: str                 #: "micro_batch" or "seq"
    answer: int | None          #: largest valid value that fits; None if the smallest valid one does not
    bound: int | None           #: largest integer satisfying the inequality (validity aside)
    root: Expr | None           #: the exact positive root of total = usable
    polynomial: Expr            #: memory per GPU in the target, bytes, other dimensions substituted
    symbolic: Expr              #: memory per GPU in the papers' letters (Psi: the count the states use)
    gpu_memory: int
    margin: int
    layout: Layout              #: the layout at the answer (or at the smallest valid value)
    total_at_answer: object     #: make_bill's total_bytes there
    next_value: int | None      #: the next valid value above the answer (None: there is none)
    total_at_next: object       #: make_bill's total_bytes there
    params_hand: int | None = None
    instant: str = ""           #: the binding candidate instant (its polynomial is ``polynomial``)
    bracket: tuple | None = None  #: (lower, upper) from the ceilings relaxed both ways, when the instant rounds
    #: when nothing fits: the first lever of the bill's fix list at the smallest valid value that makes the
    #: target reachable (:func:`reachable_with`), or None when no lever does
    lever: "Reachable | None" = None
    #: where the layers do not divide over p and no split was given: each of Megatron's uneven splits searched
    #: (``stages.balanced_splits``) as (first_stage_layers, last_stage_layers, its answer); the layout is the best's
    splits: tuple = ()

    @property
    def usable(self) -> int:
        return self.gpu_memory - self.margin

    @property
    def symbol(self):
        return TARGETS[self.target]

    def inequality(self) -> str:
        return f"{sstr(self.polynomial)} <= {self.usable}"

    def answer_fits(self) -> bool:
        return bool(Rational(self.total_at_answer) <= self.usable)

    def next_fits(self) -> bool | None:
        return None if self.next_value is None else bool(Rational(self.total_at_next) <= self.usable)


@dataclass
class Reachable:
    """A lever that makes a target reachable when nothing fits: the bill's fix (``symbolic.bill.levers``)
    at the smallest valid value, and the answer solve gives with it applied."""

    levers: tuple[str, ...]     #: the lever names, as the bill's fix list prints them
    flags: tuple[str, ...]      #: the flags that make it, appended to the command as written
    answer: int                 #: the largest value that fits with it (solve on the changed layout)
    total_bytes: object         #: the bill's total there, with the lever
    cost: str                   #: the fix's cost in words


def memory_exprs(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> list[tuple[str, Expr, Expr]]:
    """The verdict's candidate instants: (label, bytes with Psi, the same with Psi replaced by the count
    the bill uses for the states), the chunks in flight and the communication buffers substituted."""
    exprs = Group.of(model, layout).expressions()
    psi = exprs["params"] if params_hand is None else Integer(params_hand)
    values = layout_values(model, layout)
    fixed = {key: val for key, val in values.items() if not isinstance(key, str) or key in ("m", "L_m")}
    comm = sum(size for _, size in CommSettings().items(layout))
    out = []
    for label, expr in exprs["peak_candidates"]:
        with_psi = substitute(expr, fixed) + comm
        out.append((label, with_psi, with_psi.xreplace({Psi: psi})))
    return out


def memory_expr(model: ModelConfig, layout: Layout, params_hand: int | None = None) -> tuple[Expr, Expr]:
    """The papers' total (model states + first-stage activations): (with Psi, Psi replaced)."""
    exprs = Group.of(model, layout).expressions()
    with_psi = substitute(exprs["model_states_bytes"] + exprs["activation_bytes"],
                          {"m": layout.in_flight("first")})
    psi = exprs["params"] if params_hand is None else Integer(params_hand)
    return with_psi, with_psi.xreplace({Psi: psi})


def solve_limit(model: ModelConfig, layout: Layout, target: str, gpu_memory: int, margin: int = 0,
                params_hand: int | None = None, offer_lever: bool = True) -> Limit:
    """The largest ``target`` (``micro_batch`` or ``seq``) for which ``layout`` fits
    ``gpu_memory − margin`` bytes per GPU; the layout's own value of the target is ignored. When
    nothing fits and ``offer_lever``: :attr:`Limit.lever`, what would make it reachable."""
    from ..bill.derive import make_bill
    from ..layout.stages import balanced_splits

    _check_arch(model)
    splits = (balanced_splits(model.layers, layout.pp) if layout.pp > 1 and not layout.uneven_stages
              and model.layers % layout.pp else ())
    if splits:
        # Megatron-Core's uneven first/last stages, each split whose fullest stage holds ⌈L/p⌉ layers: the one with
        # the largest answer (ties: the first found), and what each gave
        found = []
        for first, last in splits:
            try:
                found.append(solve_limit(model, replace(layout, first_stage_layers=first, last_stage_layers=last),
                                         target, gpu_memory, margin, params_hand, offer_lever))
            except ConfigError:  # this split refused (an interleave that does not divide a stage's count)
                continue
        if not found:
            raise ConfigError(f"no uneven split of {model.layers} layers over pp {layout.pp} is valid for this "
                              "layout (Megatron-Core's first/last-stage layers, the fullest stage "
                              f"{-(-model.layers // layout.pp)} layers): give --first-stage-layers/--last-stage-layers")
        best = max(found, key=lambda limit: -1 if limit.answer is None else limit.answer)
        best.splits = tuple((item.layout.first_stage_layers, item.layout.last_stage_layers, item.answer)
                            for item in found)
        return best
    # LoRA, a quantised base, offload and activation offload are the plan's group expressions
    # (search.plan.lever_expressions); the bill's rules for them apply (Layout.validate, make_bill)
    if layout.moe_dispatcher != "hf" or layout.moe_pad_to_capacity or (
            layout.optimizer in RECIPES and RECIPES[layout.optimizer].factored):
        raise ConfigError("solve does not model --moe-dispatcher alltoall, --moe-pad-to-capacity or a factored "
                          "optimizer yet; `symbolic bill` itemises them")
    if target not in TARGETS:
        raise ConfigError(f"--max must be one of micro-batch, seq; not {target!r}")
    positive_int("gpu_memory", gpu_memory)
    if not 0 <= margin < gpu_memory:
        raise ConfigError(f"margin ({margin:,} B) must be at least 0 and below the GPU memory ({gpu_memory:,} B)")
    usable = gpu_memory - margin
    symbol = TARGETS[target]
    # The smallest valid value: s must be a multiple of c (of t·c under SP); validate raises
    # the error naming any other field that is wrong.
    smallest = layout.cp * (layout.tp if layout.sp else 1) if target == "seq" else 1
    layout = replace(layout, **{target: smallest}).validate(model)
    x = Dummy(symbol.name, positive=True)
    values = {k: val for k, val in layout.values(model).items() if k != symbol.name}
    if target == "micro_batch" and layout.pp > 1 and layout.global_batch:
        limit = _search_micro_batch(model, layout, gpu_memory, margin, params_hand)
        if limit.answer is None and offer_lever:
            limit.lever = reachable_with(model, limit.layout, target, gpu_memory, margin, params_hand)
        return limit
    binding = None  # (key, bound, label, with_psi, polynomial, root): the candidate with the smallest bound
    for label, with_psi, total in memory_exprs(model, layout, params_hand):
        polynomial = expand(substitute(total, values).xreplace({symbol: x}))
        if polynomial.free_symbols - {x}:
            raise ConfigError(f"cannot solve for {target}: {polynomial.free_symbols - {x}} left in the memory")
        candidate = _largest_integer(polynomial, x, usable, MAX_ANSWER[target])
        # Smallest bound first; between instants that bound it equally (above all when nothing fits,
        # bound 0), the one most over the memory at the smallest value is the one to show.
        key = (float("inf") if candidate[0] is None else candidate[0], -polynomial.xreplace({x: smallest}))
        if binding is None or key < binding[0]:
            binding = (key, candidate[0], label, with_psi, polynomial, candidate[1], candidate[2])
    _, bound, instant, with_psi, polynomial, root, bracket = binding
    bound = bound or None  # 0: not even the smallest value fits (b and s are positive)
    if bound is not None and bound > MAX_ANSWER[target]:
        raise ConfigError(f"the largest {target.replace('_', '-')} that fits ({bound:,}) is beyond the stated range "
                          f"(at most {MAX_ANSWER[target]:,}): check --gpu-memory ({gpu_memory:,} B)")
    answer = None
    if bound:
        answer = _last_valid(model, layout, target, bound, smallest)
    at = answer if answer is not None else smallest
    at_layout = replace(layout, **{target: at})
    total_at = make_bill(model, at_layout, params_hand=params_hand).totals["total_bytes"]
    if answer is not None and Rational(total_at) > usable and layout.pp > 1 and layout.own_schedule \
            and layout.pipeline_schedule().placement != "loop":
        # a V or DualPipe's pair: the inequality holds the first-order share (search.formulas.PLACED), under the
        # bill's account of rank 0's layers; the largest valid value below it the bill fits, bisected on the bill
        answer, total_at = _bill_bisect(model, layout, target, smallest, answer, usable, params_hand)
        at = answer if answer is not None else smallest
        at_layout = replace(layout, **{target: at})
        if answer is None:
            total_at = make_bill(model, at_layout, params_hand=params_hand).totals["total_bytes"]
    next_value = _first_valid(model, layout, target, at + 1, at + _SEARCH) if answer is not None else None
    total_next = (make_bill(model, replace(layout, **{target: next_value}), params_hand=params_hand)
                  .totals["total_bytes"] if next_value is not None else None)
    polynomial = polynomial.xreplace({x: symbol})
    return Limit(model, target, answer, bound, None if root is None else root.xreplace({x: symbol}),
                 polynomial, with_psi, gpu_memory, margin, at_layout, total_at, next_value, total_next,
                 params_hand, instant, bracket,
                 reachable_with(model, at_layout, target, gpu_memory, margin, params_hand)
                 if answer is None and offer_lever else None)


def reachable_with(model: ModelConfig, layout: Layout, target: str, gpu_memory: int, margin: int,
                   params_hand: int | None) -> Reachable | None:
    """When nothing fits: the bill's lever search (:func:`symbolic.bill.levers.what_would_fit`, its
    order) at the smallest valid value ``layout`` holds, against the usable memory, and for its first
    fix that solve can solve, the largest value that fits with it — "``--zero 3`` would make s = N
    reachable". None: no lever of the bill's makes even the smallest value fit."""
    from ..bill.derive import make_bill
    from ..bill.levers import what_would_fit

    bill = make_bill(model, layout, params_hand=params_hand, gpu_memory=gpu_memory - margin)
    for fix in what_would_fit(bill, params_hand):
        try:
            limit = solve_limit(model, fix.layout, target, gpu_memory, margin, params_hand, offer_lever=False)
        except ConfigError:  # a lever solve does not model (the bill priced it): the next one
            continue
        if limit.answer is not None:
            return Reachable(fix.levers, fix.flags, limit.answer, limit.total_at_answer, fix.cost)
    return None


def _largest_integer(polynomial: Expr, x, usable: int, limit: int = MAX_ANSWER["seq"]
                     ) -> tuple[int | None, Expr | None, tuple | None]:
    """(largest integer x ≥ 0 with polynomial(x) ≤ usable — None when every x is; the positive root;
    the bracket of a rounding expression). 0: not even x → 0 fits (an instant that does not depend on
    x and is over, e.g. the optimizer step).

    A polynomial: sympy's exact positive root, floored, confirmed on the polynomial. An expression with
    ceilings in x (a loss kernel's chunk count, ``ceiling(s/8)``) has no root sympy can solve for
    (``solve`` raises NotImplementedError: "multiple generators"): :func:`_rounded_largest` brackets it
    and bisects on the exact expression. Both assume what the verdict's instants are — non-decreasing
    in x (every coefficient non-negative); the caller's bill check at the answer and the next valid
    value is the judge."""
    if polynomial.xreplace({x: 0}) > usable:
        return 0, None, None
    if x not in polynomial.free_symbols:
        return None, None, None  # constant in x (and ≤ usable): no bound from this instant
    if polynomial.has(ceiling, floor):
        bound, bracket = _rounded_largest(polynomial, x, usable, limit)
        return bound, None, bracket
    try:
        root = _positive_root(polynomial, x, usable)
    except NotImplementedError:  # a form sympy cannot solve (no such instant today): bisect exactly
        bound, bracket = _rounded_largest(polynomial, x, usable, limit)
        return bound, None, bracket
    if root is None:
        return None, None, None  # no positive root: no bound from this instant
    bound = int(floor(root))
    # floor of an algebraic number is exact in sympy; confirm on the polynomial anyway.
    while bound > 0 and polynomial.xreplace({x: bound}) > usable:
        bound -= 1
    while polynomial.xreplace({x: bound + 1}) <= usable:
        bound += 1
    return bound, root, None


def _positive_root(expr: Expr, x, usable: int) -> Expr | None:
    """The largest positive real root of ``expr = usable``, exact (sympy's ``solve``), or None when there is
    none; sympy's NotImplementedError when it cannot solve the form."""
    roots = [r for r in solve(Eq(expr, usable), x) if r.is_real and r.is_positive]
    return max(roots, key=lambda r: r.evalf(50)) if roots else None


def _relaxed_root(expr: Expr, x, usable: int) -> int | None:
    """floor of :func:`_positive_root` of ``expr`` (a polynomial in x), or None (no root, or sympy cannot
    solve it: the bisection then starts from [0, 1])."""
    try:
        root = _positive_root(expr, x, usable)
    except NotImplementedError:
        return None
    return None if root is None else int(floor(root))


def _rounded_largest(expr: Expr, x, usable: int, limit: int) -> tuple[int | None, tuple[int, int]]:
    """The largest integer x ≥ 0 with ``expr(x) ≤ usable`` for a non-decreasing ``expr`` with ceilings
    (or floors) in x, and the bracket it was found in.

    The bracket: ``ceiling(u)`` lies in [u, u + 1) (``floor(u)`` in (u − 1, u]), so with each rounding
    replaced by its argument and by its argument ± 1 the expression becomes two polynomials that
    bound it, whose roots sympy solves exactly; their floors give a lower and an upper guess. The
    guesses are only guesses (a rounding in a denominator turns the bounds around): each is checked on
    the exact expression and widened by doubling until expr(lo) ≤ usable < expr(hi), then integer
    bisection on the exact expression finds the boundary. Still fitting past 2·``limit`` (beyond any
    stated answer): that value, which the caller refuses."""
    def fits(value: int) -> bool:
        return bool(expr.xreplace({x: Integer(value)}) <= usable)

    low_expr = expand(expr.replace(ceiling, lambda u: u).replace(floor, lambda u: u - 1))
    high_expr = expand(expr.replace(ceiling, lambda u: u + 1).replace(floor, lambda u: u))
    guesses = [g for g in (_relaxed_root(high_expr, x, usable), _relaxed_root(low_expr, x, usable)) if g is not None]
    lo = max(0, min(guesses)) if guesses else 0
    hi = max(guesses) + 1 if guesses else 1
    bracket = (lo, hi)
    while lo > 0 and not fits(lo):
        lo //= 2
    hi = max(hi, lo + 1)
    while fits(hi):
        if hi > 2 * limit:
            return hi, bracket  # fits beyond the stated range: the caller refuses the memory
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # fits(lo) (or lo = 0, which fits: checked by the caller), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, bracket


def _search_micro_batch(model, layout, gpu_memory, margin, params_hand) -> Limit:
    """With a pipeline and a fixed global batch: every valid micro-batch (b·d dividing B), checked
    with the bill, smallest first; the answer is the last that fits."""
    from ..bill.derive import make_bill

    usable = gpu_memory - margin
    # b·d must divide B: the divisors of B/d (at most 1,344 below 10^9), not every integer up to B/d
    # (a global batch of 10^9 made that a billion validations); within b's stated range
    candidates = _micro_batches(layout) or []
    valid = [value for value in candidates
             if value <= MAX_ANSWER["micro_batch"] and replace(layout, micro_batch=value).is_valid(model)]
    if not valid:
        raise ConfigError(f"no micro-batch b with b·dp dividing the global batch {layout.global_batch:,} "
                          f"(dp = {layout.dp}) is valid for {model.name}: choose another --global-batch")
    answer, total_at, next_value, total_next = None, None, None, None
    for value in valid:
        total = make_bill(model, replace(layout, micro_batch=value), params_hand=params_hand).totals["total_bytes"]
        if Rational(total) <= usable:
            answer, total_at = value, total
        else:
            next_value, total_next = value, total
            break
    if answer is not None and answer == valid[-1] and max(candidates) > MAX_ANSWER["micro_batch"]:
        raise ConfigError(f"every micro-batch up to {answer:,} fits, and larger ones beyond the stated range (at "
                          f"most {MAX_ANSWER['micro_batch']:,}) may too: check --gpu-memory ({gpu_memory:,} B) "
                          "and --global-batch")
    at = answer if answer is not None else valid[0]
    if answer is None:
        total_at = total_next
        next_value = total_next = None
    with_psi, total = memory_expr(model, replace(layout, micro_batch=at), params_hand)
    return Limit(model, "micro_batch", answer, answer, None, total, with_psi, gpu_memory, margin,
                 replace(layout, micro_batch=at), total_at, next_value, total_next, params_hand,
                 "checked by the bill at each valid micro-batch (the chunks in flight depend on b)")


def _bill_bisect(model, layout, target, smallest: int, above: int, usable: int, params_hand):
    """(the largest valid value in [smallest, above) the bill fits, its total), or (None, None): the bill's
    total grows with b and s, so the valid values bisect."""
    from ..bill.derive import make_bill

    allowed = _micro_batches(layout) if target == "micro_batch" else None
    step = _step(layout, target)
    values = ([value for value in allowed if smallest <= value < above] if allowed is not None else
              list(range(-(-smallest // step) * step, above, step)))
    values = [value for value in values if replace(layout, **{target: value}).is_valid(model)]
    best, total_best = None, None
    lo, hi = 0, len(values) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        total = make_bill(model, replace(layout, **{target: values[mid]}), params_hand=params_hand).totals["total_bytes"]
        if Rational(total) <= usable:
            best, total_best, lo = values[mid], total, mid + 1
        else:
            hi = mid - 1
    return best, total_best


def _step(layout, target) -> int:
    """Valid values of ``target`` are multiples of this (s: of c, of t·c under SP; b: any)."""
    return layout.cp * (layout.tp if layout.sp else 1) if target == "seq" else 1


def _micro_batches(layout) -> list[int] | None:
    """With a global batch, the valid micro-batches are the divisors of B/d (None: any b)."""
    if not layout.global_batch:
        return None
    if layout.global_batch % layout.dp:
        return []
    from .enumeration import divisors
    return divisors(layout.global_batch // layout.dp)


def _first_valid(model, layout, target, start, stop) -> int | None:
    """The smallest value in [start, stop) that makes a valid layout."""
    allowed = _micro_batches(layout) if target == "micro_batch" else None
    if allowed is not None:
        values = [value for value in allowed if start <= value < stop]
    else:
        step = _step(layout, target)
        values = range(-(-start // step) * step, stop, step)
    for value in values:
        if replace(layout, **{target: value}).is_valid(model):
            return value
    return None


def _last_valid(model, layout, target, bound, smallest) -> int | None:
    """The largest value in [smallest, bound] that makes a valid layout (candidates
    by their divisibility rule, not a walk over every integer)."""
    allowed = _micro_batches(layout) if target == "micro_batch" else None
    if allowed is not None:
        values = [value for value in reversed(allowed) if smallest <= value <= bound]
    else:
        step = _step(layout, target)
        values = range(bound - bound % step, smallest - 1, -step)
    for value in values:
        if replace(layout, **{target: value}).is_valid(model):
            return value
    return None
