"""Forms of one expression, the same value written otherwise: the way the papers write it (a leading
monomial times a bracket of ratios, e.g. ``s*b*h*(10 + 24/t + 5*a*s/(h*t))``, :func:`paper_form`), and
with each sum's common factors pulled out for fewer operations (:func:`nested_form`, the plan's kernels)."""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import gcd, lcm

from sympy import Add, Dummy, Expr, Integer, Mul, Number, Rational, default_sort_key, expand, latex

from .dims import LATEX_NAMES, L, b, h, s, t

#: Leading factors the papers pull out, tried in order (each also over t).
_BASES = (s * b * h * L, b * s * L * h**2, s * b * h, b * s * h**2, L * h**2)
LEADS = tuple(lead for base in _BASES for lead in (base, base / t))


def paper_form(expr: Expr) -> Expr:
    """``lead * (expr/lead)`` unevaluated, for the first lead whose quotient
    has a constant term; otherwise ``expr`` expanded."""
    expanded = expand(expr)
    for lead in LEADS:
        quotient = expand(expanded / lead)
        terms = Add.make_args(quotient)
        if len(terms) > 1 and any(isinstance(term, Number) for term in terms):
            return Mul(lead, quotient, evaluate=False)
    return expanded


def to_latex(expr: Expr) -> str:
    return latex(expr, symbol_names=LATEX_NAMES)


def nested_form(expr: Expr) -> Expr:
    """``expr`` with each sum's common factors pulled out, greedily (a multivariate Horner form): the
    same value, fewer operations to evaluate it term by term. The parameter count
    ``12*L*h**2 + 13*L*h + V*h + h*s + 2*h`` (12 operations as written) becomes
    ``h*(L*(12*h + 13) + V + s + 2)`` (7).

    Of a sum's terms, those holding the factor (a letter to a positive power, or over it) whose pulling
    out saves the most operations are taken together, their common monomial and their coefficients'
    common factor written once in front of the sum of their quotients; the quotients and the other
    terms are nested the same way. Ties go to the factor more terms hold, then to the first in sympy's
    canonical order, so the form is the same in every process.
    A ``ceiling``'s argument is left as it is (its floats decide whole bytes at an integer's edge); any
    other function's arguments are nested. Exact: ``expand(nested_form(e) - e) == 0``
    (``tests/test_forms.py``)."""
    return _nested(expr)


@lru_cache(maxsize=1 << 12)
def _nested(expr: Expr) -> Expr:
    """:func:`nested_form`, memoised: a plan's groups share most ledgers and their parts."""
    from sympy import ceiling

    if expr.is_Atom or isinstance(expr, ceiling):
        return expr
    if expr.is_Add:
        return _nested_sum([_monomial(term) for term in expr.args])
    args = tuple(_nested(arg) for arg in expr.args)
    if expr.is_Function:  # Max(...): its arguments' order proven once already, not again
        return expr.func(*args, evaluate=False)
    return expr.func(*args)


def _monomial(term: Expr) -> tuple:
    """A term as (its rational coefficient as a Fraction, {base: integer exponent}); a base that is not a
    letter (a function of letters, a sum) nested in turn."""
    coefficient, rest = term.as_coeff_Mul()
    if not coefficient.is_Rational:
        coefficient, rest = Integer(1), term
    coefficient = Fraction(int(coefficient.p), int(coefficient.q))
    powers: dict = {}
    for factor in Mul.make_args(rest):
        base, exponent = factor.as_base_exp()
        if not exponent.is_Integer:  # a fractional or symbolic power: one factor as it stands
            base, exponent = factor, Integer(1)
        base = base if base.is_Atom else _nested(base)
        powers[base] = powers.get(base, 0) + int(exponent)
    return coefficient, {base: e for base, e in powers.items() if e}


def _nested_sum(terms: list) -> Expr:
    """The sum of ``terms`` ((coefficient, powers) each), the factor whose pulling out saves the most
    operations pulled out first (none: the plain sum)."""
    if len(terms) == 1:
        return _product(*terms[0])
    counts: dict = {}
    for _, powers in terms:
        for base, exponent in powers.items():
            key = (base, exponent > 0)
            counts[key] = counts.get(key, 0) + 1
    best = None
    costs = [_cost(*term) for term in terms]
    # The factors most terms hold are tried (a few: each try costs a pass over the terms), the first in
    # sympy's canonical order among equals.
    tried = sorted((key for key, n in counts.items() if n > 1),
                   key=lambda key: (-counts[key], _order(key[0]), not key[1]))
    for key in tried[:_TRIED]:
        holding, others, saved = [], [], 0
        for term, cost in zip(terms, costs):
            exponent = term[1].get(key[0], 0)
            if exponent and (exponent > 0) == key[1]:
                holding.append(term)
                saved += cost
            else:
                others.append(term)
        lead, quotients = _common(holding)
        # Operations saved: the holding terms' own, less their quotients' and one product with the lead.
        gain = saved - sum(_cost(*q) for q in quotients) - _cost(lead[0], {**lead[1], _SUM: 1})
        if gain > 0 and (best is None or (gain, len(holding)) > best[0]):
            best = ((gain, len(holding)), lead, quotients, others)
    if best is None:
        return Add(*(_product(*term) for term in terms))
    _, (scale, common), quotients, others = best
    inner = _nested_sum(quotients)
    lead = _product(scale, common)
    part = Mul(lead, inner, evaluate=False) if lead.is_Number and inner.is_Add else lead * inner
    return part if not others else Add(part, _nested_sum(others))


#: Factors tried at each sum (those most of its terms hold).
_TRIED = 6
#: A stand-in for a sum in :func:`_cost`: one more factor of a product.
_SUM = Dummy("sum")


def _common(holding: list) -> tuple:
    """The lead (coefficient, powers) the ``holding`` terms share — each factor every term has with the same
    sign of exponent, to the smallest power, and their coefficients' common factor — and their quotients."""
    common = {}
    for factor in holding[0][1]:
        exponents = [powers.get(factor, 0) for _, powers in holding]
        if all(e > 0 for e in exponents) or all(e < 0 for e in exponents):
            common[factor] = min(exponents, key=abs)
    scale = _gcd(*(abs(c) for c, _ in holding))
    if all(c < 0 for c, _ in holding):
        scale = -scale
    quotients = [(c / scale, {f: e - common.get(f, 0) for f, e in powers.items() if e != common.get(f, 0)})
                 for c, powers in holding]
    return (scale, common), quotients


def _cost(coefficient, powers: dict) -> int:
    """Operations to evaluate a monomial as it prints (``c*x*y**2/(z*w)``): a product of the numerator's
    factors (the coefficient one unless ±1), of the denominator's, a division, a power each."""
    over = sum(1 for e in powers.values() if e > 0) + (abs(coefficient) != 1)
    under = sum(1 for e in powers.values() if e < 0)
    powers_cost = sum(1 for e in powers.values() if abs(e) > 1)
    return max(over - 1, 0) + max(under - 1, 0) + (under > 0) + powers_cost


def _product(coefficient: Fraction, powers: dict) -> Expr:
    return Mul(Rational(coefficient.numerator, coefficient.denominator),
               *(base**exponent for base, exponent in powers.items()))


def _gcd(*fractions: Fraction) -> Fraction:
    """The largest rational dividing each of ``fractions`` a whole number of times."""
    return Fraction(gcd(*(x.numerator for x in fractions)), lcm(*(x.denominator for x in fractions)))


@lru_cache(maxsize=1 << 12)
def _order(base: Expr) -> tuple:
    """sympy's canonical sort key of a factor (the tie-break), computed once per factor."""
    return default_sort_key(base)
