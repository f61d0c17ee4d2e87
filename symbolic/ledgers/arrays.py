"""numpy where the step-time model prices arrays of layouts (``plan``), plain Python floats where it
prices one (``bill``), so a cached bill imports no numpy (issue 24: numpy was a third of its imports).

:mod:`symbolic.ledgers.time` and :mod:`symbolic.ledgers.kernels` call this module as they called numpy
(``np.where``, ``np.maximum``, …). Each function looks at its arguments: any numpy array (or anything
not a Python number or string) and it is numpy's own function, imported then; all Python numbers and
it computes the same IEEE-754 double with the same operation, in a :class:`Scalar`.

A :class:`Scalar` is a float whose arithmetic stays a Scalar and whose division by zero is numpy's
(±inf, or nan for 0/0) instead of ``ZeroDivisionError``: ``np.where(cond, a / b, 0.0)`` evaluates
both branches, and the branch it drops may divide by zero (a group of one rank, no calls).
+, −, ×, ÷ of doubles are correctly rounded in both, so the values are bit for bit numpy's; the
logarithm is not (numpy's SIMD ``log`` and libm's may differ in the last place), which is why
:meth:`symbolic.ledgers.kernels.Table.nearest` compares logarithms in Python only where the nearest
shape wins by far more than that, and asks numpy otherwise.

A third backend serves the calculator page (:mod:`symbolic.render.html`): when an argument is a sympy
expression (``sympy.Basic``; sympy is only asked about when something has imported it already) the
same functions build an expression — ``where``, ``maximum`` and ``minimum`` the unevaluated functions of
:func:`functions` (sympy's ``Piecewise``, ``Max`` and ``Min`` fold and simplify their conditions as they
are built: seconds per price, and a failure on a dropped branch's division by zero; these evaluate only
once their arguments are numbers),
``ceil``/``floor`` ``ceiling``/``floor``, :func:`equal` an ``Eq`` (``x == n`` on a sympy symbol is
Python's structural equality, always False, so comparisons for equality go through :func:`equal`),
``asarray``/``broadcast_to`` the expression itself, ``zeros_like``/``ones_like`` 0 and 1 — so
:func:`symbolic.ledgers.time.price` called with symbols returns the step time as one expression of
them, the page's JavaScript printed from it. The numpy and :class:`Scalar` paths are untouched: a
symbolic argument is looked for only where no numpy array or all-Python-number path applies.
"""
from __future__ import annotations

import math
import sys

_NUMBER = (int, float, bool)


class Scalar(float):
    """One layout's value: a float closed under arithmetic, dividing by zero as numpy does."""

    __slots__ = ()
    shape = ()
    ndim = 0

    def copy(self):
        return self

    def __add__(self, other):
        return Scalar(float.__add__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __radd__(self, other):
        return Scalar(float.__radd__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __sub__(self, other):
        return Scalar(float.__sub__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __rsub__(self, other):
        return Scalar(float.__rsub__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __mul__(self, other):
        return Scalar(float.__mul__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __rmul__(self, other):
        return Scalar(float.__rmul__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __truediv__(self, other):
        return _divide(float(self), other) if isinstance(other, _NUMBER) else NotImplemented

    def __rtruediv__(self, other):
        return _divide(other, float(self)) if isinstance(other, _NUMBER) else NotImplemented

    def __pow__(self, other):
        return Scalar(float.__pow__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __rpow__(self, other):
        return Scalar(float.__rpow__(self, other)) if isinstance(other, _NUMBER) else NotImplemented

    def __neg__(self):
        return Scalar(-float(self))


def _divide(a, b) -> Scalar:
    if b == 0:
        a = float(a)
        return Scalar(math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b))
    return Scalar(float(a) / b)


def scalar(*values) -> bool:
    """All of ``values`` Python numbers or strings (no array among them)."""
    return all(isinstance(x, (int, float, str)) for x in values)


def _numpy():
    import numpy
    return numpy


def _sympy(*values):
    """sympy, when one of ``values`` is a sympy expression (the calculator's backend), else None;
    never imports sympy (a bill that has not imported it has no sympy argument)."""
    sympy = sys.modules.get("sympy")
    if sympy is None or not any(isinstance(x, sympy.Basic) for x in values):
        return None
    return sympy


def symbolic(*values) -> bool:
    """One of ``values`` a sympy expression (the calculator's backend)."""
    return _sympy(*values) is not None


def _boolean(sympy, condition):
    return sympy.true if condition is True else sympy.false if condition is False else condition


_FUNCTIONS: dict = {}


def functions() -> dict:
    """The symbolic backend's ``where``, ``maximum`` and ``minimum`` (sympy ``Function`` classes by
    name): each stays unevaluated until its arguments are numbers (a condition true or false), then
    is the numeric function's value — the same IEEE double for Floats as the Scalar path's."""
    if _FUNCTIONS:
        return _FUNCTIONS
    from sympy import Function, S

    class Real(Function):
        """A real-valued function (so the pricing code's comparisons of it are relationals)."""

        def _eval_is_extended_real(self):
            return True

        def _eval_is_finite(self):
            return True

    class where(Real):  # noqa: N801 (the printed name)
        @classmethod
        def eval(cls, condition, a, b):
            if condition is S.true:
                return a
            if condition is S.false:
                return b
            if a == b:
                return a
            return None

    class maximum(Real):  # noqa: N801
        @classmethod
        def eval(cls, a, b):
            if a.is_Number and b.is_Number:
                return a if a >= b else b
            if a == b:
                return a
            return None

    class minimum(Real):  # noqa: N801
        @classmethod
        def eval(cls, a, b):
            if a.is_Number and b.is_Number:
                return a if a <= b else b
            if a == b:
                return a
            return None

    _FUNCTIONS.update(where=where, maximum=maximum, minimum=minimum)
    return _FUNCTIONS


def _arrays(*values) -> bool:
    """Some of ``values`` numpy arrays and the rest arrays or Python numbers (no sympy, no other type): the
    numpy path, found without :func:`scalar`'s and :func:`_sympy`'s scans (a plan's pricing calls these
    functions ~30,000 times; the same numpy call either way)."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return False
    kinds = [type(x) for x in values]
    return numpy.ndarray in kinds and all(kind in (numpy.ndarray, float, int, bool) for kind in kinds)


def _s(x):
    return x if isinstance(x, (str, Scalar)) else Scalar(x)


def asarray(x, dtype=None):
    if isinstance(x, _NUMBER):
        return Scalar(x)
    if symbolic(x):
        return x
    np = _numpy()
    return np.asarray(x, dtype=np.float64 if dtype in (float64, float) else dtype)


def where(condition, a, b):
    if _arrays(condition, a, b):
        return _numpy().where(condition, a, b)
    if scalar(condition, a, b):
        return _s(a) if condition else _s(b)
    sympy = _sympy(condition, a, b)
    if sympy is not None:
        if isinstance(condition, (bool, int)) and not isinstance(condition, sympy.Basic):
            return a if condition else b
        return functions()["where"](_boolean(sympy, condition), a, b)
    return _numpy().where(condition, a, b)


def maximum(a, b):
    if _arrays(a, b):
        return _numpy().maximum(a, b)
    if scalar(a, b):
        return Scalar(a if a >= b else b)
    sympy = _sympy(a, b)
    if sympy is not None:
        return functions()["maximum"](a, b)
    return _numpy().maximum(a, b)


def minimum(a, b):
    if _arrays(a, b):
        return _numpy().minimum(a, b)
    if scalar(a, b):
        return Scalar(a if a <= b else b)
    sympy = _sympy(a, b)
    if sympy is not None:
        return functions()["minimum"](a, b)
    return _numpy().minimum(a, b)


def floor(x):
    if scalar(x):
        return Scalar(math.floor(x))
    sympy = _sympy(x)
    return sympy.floor(x) if sympy is not None else _numpy().floor(x)


def ceil(x):
    if scalar(x):
        return Scalar(math.ceil(x))
    sympy = _sympy(x)
    return sympy.ceiling(x) if sympy is not None else _numpy().ceil(x)


def equal(a, b):
    """``a == b`` elementwise: a bool for Python numbers, numpy's for arrays, ``Eq`` for expressions."""
    if scalar(a, b):
        return a == b
    sympy = _sympy(a, b)
    if sympy is not None:
        return sympy.Eq(a, b)
    return _numpy().equal(a, b)


def ones_like(x):
    if scalar(x):
        return Scalar(1.0)
    return _sympy(x).Integer(1) if symbolic(x) else _numpy().ones_like(x)


def zeros_like(x):
    if scalar(x):
        return Scalar(0.0)
    return _sympy(x).Integer(0) if symbolic(x) else _numpy().zeros_like(x)


def zeros(shape):
    return Scalar(0.0) if shape == () else _numpy().zeros(shape)


class _Broadcast:
    shape = ()


def broadcast(*values):
    return _Broadcast() if scalar(*values) or symbolic(*values) else _numpy().broadcast(*values)


def broadcast_to(x, shape):
    if shape == () and symbolic(x):
        return x
    return _s(x) if shape == () and scalar(x) else _numpy().broadcast_to(x, shape)


def shape(x):
    """``x.shape``: () for a Python number or a sympy expression (one value each)."""
    return () if isinstance(x, _NUMBER) or symbolic(x) else x.shape


def first(x):
    """The first (for a bill, the only) entry of ``x``: a Python float or string as it is."""
    if isinstance(x, (int, float, str)):
        return x
    return _numpy().asarray(x).reshape(-1)[0]


#: dtype markers the pricing code passes to :func:`asarray` (numpy's float64 when an array is built)
float64 = "float64"


def __getattr__(name):  # np.ndarray, np.log and the like, on an array's path: numpy's own
    if name.startswith("__"):   # the import system's own questions (__path__, __file__ …) are not numpy's
        raise AttributeError(name)
    return getattr(_numpy(), name)


__all__ = ["Scalar", "asarray", "where", "maximum", "minimum", "floor", "ceil", "equal", "ones_like", "zeros_like",
           "zeros", "broadcast", "broadcast_to", "shape", "first", "scalar", "symbolic"]
