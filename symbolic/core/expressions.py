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
from functools import lru_cache
from itertools import chain
from collections.abc import Callable, Mapping

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
    one_line = source.isascii() and "\n" not in source
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
            digits = (source[node.col_offset:node.end_col_offset] if one_line  # offsets are UTF-8 bytes: ASCII
                      else ast.get_source_segment(source, node))
            return number(digits)
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


class _AnyName(dict):
    """Every name is accepted while reading (the values come later): ``make`` turns each into what
    the reader builds with — a :class:`_Name` for the closures, a local for the compiled source."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __contains__(self, name) -> bool:
        return True

    def __getitem__(self, name):
        return self.make(name)


class _Names(_AnyName):
    """The closures' names: looked up, and checked, when the formula is evaluated."""

    def __init__(self, text: str):
        super().__init__(_Name)
        self.text = text

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


class _Source:
    """Python source of one accepted formula, built by the guarded reader (:func:`_build`) with these
    callbacks in place of values: each returns ``(code, precedence)`` so that parentheses are written
    only where the order needs them (a long sum stays one flat line, never nested parentheses)."""

    ATOM, POWER, PRODUCT, SUM = 4, 3, 2, 1

    def __init__(self, constants: dict, names: set):
        self.constants, self.names = constants, names

    def number(self, digits: str):
        value = Fraction(_decimal(digits))  # a literal is never negative: unary minus is its own node
        if value.denominator == 1:
            return repr(value.numerator), self.ATOM
        name = f"_c{value.numerator}_{value.denominator}".replace("-", "m")  # named by its value: shareable
        self.constants[name] = value
        return name, self.ATOM

    def name(self, name: str):
        self.names.add(name)
        return "v_" + name, self.ATOM

    @staticmethod
    def _wrap(operand, least: int) -> str:
        code, precedence = operand
        return code if precedence >= least else f"({code})"

    def binary(self, kind):
        if kind is ast.Div:
            return lambda a, b: (f"_div({a[0]}, {b[0]})", self.ATOM)
        if kind is ast.Pow:
            # a name squared (s**2, h**2: most powers of the engine's formulas) as a product: the same
            # number and type for an int and a Fraction, without the bounded power's call
            return lambda a, b: ((f"({a[0]} * {a[0]})", self.ATOM) if b[0] == "2" and a[0].startswith("v_")
                                 and a[0].isidentifier() else (f"_pow({a[0]}, {b[0]})", self.ATOM))
        symbol, level = {ast.Add: ("+", self.SUM), ast.Sub: ("-", self.SUM), ast.Mult: ("*", self.PRODUCT)}[kind]
        # left-associative: the left operand may be of the same level unparenthesised, the right not
        return lambda a, b: (f"{self._wrap(a, level)} {symbol} {self._wrap(b, level + 1)}", level)

    def maximum(self, *args):
        return f"max({', '.join(code for code, _ in args)})", self.ATOM

    def ceiling(self, arg):
        return f"_ceil({arg[0]})", self.ATOM

    def negate(self, arg):
        return f"(-{self._wrap(arg, self.POWER)})", self.ATOM


@lru_cache(maxsize=1 << 16)
def _formula_source(text: str) -> tuple[str, frozenset, tuple]:
    """One formula as Python (:class:`_Source`), with the names it reads and the Fractions it names;
    cached by text: derivations of many kinds repeat the same formulas."""
    constants: dict[str, Fraction] = {}
    names: set[str] = set()
    writer = _Source(constants, names)
    code, _ = _build(text, _AnyName(writer.name), writer.number, maximum=writer.maximum, ceiling=writer.ceiling,
                     binary={kind: writer.binary(kind) for kind in _BINARY}, negate=writer.negate)
    return code, frozenset(names), tuple(constants.items())


def _naming_unknown(formulas):
    """``formulas`` (compiled from text the guarded reader wrote), a missing name a :class:`FormulaError`
    naming it and the names there are, not a bare KeyError."""
    def evaluate_all(env: Mapping) -> tuple:
        try:
            return formulas(env)
        except KeyError as missing:
            raise FormulaError(f"unknown name {missing.args[0]!r} in the formulas; known: "
                               f"{', '.join(sorted(env))}") from None

    return evaluate_all


def compile_formulas(texts) -> Callable[[Mapping], tuple]:
    """One function computing every formula of ``texts`` exactly at a mapping of values, in order:
    the numbers :func:`evaluate_formula` gives (ints where whole, Fractions otherwise), without its
    per-formula dispatch. A bill evaluates its few dozen formulas at many configurations: compiled
    once per derivation, each configuration is one call.

    Each text is read by the same guarded reader (:func:`_build`: numbers, names, + - * / **, Max,
    ceiling; anything else is a :class:`FormulaError`), which writes the arithmetic it accepted as
    Python (``/`` and ``**`` through the exact, bounded helpers, names as locals); only that text is
    compiled, so nothing but arithmetic on the given values can run. A text too deep for Python's
    compiler falls back to the per-formula closures."""
    texts = list(texts)
    constants: dict[str, Fraction] = {}
    names: set[str] = set()
    bodies = []
    for text in texts:
        code, its_names, its_constants = _formula_source(text)
        bodies.append(code)
        names.update(its_names)
        constants.update(dict(its_constants))
    known = sorted(names)
    bind = (f"    {', '.join('v_' + n for n in known)}, = {', '.join(f'env[{n!r}]' for n in known)},\n"
            if known else "")
    source = f"def formulas(env):\n{bind}    return ({', '.join(bodies)},)\n"
    scope = {"__builtins__": {"max": max}, "_div": _exact_div, "_pow": _exact_power, "_ceil": _ceiling,
             **constants}
    try:
        exec(compile(source, "<symbolic formulas>", "exec"), scope)  # arithmetic written by _Source only
    except (RecursionError, MemoryError, SyntaxError, ValueError):  # deeper than Python compiles
        compiled = [_compile(text) for text in texts]
        return lambda env: tuple(f(exact_values(env)) for f in compiled)
    return _naming_unknown(scope["formulas"])


@lru_cache(maxsize=1 << 14)
def _formula_function(text: str) -> Callable[[Mapping], object]:
    """One formula compiled alone (the guarded reader's Python, as :func:`compile_formulas` writes it),
    cached by text: the kinds of a bill share most of their formulas (2,000 GPT layouts: 126 kinds,
    108 distinct formulas), so a kind seen for the first time compiles only the texts no kind had."""
    code, names, constants = _formula_source(text)
    known = sorted(names)
    bind = (f"    {', '.join('v_' + n for n in known)}, = {', '.join(f'env[{n!r}]' for n in known)},\n"
            if known else "")
    scope = {"__builtins__": {"max": max}, "_div": _exact_div, "_pow": _exact_power, "_ceil": _ceiling,
             **dict(constants)}
    try:
        exec(compile(f"def formula(env):\n{bind}    return {code}\n", "<symbolic formula>", "exec"), scope)
    except (RecursionError, MemoryError, SyntaxError, ValueError):  # deeper than Python compiles
        closure = _compile(text)
        return lambda env: closure(exact_values(env))
    return scope["formula"]


def formula_functions(texts) -> Callable[[Mapping], list]:
    """Every formula of ``texts`` exactly at a mapping of values, in order: the numbers
    :func:`compile_formulas` gives, each text compiled once per process and shared by every list it
    is in (:func:`_formula_function`) rather than the list compiled as one function. A call is a few
    microseconds slower for a bill's forty formulas; a new list (a bill's kind seen for the first time)
    costs nothing to compile once its texts have been seen, where one function costs about a millisecond."""
    functions = tuple(_formula_function(text) for text in texts)
    return _naming_unknown(lambda env: [function(env) for function in functions])


def _float_maximum(*args):
    import numpy as np
    out = args[0]
    for arg in args[1:]:
        out = np.maximum(out, arg)
    return out


def _float_ceiling(x):
    import numpy as np
    return np.ceil(x)


class _FloatSource(_Source):
    """:class:`_Source` for arrays of floats: every number a float literal (as numpy would convert
    it), so no operation converts a Python int."""

    def number(self, digits: str):
        return repr(float(Fraction(_decimal(digits)))), self.ATOM


@lru_cache(maxsize=1 << 16)
def _array_source(text: str) -> tuple[str, frozenset]:
    """One formula as Python for float arrays (:class:`_FloatSource`), with the names it reads."""
    names: set[str] = set()
    writer = _FloatSource({}, names)
    code, _ = _build(text, _AnyName(writer.name), writer.number, maximum=writer.maximum, ceiling=writer.ceiling,
                     binary={kind: writer.binary(kind) for kind in _BINARY}, negate=writer.negate)
    return code, frozenset(names)


def compile_array_formulas(texts, common=()) -> Callable[[Mapping], tuple]:
    """Every formula of ``texts`` over numpy arrays of floats, in order, after ``common``: (name,
    text) pairs computed first, in order, each readable by name in those after it and in ``texts``
    (common subexpressions, written once). For a plan's sweep, where floats screen and rank.

    The same guarded reader writing Python as for :func:`compile_formulas` (numbers, names,
    + - * / **, Max, ceiling; anything else is a :class:`FormulaError` here, before any
    evaluation), with float literals and float helpers in place of the exact ones: ``/`` true
    division, ``**`` a float power, Max the element-wise maximum, ceiling numpy's. Only that text is compiled. The function
    takes a mapping of every name the formulas read (arrays or floats)."""
    import operator

    texts, common = list(texts), [(str(name), text) for name, text in common]
    read: set[str] = set()
    assigned: set[str] = set()
    lines = []
    for name, text in common:
        if not name.isidentifier():
            raise FormulaError(f"{name!r} is not a name for a common subexpression")
        code, its_names = _array_source(text)
        read.update(its_names - assigned)
        lines.append(f"    v_{name} = {code}\n")
        assigned.add(name)
    bodies = []
    for text in texts:
        code, its_names = _array_source(text)
        read.update(its_names - assigned)
        bodies.append(code)
    known = sorted(read)
    bind = (f"    {', '.join('v_' + n for n in known)}, = {', '.join(f'env[{n!r}]' for n in known)},\n"
            if known else "")
    source = f"def formulas(env):\n{bind}{''.join(lines)}    return ({', '.join(bodies)},)\n"
    scope = {"__builtins__": {}, "max": _float_maximum, "_div": operator.truediv, "_pow": operator.pow,
             "_ceil": _float_ceiling}
    try:
        exec(compile(source, "<symbolic array formulas>", "exec"), scope)  # arithmetic written by _Source only
    except (RecursionError, MemoryError, SyntaxError, ValueError):  # deeper than Python compiles
        raise FormulaError("formulas too deep to compile for arrays") from None
    evaluate_all = _naming_unknown(scope["formulas"])
    evaluate_all.names = frozenset(read)  # the names the formulas read from the mapping
    return evaluate_all


def formula_names(text: str) -> frozenset:
    """The names ``text`` reads, after the guarded reader accepts it (a :class:`FormulaError` if
    it is not arithmetic): a stored formula checked before it is used."""
    return _formula_source(text)[1]


# --- Formulas as programs: read by the guarded reader, run by a fixed interpreter, never compiled ---------
#
# A plan reads a few hundred cached formulas in every fresh process and evaluates each once or twice over
# arrays; writing them out as Python and compiling that text cost more than all the evaluations (0.2 s of a
# cold 1.3 s plan). A program is the same accepted arithmetic as a list of steps in postfix order, run by
# :func:`_run`: each step one of the reader's operations (+ - * / **, negation, Max, ceiling) on values already
# on the stack, so nothing but that arithmetic on the given values can ever run, and no text is compiled.

_NAME, _CONST, _BINARY_STEP, _UNARY_STEP, _MAX_STEP, _STORE, _BINARY_NAME, _BINARY_CONST = range(8)


class _Tree:
    """A node of a formula as the guarded reader accepted it: an operation and its operands."""

    __slots__ = ("step", "arg", "operands")

    def __init__(self, step: int, arg, operands: tuple = ()):
        self.step, self.arg, self.operands = step, arg, operands


@lru_cache(maxsize=1 << 16)
def _postfix(text: str) -> tuple[tuple, frozenset]:
    """One formula, read by the guarded reader (:func:`_build`), as postfix steps ``(kind, arg)``: a name,
    an exact constant (an int where whole, else a Fraction, as :func:`compile_formulas` writes it), or an
    operation (its ``ast`` type, ``neg``, ``ceil``, or Max with its count); with the names it reads."""
    names: set[str] = set()

    def name(letter: str):
        names.add(letter)
        return _Tree(_NAME, letter)

    def number(digits: str):
        value = Fraction(_decimal(digits))
        return _Tree(_CONST, value.numerator if value.denominator == 1 else value)

    tree = _build(text, _AnyName(name), number,
                  maximum=lambda *args: _Tree(_MAX_STEP, len(args), args),
                  ceiling=lambda arg: _Tree(_UNARY_STEP, "ceil", (arg,)),
                  binary={kind: (lambda a, b, kind=kind: _Tree(_BINARY_STEP, kind, (a, b))) for kind in _BINARY},
                  negate=lambda arg: _Tree(_UNARY_STEP, "neg", (arg,)))
    steps = []
    pending = [(tree, False)]
    while pending:  # post-order without recursion: operands left to right, then the operation
        node, expanded = pending.pop()
        if expanded or not node.operands:
            steps.append((node.step, node.arg))
            continue
        pending.append((node, True))
        pending.extend((operand, False) for operand in reversed(node.operands))
    return tuple(steps), frozenset(names)


def _negate(x):
    return -x


def _array_operations() -> tuple[dict, Callable, Callable]:
    """The float operations of :func:`compile_array_formulas`: (by operation, Max, a number's value)."""
    import operator

    return ({ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Pow: operator.pow, "neg": _negate, "ceil": _float_ceiling}, _float_maximum, float)


def _exact_operations() -> tuple[dict, Callable, Callable]:
    """The exact operations of :func:`compile_formulas`: (by operation, Max, a number's value)."""
    return dict(_EXACT, neg=_negate, ceil=_ceiling), max, lambda value: value


_OPERATIONS = {"array": _array_operations, "exact": _exact_operations}


@lru_cache(maxsize=1 << 16)
def _steps(text: str, kind: str) -> tuple[tuple, frozenset]:
    """:func:`_postfix`'s steps of ``text`` with each operation resolved to the function ``kind`` (``array``
    or ``exact``) applies; cached by text, as the common subexpressions of a plan's groups repeat."""
    operations, maximum, constant = _OPERATIONS[kind]()
    postfix, names = _postfix(text)
    steps = []
    for step, arg in postfix:
        if step == _CONST:
            steps.append((_CONST, constant(arg)))
        elif step == _BINARY_STEP and steps and steps[-1][0] in (_NAME, _CONST):
            # the right operand is the push just before (a leaf is a whole operand): one step, not two
            leaf, value = steps.pop()
            steps.append((_BINARY_NAME if leaf == _NAME else _BINARY_CONST, (operations[arg], value)))
        elif step in (_BINARY_STEP, _UNARY_STEP):
            steps.append((step, operations[arg]))
        elif step == _MAX_STEP:
            steps.append((_MAX_STEP, (arg, maximum)))
        else:
            steps.append((step, arg))
    return tuple(steps), names


def _program(texts, common, kind: str):
    """Every formula of ``texts`` after the ``common`` (name, text) pairs as one tuple of steps (:func:`_steps`),
    a common subexpression stored under its name once computed: (steps, the names read from the mapping)."""
    texts, common = list(texts), [(str(name), text) for name, text in common]
    read: set[str] = set()
    assigned: set[str] = set()
    parts: list[tuple] = []
    try:
        for name, text in common:
            if not name.isidentifier():
                raise FormulaError(f"{name!r} is not a name for a common subexpression")
            steps, names = _steps(text, kind)
            read.update(names - assigned)  # as compile_array_formulas binds them: from the mapping
            parts.append(steps)
            parts.append(((_STORE, name),))
            assigned.add(name)
        for text in texts:
            steps, names = _steps(text, kind)
            read.update(names - assigned)
            parts.append(steps)
    except (RecursionError, MemoryError):  # deeper than the reader goes
        raise FormulaError("formulas too deep to read") from None
    return tuple(chain.from_iterable(parts)), frozenset(read)


def _run(program, env: Mapping) -> tuple:
    """The values a program (:func:`_program`) leaves, in order, at ``env`` (every name it reads)."""
    steps, read = program
    scope = dict(env)  # a common subexpression is stored here under its name when it is computed
    missing = read - scope.keys()
    if missing:
        raise FormulaError(f"unknown name {min(missing)!r} in the formulas; known: {', '.join(sorted(env))}")
    stack: list = []
    push, pop = stack.append, stack.pop
    for step, arg in steps:
        if step == _BINARY_STEP:
            right = pop()
            stack[-1] = arg(stack[-1], right)
        elif step == _BINARY_NAME:
            operation, letter = arg
            stack[-1] = operation(stack[-1], scope[letter])
        elif step == _BINARY_CONST:
            operation, value = arg
            stack[-1] = operation(stack[-1], value)
        elif step == _NAME:
            push(scope[arg])
        elif step == _CONST:
            push(arg)
        elif step == _UNARY_STEP:
            stack[-1] = arg(stack[-1])
        elif step == _MAX_STEP:
            count, maximum = arg
            operands = stack[-count:]
            del stack[-count:]
            push(maximum(*operands))
        else:
            scope[arg] = pop()
    return tuple(stack)


def _as_function(program):
    def evaluate_all(env: Mapping) -> tuple:
        return _run(program, env)

    evaluate_all.names = program[1]  # the names the formulas read from the mapping
    return evaluate_all


def array_program(texts, common=()) -> Callable[[Mapping], tuple]:
    """:func:`compile_array_formulas` without compiling: the same formulas (each read by the guarded
    reader), the same float operations on the same operands in the same order — so the same doubles —
    run as a program (:func:`_run`). Per step a microsecond of Python against whole arrays, so a plan's
    steps cost milliseconds a group where compiling them cost a fifth of a second in all."""
    return _as_function(_program(texts, common, "array"))


def exact_program(texts, common=()) -> Callable[[Mapping], tuple]:
    """:func:`compile_formulas` (ints where whole, Fractions otherwise; ``/`` and ``**`` exact and bounded)
    for formulas after ``common`` (name, text) pairs, as a program (:func:`_run`): for the few layouts a plan
    shows, where compiling cost more than evaluating."""
    return _as_function(_program(texts, common, "exact"))
