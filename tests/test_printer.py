"""The bill's printer (:func:`symbolic.bill.derive.sstr`), memoised per subexpression, writes sympy's
own text: the cached derivations and plan formulas are byte-identical to ``sympy.sstr``'s."""
from sympy import Float, Max, Rational, Symbol, ceiling, cse, numbered_symbols, sqrt
from sympy import sstr as sympy_sstr

from symbolic.bill import derive
from symbolic.core.dims import L, a, b, h, s, t
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.search.plan import Group


def test_the_memoised_printer_writes_sympys_text():
    x = Symbol("x")
    shared = s * b * h / t
    exprs = [shared, 2 * shared + 3, -shared / (L * a), ceiling(shared / 7) * Rational(5, 3), Max(shared, h ** 2),
             (shared - 1) ** -2, sqrt(shared) - x, Float(2.5) * shared, Float(2.5), x + Float(0.125), -x - 1,
             (x + 1) / (x - 1), x ** Rational(-1, 2)]
    derive._PRINTER._memo.clear()
    for _ in range(2):  # printed fresh, then from the memo
        assert [derive._PRINTER.doprint(e) for e in exprs] == [sympy_sstr(e) for e in exprs]


def test_a_plan_groups_ledgers_print_as_sympy_does():
    """A MoE group's ledgers and their common subexpressions: the texts a plan caches."""
    exprs = Group.of(preset("mixtral-8x7b"), Layout(micro_batch=1, seq=4096, tp=2, pp=2, ep=2)).expressions()
    ledgers = [exprs["model_states_bytes"], exprs["activation_bytes"], exprs["flops_per_micro_batch"],
               *(expr for _, expr in exprs["peak_candidates"])]
    common, reduced = cse(ledgers, symbols=numbered_symbols("cse_"))
    every = ledgers + [expr for _, expr in common] + list(reduced)
    derive._PRINTER._memo.clear()
    assert [derive._PRINTER.doprint(e) for e in every] == [sympy_sstr(e) for e in every]
    assert len(derive._PRINTER._memo) > 0
