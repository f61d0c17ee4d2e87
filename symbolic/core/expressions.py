"""A guarded reader for formulas typed as text (claims, cached bills, user options).

The text is parsed with :mod:`ast` and rebuilt node by node: only numbers, the
names given, ``+ - * / **`` (and ``^`` as power), parentheses and sympy's
``Max(...)`` (the largest of its arguments) are accepted.
Nothing is ever passed to ``eval`` or ``sympify``, so a formula cannot call
anything. :func:`parse_formula` builds a sympy expression; :func:`evaluate_formula`
computes an exact :class:`~fractions.Fraction` without importing sympy.
"""
from __future__ import annotations

import ast
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Callable, Mapping

#: Bounds on a power in a formula: the engine's formulas hold s**2, h**2 (exponents ≤ 4); a text that
#: asks for 10**10**10 (a damaged cache entry, a hand-edited file) is refused, not computed for hours.
MAX_EXPONENT = 64
MAX_POWER_BITS = 1 << 20


def _bits(x) -> int | None:
    """Bits of an exact number's numerator/denominator (None for a symbolic one)."""
    numerator, denominator = getattr(x, "numerator", None), getattr(x, "denominator", None)
    if numerator is None:
        numerator, denominator = getattr(x, "p", None), getattr(x, "q", None)
    if not isinstance(numerator, int) or not isinstance(denominator, int):
        return None
    return max(abs(numerator).bit_length(), denominator.bit_length())


def _power(x, y):
    exponent_bits, base_bits = _bits(y), _bits(x)
    if exponent_bits is not None:
        if abs(y) > MAX_EXPONENT:
            raise FormulaError(f"exponent {y} is beyond {MAX_EXPONENT}: not a formula of this engine")
        if base_bits is not None and base_bits * abs(y) > MAX_POWER_BITS:
            raise FormulaError(f"a power of {base_bits} bits to the {y} is beyond {MAX_POWER_BITS:,} bits")
    return x**y


_BINARY = {
    ast.Add: lambda x, y: x + y,
    ast.Sub: lambda x, y: x - y,
    ast.Mult: lambda x, y: x * y,
    ast.Div: lambda x, y: x / y,
    ast.Pow: _power,
}


class FormulaError(ValueError):
    """A formula that is not a plain arithmetic expression in known names."""


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise FormulaError(f"not a number: {text!r}") from None


def _ceiling(x):
    """The least integer ≥ ``x`` (a Fraction)."""
    return -(-x // 1)


def _build(text: str, names: Mapping, number: Callable[[str], object], maximum: Callable = max,
           ceiling: Callable = _ceiling):
    source = text.replace("^", "**")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as error:
        raise FormulaError(f"cannot read formula {text!r}: {error.msg}") from None

    def build(node):
        if isinstance(node, ast.Expression):
            return build(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](build(node.left), build(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = build(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return number(ast.get_source_segment(source, node))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Max"
                and node.args and not node.keywords):
            return maximum(*(build(arg) for arg in node.args))  # sympy's Max
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ceiling"
                and len(node.args) == 1 and not node.keywords):
            return ceiling(build(node.args[0]))  # whole bytes of a first-order share (uneven stages)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise FormulaError(f"unknown name {node.id!r} in {text!r}; known: {', '.join(sorted(names))}")
            return names[node.id]
        raise FormulaError(f"{text!r}: only numbers, names, + - * / **, Max(...) and ceiling(...) are allowed")

    return build(tree)


def parse_formula(text: str, names: Mapping):
    """``text`` as a sympy expression over ``names`` (exact numbers)."""
    from sympy import Integer, Max, Rational, ceiling

    def number(digits: str):
        sign, mantissa_digits, exponent = _decimal(digits).as_tuple()
        mantissa = int("".join(map(str, mantissa_digits))) * (-1 if sign else 1)
        return Integer(mantissa) * Rational(10) ** exponent

    return _build(text, names, number, Max, ceiling)


def evaluate_formula(text: str, values: Mapping[str, int | Fraction]) -> Fraction:
    """``text`` evaluated exactly at ``values`` (dimension letters to numbers)."""
    result = _build(text, {name: Fraction(value) for name, value in values.items()},
                    lambda digits: Fraction(_decimal(digits)))
    return Fraction(result)
