"""The sweep's numeric kernel: a group's cached formulas as one numpy program that writes every
element-wise operation into a reused buffer (``out=``), each distinct operation once.

:func:`symbolic.core.expressions.compile_array_formulas` writes each formula as a Python expression:
every operation allocates a fresh array (at the sweep's 16,384 doubles, 128 KiB — glibc's mmap
threshold, so many are fresh pages), and an operation two formulas share is computed twice. This
module reads the same texts with the same guarded reader (:func:`symbolic.core.expressions._build`:
numbers, names, + - * / **, Max, ceiling; anything else is a ``FormulaError``) into a graph of
operations in which each (operation, operands) appears once, then writes a program over buffers
allocated once per block size and reused (a buffer is freed to the next operation after its last
reader: the ~10 live arrays stay in a core's L2).

The same doubles as the expression form, bit for bit: every operation is the same numpy ufunc on the
same operands in the same order (left-associative as the text reads; + and × of doubles are
commutative exactly, so ``a·b`` and ``b·a`` are one operation); ``x**2`` is ``np.square``, as numpy's
``**`` computes it, any other power numpy's ``**`` itself; an operation of scalars only (a plan's
model letters) is the same Python operation on the same objects. The largest of several values
(``Max``, the verdict's candidate instants) is numpy's maximum folded in the text's order (exact and
idempotent, but of +0 and -0 it returns one by position, so its operands keep their order).
``tests/test_sweep_kernel.py`` holds the outputs equal to the expression form's with ``np.array_equal``.
"""
from __future__ import annotations

import ast
import operator
import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..core.expressions import _BINARY, _AnyName, _build, _decimal

#: The ufunc each operation of the graph is (the expression form's ``a * b`` is ``np.multiply(a, b)``).
_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "max": np.maximum,
           "neg": np.negative, "ceil": np.ceil, "square": np.square}
#: The same operation on scalars, as the expression form evaluates it (Python's operators).
_SCALAR = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
           "max": np.maximum, "neg": operator.neg, "ceil": np.ceil, "square": lambda x: x**2.0, "pow": operator.pow}
#: Python's scope for a program's text: the ufuncs it writes arrays with, the scalar operations.
SCOPE = {"__builtins__": {}, "_square_scalar": _SCALAR["square"], "_pow": operator.pow,
         "_max_scalar": np.maximum, "_ceil_scalar": np.ceil, **{f"_{kind}": ufunc for kind, ufunc in _UFUNCS.items()}}
_COMMUTATIVE = {"add", "mul"}  # not max: of +0 and -0 numpy's maximum returns one by position
_KIND = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}


class _Graph:
    """Operations as nodes: ("in", name), ("const", float), (kind, operand ids…); each distinct once."""

    def __init__(self):
        self.nodes: list[tuple] = []
        self.ids: dict[tuple, int] = {}
        self.scope: dict[str, int] = {}   # common subexpressions by name

    def node(self, key: tuple) -> int:
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.nodes)
            self.nodes.append(key)
        return found

    def name(self, name: str) -> int:
        return self.scope[name] if name in self.scope else self.node(("in", name))

    def number(self, digits: str) -> int:
        return self.node(("const", float(Fraction(_decimal(digits)))))  # the float literal the expression form writes

    def const(self, i: int):
        key = self.nodes[i]
        return key[1] if key[0] == "const" else None

    def op(self, kind: str, *args: int) -> int:
        values = [self.const(a) for a in args]
        if all(v is not None for v in values):  # Python folds a literal's arithmetic when it compiles the text
            if kind == "max":
                return self.node(("const", max(values)))
            if kind != "ceil":
                return self.node(("const", _SCALAR[kind](*values)))
        if kind == "pow" and values[1] == 2.0:
            return self.node(("square", args[0]))
        if kind in _COMMUTATIVE:
            args = tuple(sorted(args))
        if kind == "max" and args[0] == args[1]:
            return args[0]
        return self.node((kind, *args))

    def maximum(self, *args: int) -> int:
        out = args[0]
        for a in args[1:]:
            out = self.op("max", out, a)
        return out

    def read(self, text: str) -> int:
        return _build(text, _AnyName(self.name), self.number, maximum=self.maximum,
                      ceiling=lambda x: self.op("ceil", x),
                      binary={kind: (lambda k: lambda a, b: self.op(k, a, b))(_KIND[kind]) for kind in _BINARY},
                      negate=lambda x: self.op("neg", x))


@dataclass(frozen=True)
class Graph:
    """A program's operations as :func:`program` left them, for another writer of the same operations
    (:mod:`symbolic.search.native`): the nodes, the outputs' nodes, which nodes an output needs, which
    are arrays."""

    nodes: tuple[tuple, ...]
    roots: tuple[int, ...]
    live: tuple[bool, ...]
    is_array: tuple[bool, ...]


class Program:
    """A compiled kernel: ``run(env, outputs, workspace)`` for one signature (which inputs are arrays)."""

    def __init__(self, source: str, buffers: int, inputs: tuple[str, ...], shapes: tuple[bool, ...],
                 graph: "Graph | None" = None):
        self.source, self.buffers, self.inputs, self.shapes, self.graph = source, buffers, inputs, shapes, graph
        scope = dict(SCOPE)
        exec(compile(source, "<symbolic sweep kernel>", "exec"), scope)  # operations written below only
        self.run = scope["kernel"]
        self._local = threading.local()

    def __call__(self, env, outs: list, n: int) -> list:
        """The outputs at ``env`` (a mapping of every input: float64 arrays of length ``n`` for the
        array inputs, scalars for the others); each array output in ``outs[i]`` where that is an
        array, else in a fresh array of its own (never an input's, never another output's)."""
        results = list(self.run(env, outs, self.workspace(n)))
        seen: set[int] = set()
        for i, (x, array) in enumerate(zip(results, self.shapes)):
            if not array:
                continue
            if outs[i] is not None and x is not outs[i]:
                np.copyto(outs[i], x)
                x = results[i] = outs[i]
            elif id(x) in seen or any(x is env[name] for name in self.inputs):
                x = results[i] = x.copy()
            seen.add(id(x))
        return results

    def workspace(self, n: int) -> list[np.ndarray]:
        """The program's buffers for blocks of ``n``, allocated once per thread and size."""
        spaces = getattr(self._local, "spaces", None)
        if spaces is None:
            spaces = self._local.spaces = {}
        space = spaces.get(n)
        if space is None:
            if len(spaces) > 4:
                spaces.clear()
            space = spaces[n] = [aligned_empty(n) for _ in range(self.buffers)]
        return space


#: The byte boundary the kernel's buffers start on: a cache line (64 B on x86-64 and arm64). numpy
#: aligns an array to 16 B only, and a ufunc that writes an array starting mid-line splits its vector
#: stores across lines: np.multiply of two 32,768-double arrays into a third took 0.40-0.42 ns an
#: element so placed against 0.21 ns into a 64 B-aligned one (AVX-512 Xeon here, five placements each;
#: the same doubles, only where they lie).
ALIGNMENT = 64


def aligned_empty(n: int, dtype=np.float64) -> np.ndarray:
    """An uninitialised array of ``n`` values starting on an :data:`ALIGNMENT` boundary (a view into
    a buffer a cache line longer)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(n * itemsize + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + n * itemsize].view(dtype)


_SCRATCH = threading.local()


def scratch(name: str, n: int, dtype=np.float64, fill=None) -> np.ndarray:
    """A buffer of ``n`` values kept per thread under ``name`` (the sweep's inputs converted to floats,
    its chunks in flight): allocated once per size, not per block; ``fill`` its value on allocation
    (a buffer so filled is never written by its users)."""
    spaces = getattr(_SCRATCH, "spaces", None)
    if spaces is None:
        spaces = _SCRATCH.spaces = {}
    key = (name, n, dtype)  # the dtype as given (np.dtype() of it costs ~1 µs, a dozen times a block)
    found = spaces.get(key)
    if found is None:
        if len(spaces) > 256:
            spaces.clear()
        found = spaces[key] = aligned_empty(n, dtype)
        if fill is not None:
            found.fill(fill)
    return found


@lru_cache(maxsize=256)
def program(common: tuple[tuple[str, str], ...], outputs: tuple, arrays: frozenset, psi: str | None = None) -> Program:
    """The kernel of ``outputs`` after ``common`` ((name, text) pairs, each readable by the later
    ones), the inputs named in ``arrays`` arrays of one length and every other input a scalar;
    ``psi``: the text whose value the name ``Psi`` is (the parameter count), else ``Psi`` an input.

    An output is a formula's text, ``("in", name)`` an input, or ``("max"|"add"|"mul", output, …)``
    of outputs so written (the largest of several; a sum or product of two). Each output that is an
    array is written into the array given in its place (``None``: a fresh one); a scalar is returned."""
    graph = _Graph()
    if psi is not None:
        graph.scope["Psi"] = graph.read(psi)
    for name, text in common:
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not a name for a common subexpression")
        graph.scope[name] = graph.read(text)

    def root(spec) -> int:
        if isinstance(spec, str):
            return graph.read(spec)
        if spec[0] == "in":
            return graph.name(spec[1])
        if spec[0] == "max":
            return graph.maximum(*(root(x) for x in spec[1:]))
        return graph.op(spec[0], root(spec[1]), root(spec[2]))

    return _write(graph, [root(spec) for spec in outputs], arrays)


def _write(graph: _Graph, roots: list[int], arrays: frozenset) -> Program:
    nodes = graph.nodes
    live = [False] * len(nodes)  # only what an output needs is computed
    stack = list(roots)
    while stack:
        i = stack.pop()
        if not live[i]:
            live[i] = True
            key = nodes[i]
            if key[0] not in ("in", "const"):
                stack.extend(key[1:])
    is_array = [False] * len(nodes)
    last_use = [-1] * len(nodes)
    for i, key in enumerate(nodes):
        if not live[i]:
            continue
        if key[0] == "in":
            is_array[i] = key[1] in arrays
        elif key[0] != "const":
            is_array[i] = any(is_array[a] for a in key[1:])
            for a in key[1:]:
                last_use[a] = i
    inputs = sorted({key[1] for i, key in enumerate(nodes) if live[i] and key[0] == "in"})
    first_root = {}
    for slot, i in enumerate(roots):
        first_root.setdefault(i, slot)
    for i in roots:
        last_use[i] = len(nodes)  # outputs live to the end

    def ref(i: int) -> str:
        key = nodes[i]
        if key[0] == "const":
            return repr(key[1])
        if key[0] == "in":
            return "v_" + key[1]
        return f"x{i}"

    lines = [f"def kernel(env, outs, ws):\n"]
    if inputs:
        lines.append(f"    {', '.join('v_' + n for n in inputs)}, = {', '.join(f'env[{n!r}]' for n in inputs)},\n")
    free: list[int] = []
    buffers = 0
    holder: dict[int, str] = {}  # node → the buffer expression it lives in
    for i, key in enumerate(nodes):
        if not live[i] or key[0] in ("in", "const"):
            continue
        kind, args = key[0], key[1:]
        operands = ", ".join(ref(a) for a in args)
        if not is_array[i]:
            lines.append(f"    x{i} = {scalar_call(kind, [ref(a) for a in args])}\n")
        elif kind == "pow":  # numpy's ** itself (a power other than 2: its own fast paths and loops)
            lines.append(f"    x{i} = _pow({operands})\n")
        else:
            if i in first_root:
                target = f"outs[{first_root[i]}]"
                lines.append(f"    x{i} = _{kind}({operands}, out={target}) if {target} is not None "
                             f"else _{kind}({operands})\n")
            else:
                reuse = [a for a in args if holder.get(a) and last_use[a] == i and a not in first_root]
                if reuse:  # an operand read last here: written over in place (element-wise, same position)
                    buffer = holder[reuse[0]]
                    holder.pop(reuse[0])
                elif free:
                    buffer = free.pop()
                else:
                    buffer, buffers = f"ws[{buffers}]", buffers + 1
                holder[i] = buffer
                lines.append(f"    x{i} = _{kind}({operands}, out={buffer})\n")
        for a in set(args):  # operands read for the last time give their buffers back
            if last_use[a] == i and a in holder and holder.get(a) != holder.get(i):
                free.append(holder.pop(a))
    lines.append(f"    return ({', '.join(ref(i) for i in roots)},)\n")
    return Program("".join(lines), buffers, tuple(inputs), tuple(is_array[i] for i in roots),
                   Graph(tuple(nodes), tuple(roots), tuple(live), tuple(is_array)))


def scalar_call(kind: str, operands: list[str]) -> str:
    """The Python text of an operation of scalars only (a plan's model letters, constants), as the
    expression form evaluates it: Python's operators, numpy's maximum and ceil."""
    call = {"square": "_square_scalar({})", "pow": "_pow({}, {})", "max": "_max_scalar({}, {})",
            "ceil": "_ceil_scalar({})", "neg": "(-{})"}.get(kind)
    if call is None:
        return f"({operands[0]} {dict(add='+', sub='-', mul='*', div='/')[kind]} {operands[1]})"
    return call.format(*operands)


