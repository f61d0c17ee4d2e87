"""nested_form: each sum's common factors pulled out — the same expression, fewer operations — on the
plan's ledgers (dense, context-parallel, MoE, uneven stages, LoRA) and on small cases."""
from sympy import Max, Symbol, ceiling, count_ops, expand, sstr

from symbolic.core.dims import L, V, a, b, h, p, s, t
from symbolic.core.forms import nested_form
from symbolic.layout.layout import Layout
from symbolic.models.hf import builtin_models
from symbolic.search.plan import Group


def _same(x, y) -> bool:
    return expand(x - y) == 0


def test_the_parameter_count_in_horner_form():
    psi = 12 * L * h**2 + 13 * L * h + V * h + h * s + 2 * h
    nested = nested_form(psi)
    assert _same(nested, psi)
    assert sstr(nested) == "h*(L*(12*h + 13) + V + s + 2)"
    assert count_ops(nested) == 7 < count_ops(psi) == 12


def test_activations_over_common_factors():
    m = Symbol("m", positive=True)
    acts = 10 * s * b * h * L * m / p + 24 * s * b * h * L * m / (p * t) + 5 * a * s**2 * b * L * m / (p * t)
    nested = nested_form(acts)
    assert _same(nested, acts)
    assert count_ops(nested) < count_ops(acts)
    assert nested.is_Mul  # one product: the common monomial L·b·m·s/p times a sum


def test_coefficients_common_factor_and_signs():
    x, y, z = Symbol("x"), Symbol("y"), Symbol("z")
    for expr in (6 * x * y + 9 * x * z, -6 * x * y - 9 * x * z, x * y - x * z + 3, x / y + z / y + x,
                 Max(x * y + x * z, 2 * x) + y, x**2 * y + x**3, 1 / x + 1 / (x * y)):
        assert _same(nested_form(expr), expr), expr
        assert count_ops(nested_form(expr)) <= count_ops(expr), expr


def test_a_ceiling_is_left_as_it_stands():
    x, y = Symbol("x"), Symbol("y")
    inside = x * y + x * 3
    expr = ceiling(inside / 7) + x * y + x
    nested = nested_form(expr)
    assert _same(nested, expr) and nested.has(ceiling(inside / 7))


def test_every_ledger_of_the_plans_groups_keeps_its_value():
    groups = [Group(sp=sp, recompute=rc, zero=z, schedule="1f1b", cp=cp)
              for sp in (False, True) for rc in ("none", "selective", "full") for z in (0, 3) for cp in (False, True)]
    groups += [Group(recompute="selective", zero=1, schedule="1f1b", uneven=True),
               Group(sp=True, zero=1, schedule="1f1b", lora=("all-linear", "nf4", True)),
               Group.of(builtin_models()["mixtral-8x7b"], Layout(tp=2, pp=2, ep=4, dp=4, sp=True, zero=1))]
    fewer = 0
    for group in groups:
        exprs = group.expressions()
        ledgers = [exprs["params"], exprs["model_states_bytes"], exprs["activation_bytes"],
                   exprs["flops_per_micro_batch"], *(x for _, x in exprs["peak_candidates"])]
        for expr in ledgers:
            nested = nested_form(expr)
            assert _same(nested, expr), (group, expr)
            assert count_ops(nested) <= count_ops(expr), (group, expr)
            fewer += count_ops(nested) < count_ops(expr)
            assert sstr(nested_form(expr)) == sstr(nested)  # the same form every time
    assert fewer > len(groups)
