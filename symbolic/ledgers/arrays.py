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
"""
from __future__ import annotations

import math

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


def _s(x):
    return x if isinstance(x, (str, Scalar)) else Scalar(x)


def asarray(x, dtype=None):
    if isinstance(x, _NUMBER):
        return Scalar(x)
    np = _numpy()
    return np.asarray(x, dtype=np.float64 if dtype in (float64, float) else dtype)


def where(condition, a, b):
    if scalar(condition, a, b):
        return _s(a) if condition else _s(b)
    return _numpy().where(condition, a, b)


def maximum(a, b):
    if scalar(a, b):
        return Scalar(a if a >= b else b)
    return _numpy().maximum(a, b)


def minimum(a, b):
    if scalar(a, b):
        return Scalar(a if a <= b else b)
    return _numpy().minimum(a, b)


def floor(x):
    return Scalar(math.floor(x)) if scalar(x) else _numpy().floor(x)


def ceil(x):
    return Scalar(math.ceil(x)) if scalar(x) else _numpy().ceil(x)


def ones_like(x):
    return Scalar(1.0) if scalar(x) else _numpy().ones_like(x)


def zeros_like(x):
    return Scalar(0.0) if scalar(x) else _numpy().zeros_like(x)


def zeros(shape):
    return Scalar(0.0) if shape == () else _numpy().zeros(shape)


class _Broadcast:
    shape = ()


def broadcast(*values):
    return _Broadcast() if scalar(*values) else _numpy().broadcast(*values)


def broadcast_to(x, shape):
    return _s(x) if shape == () and scalar(x) else _numpy().broadcast_to(x, shape)


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


__all__ = ["Scalar", "asarray", "where", "maximum", "minimum", "floor", "ceil", "ones_like", "zeros_like",
           "zeros", "broadcast", "broadcast_to", "first", "scalar"]
