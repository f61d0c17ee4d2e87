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
           ceiling: Callable = _ceiling, binary: Mapping = _BINARY, negate: Callable = lambda x: -x):
    source = text.replace("^", "**")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as error:
        raise FormulaError(f"cannot read formula {text!r}: {error.msg}") from None

    def build(node):
        if isinstance(node, ast.Expression):
            return build(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return binary[type(node.op)](build(node.left), build(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = build(node.operand)
            return negate(operand) if isinstance(node.op, ast.USub) else operand
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


class _Name:
    """A name of a compiled formula, looked up when it is evaluated."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


def _compile(text: str):
    """``text`` read once (the same guarded :func:`_build`) into a function of the values: every
    number an exact Fraction, every name looked up at evaluation. Cached by text, so a bill's
    formulas are parsed once per process, not once per configuration."""
    names = _Names(text)

    def closure(x):
        if isinstance(x, _Name):
            return lambda env: names.lookup(env, x.name)
        if callable(x):
            return x
        return lambda env, x=x: x

    def binary(op):
        return lambda a, b: (lambda env, fa=closure(a), fb=closure(b): op(fa(env), fb(env)))

    def number(digits: str):
        value = Fraction(_decimal(digits))
        return value.numerator if value.denominator == 1 else value

    # The same guarded reading (_build), with closures in place of values; integers stay Python ints
    # (exact and fast) and become Fractions only where a division does not come out whole.
    tree = _build(text, names, number,
                  maximum=lambda *args: (lambda env, fs=tuple(closure(a) for a in args): max(f(env) for f in fs)),
                  ceiling=lambda arg: (lambda env, f=closure(arg): _ceiling(f(env))),
                  binary={kind: binary(op) for kind, op in _EXACT.items()},
                  negate=lambda arg: (lambda env, f=closure(arg): -f(env)))
    return closure(tree)


class _Names(dict):
    """Every name is accepted while compiling (the values come later) and checked when evaluated."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def __contains__(self, name) -> bool:
        return True

    def __getitem__(self, name):
        return _Name(name)

    def lookup(self, env, name):
        try:
            return env[name]
        except KeyError:
            raise FormulaError(f"unknown name {name!r} in {self.text!r}; known: {', '.join(sorted(env))}") from None


_COMPILED: dict = {}
#: Compiled formulas kept per process (a bill has a few hundred; a plan's exact totals a few thousand).
COMPILED_MAX = 1 << 16


def _exact_div(x, y):
    if type(x) is int and type(y) is int:
        quotient, remainder = divmod(x, y)
        return quotient if remainder == 0 else Fraction(x, y)
    return Fraction(x) / y


def _exact_power(x, y):
    if type(x) is int and type(y) is int and 0 <= y <= MAX_EXPONENT and abs(x).bit_length() * y <= MAX_POWER_BITS:
        return x**y  # the common case (s**2, h**2): within _power's bounds, no check needed
    value = _power(x, y)
    if type(value) is float:  # an int to a negative int power
        return Fraction(x) ** y
    return value


#: The compiled formulas' operations: exact on ints and Fractions alike (no float ever appears).
_EXACT = dict(_BINARY)
_EXACT.update({ast.Div: _exact_div, ast.Pow: _exact_power})


class ExactValues(dict):
    """Dimension values as Fractions, converted once for many formulas (:func:`exact_values`)."""


def exact_values(values: Mapping[str, int | Fraction]) -> ExactValues:
    """``values`` as Fractions, ready for :func:`evaluate_formula` (a bill evaluates hundreds of
    formulas at one configuration: the conversion is done once)."""
    if isinstance(values, ExactValues):
        return values
    out = ExactValues()
    for name, value in values.items():
        if type(value) is not int:  # an int is exact as it is (the common case: dimensions)
            value = value if isinstance(value, Fraction) else Fraction(value)
            value = value.numerator if value.denominator == 1 else value
        out[name] = value
    return out


def evaluate_formula(text: str, values: Mapping[str, int | Fraction]) -> Fraction:
    """``text`` evaluated exactly at ``values`` (dimension letters to numbers)."""
    function = _COMPILED.get(text)
    if function is None:
        function = _compile(text)
        if len(_COMPILED) >= COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[text] = function
    result = function(exact_values(values))
    return result if type(result) is Fraction else Fraction(result)


def _ast_number(digits: str, constants: dict) -> ast.AST:
    """A number of a formula as an exact constant: an int stays a literal, a decimal becomes a named
    Fraction (``constants``), read from its digits by the same :func:`_decimal` as :func:`evaluate_formula`."""
    value = Fraction(_decimal(digits))
    if value.denominator == 1:
        return ast.Constant(value.numerator)
    name = f"_c{len(constants)}"
    constants[name] = value
    return ast.Name(name, ast.Load())


class _Exact(ast.NodeTransformer):
    """A formula's tree (already accepted by :func:`_build`) rewritten into exact Python: ``/`` and
    ``**`` through the bounded helpers, ``Max`` as ``max``, ``ceiling`` as the exact ceiling, every
    name a local bound once per call."""

    def __init__(self, source: str, constants: dict, names: set):
        self.source, self.constants, self.names = source, constants, names

    def visit_BinOp(self, node):
        self.generic_visit(node)
        helper = {ast.Div: "_div", ast.Pow: "_pow"}.get(type(node.op))
        if helper is None:
            return node
        return ast.Call(ast.Name(helper, ast.Load()), [node.left, node.right], [])

    def visit_Call(self, node):
        node.args = [self.visit(arg) for arg in node.args]
        node.func = ast.Name({"Max": "max", "ceiling": "_ceil"}[node.func.id], ast.Load())
        return node

    def visit_Constant(self, node):
        return _ast_number(ast.get_source_segment(self.source, node), self.constants)

    def visit_Name(self, node):
        self.names.add(node.id)
        return ast.Name("v_" + node.id, ast.Load())


def compile_formulas(texts) -> Callable[[Mapping], tuple]:
    """One function computing every formula of ``texts`` exactly at a mapping of values, in order:
    the numbers :func:`evaluate_formula` gives (ints where whole, Fractions otherwise), without its
    per-formula dispatch. A bill evaluates its few dozen formulas at many configurations: compiled
    once per derivation, each configuration is one call.

    Every text is first accepted by the guarded reader (:func:`_build`: numbers, names, + - * / **,
    Max, ceiling); only that accepted tree is turned into Python, so nothing but arithmetic on the
    given values can run. A text too deep to compile falls back to the per-formula closures."""
    texts = list(texts)
    for text in texts:  # the guard: raises on anything that is not plain arithmetic in names
        _build(text, _Names(text), lambda digits: None, maximum=lambda *args: None, ceiling=lambda arg: None,
               binary={kind: (lambda a, b: None) for kind in _BINARY}, negate=lambda arg: None)
    try:
        formulas = _exact_function(texts)
    except (RecursionError, MemoryError, SyntaxError, ValueError):  # deeper than Python compiles
        compiled = [_compile(text) for text in texts]
        return lambda env: tuple(f(exact_values(env)) for f in compiled)

    def evaluate_all(env: Mapping) -> tuple:
        try:
            return formulas(env)
        except KeyError as missing:
            raise FormulaError(f"unknown name {missing.args[0]!r} in the formulas; known: "
                               f"{', '.join(sorted(env))}") from None

    return evaluate_all


def _exact_function(texts: list[str]):
    """``def formulas(env): v_s, v_b = env["s"], env["b"]; return (<text 0>, <text 1>, ...)``
    built as a tree from the accepted texts (:class:`_Exact`) and compiled."""
    constants: dict[str, Fraction] = {}
    names: set[str] = set()
    bodies = []
    for text in texts:
        source = text.replace("^", "**")
        bodies.append(_Exact(source, constants, names).visit(ast.parse(source, mode="eval").body))
    known = sorted(names)
    function = ast.FunctionDef(
        name="formulas", args=ast.arguments([], [ast.arg("env")], None, [], [], None, []),
        body=[ast.Assign([ast.Tuple([ast.Name("v_" + n, ast.Store()) for n in known], ast.Store())],
                         ast.Tuple([ast.Subscript(ast.Name("env", ast.Load()), ast.Constant(n), ast.Load())
                                    for n in known], ast.Load()))] if known else [],
        decorator_list=[], returns=None)
    function.body.append(ast.Return(ast.Tuple(bodies, ast.Load())))
    module = ast.fix_missing_locations(ast.Module([function], []))
    scope = {"__builtins__": {"max": max}, "_div": _exact_div, "_pow": _exact_power, "_ceil": _ceiling,
             **constants}
    exec(compile(module, "<symbolic formulas>", "exec"), scope)  # the tree built above: arithmetic only
    return scope["formulas"]
