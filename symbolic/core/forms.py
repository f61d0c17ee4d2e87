"""Printing an expression the way the papers write it: a leading monomial
times a bracket of ratios, e.g. ``s*b*h*(10 + 24/t + 5*a*s/(h*t))``."""
from __future__ import annotations

from sympy import Add, Expr, Mul, Number, expand, latex

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
