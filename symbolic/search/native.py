"""The sweep's kernel as one C loop over the configurations, compiled by the machine's C compiler
where it has one; without one (or for a call outside the cases below) the numpy kernel
(:mod:`symbolic.search.kernel`) evaluates it, giving the same doubles.

Why a loop: numpy evaluates a formula one operation at a time, each a pass over a block of memory. A
sweep of int64 columns first converts each column it reads, and on a core that streams memory slowly
that pass is most of the cost: on this project's Intel Xeon VM, converting the papers' ten columns
took ~48 ms of ~100 ms for 4 × 10⁶ configurations, their ~25 operations most of the rest. One loop
reads each input once and keeps every intermediate in a register: the same 4 × 10⁶ in ~27 ms
(``benchmarks/sweep_throughput.py`` prints both kernels' figures).

The same doubles, bit for bit (``tests/test_sweep_native.py`` holds them equal with the numpy kernel's):

* each operation of the program's graph (:class:`symbolic.search.kernel.Graph`) is the IEEE operation
  numpy's ufunc performs, on the same operands in the same order: ``+ − × ÷`` as written, ``x²`` as
  ``x·x`` (``np.square``), the larger of two with NaN from either side and, of +0 and −0, the one
  numpy's loops return (read off ``np.maximum`` at the first build; none written where it varies),
  ``ceil`` from libm; a power other than 2 has numpy's own fast paths, so such a program is not
  written here;
* compiled with ``-O2 -ffp-contract=off``, and the C text refuses to compile (``#error``) under
  ``__FAST_MATH__`` or excess precision (``FLT_EVAL_METHOD`` ≠ 0): no fused multiply-add, no
  reordering, whatever ``CC`` adds;
* a NaN result stops the loop (its payload would be the compiler's choice of operand);
* an int64 input converted as numpy converts it, ``(double) x``; a scalar input (a plan's model
  letters) passed as the double numpy reads, and every operation of scalars only computed in Python
  exactly as the numpy kernel computes it (:func:`symbolic.search.kernel.scalar_call`);
* the chunks in flight ``m`` by 1F1B's rule in int64 (``plan.in_flight_array``): ``min(⌊mb/d⌋, p)``,
  1 where p = 1, for d ≥ 1 and mb ≥ 0 — any other element stops the loop, and the numpy kernel
  evaluates the whole call; ``m_last`` 1; the communicator buffers as ``plan._kernel_env`` sums them;
* ``CC`` with a flag that allows reassociation, contraction or approximation (:data:`UNSAFE_FLAGS`:
  ``-ffast-math``, ``-funsafe-math-optimizations``, ``-ffp-contract=fast``, ``-Ofast``, ...) is refused:
  the loop is not compiled, with a warning;
* and on its first call the loop's doubles are compared with the numpy kernel's on a sample spread over
  the whole call (``plan._loop_outputs``, :func:`sample_indices`): a difference and the loop is not
  used again in the process.

Trust: the C text holds no text from a formula or a cache entry. Operations are written from the
graph's node kinds, numbers as C hexadecimal floats (``float.hex``: exact), names as node indices.
Each process compiles into a private temporary folder (``mkdtemp``: mode 0700), loads the library and
removes the folder, so nothing compiled is read back from disk by a later process.
``SYMBOLIC_NATIVE=0`` turns the loop off; ``CC`` names the compiler (default ``cc``).
"""
from __future__ import annotations

import ctypes
import math
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .kernel import SCOPE, Program, scalar_call

#: Inputs the sweep derives per configuration rather than reads (``plan._kernel_env``).
DERIVED = ("m", "m_last", "_comm", "_mb")
#: The raw columns each derived input is computed from.
_DERIVED_FROM = {"m": ("_mb_raw", "d", "p"), "m_last": (), "_comm": ("t", "d", "p", "c"), "_mb": ("_mb_raw",)}
#: The letters whose integer values ``m`` reads (int64 arrays or Python ints, ``plan._kernel_ready``).
_INTEGER = ("_mb_raw", "d", "p")
_INT64 = (-(2**63), 2**63)

_C_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_HEADER = """#include <float.h>
#include <math.h>
#include <stdint.h>
#if defined(__FAST_MATH__) || FLT_EVAL_METHOD != 0
#error "the loop must round each operation as IEEE doubles do (no -ffast-math, no x87 excess precision)"
#endif
"""
#: numpy's maximum of two doubles, NaN from either side propagated; which of two equal ones (+0 and -0) it
#: returns is its SIMD loops' choice, read off numpy at the first build (:func:`_larger_rule`).
_LARGER = {"second": "static inline double larger(double a, double b) { return (a > b || a != a) ? a : b; }\n",
           "first": "static inline double larger(double a, double b) { return (a >= b || a != a) ? a : b; }\n"}


@dataclass(frozen=True)
class Source:
    """How the loop reads one input: a column (``array``, its ``dtype`` int64 or float64) or a scalar."""

    name: str
    array: bool
    dtype: str = "float64"


@dataclass(frozen=True)
class Signature:
    """A call's shape as the C text depends on it: each raw input's :class:`Source`, in order."""

    sources: tuple[Source, ...]


class NativeKernel:
    """A compiled loop for one :class:`Signature` of one program, called by :func:`run`: its C function, the
    Python prelude of its scalar operations, the scalar nodes it reads, the outputs' nodes and shapes."""

    def __init__(self, function, signature: Signature, prelude, boundary: tuple[int, ...], roots: tuple[int, ...],
                 shapes: tuple[bool, ...], comm_sizes: tuple[float, ...]):
        self.function, self.signature, self.prelude = function, signature, prelude
        self.boundary, self.roots, self.shapes, self.comm_sizes = boundary, roots, shapes, comm_sizes
        self.checked = False  #: its doubles compared with the numpy kernel's on a first call's sample


def enabled() -> bool:
    """Whether the sweep may compile a loop (``SYMBOLIC_NATIVE`` not 0/off/no/false, a compiler found)."""
    if os.environ.get("SYMBOLIC_NATIVE", "").lower() in ("0", "off", "no", "false"):
        return False
    return compiler() is not None


#: Compiler flags that let the compiler reassociate, contract (fused multiply-add), drop signed zeros or
#: NaNs, or approximate: with any of them in ``CC`` the loop is not compiled (the numpy kernel runs), since
#: ``-ffp-contract=off`` after them and the ``__FAST_MATH__`` guard do not undo them all (GCC defines no
#: macro for ``-funsafe-math-optimizations`` or ``-fassociative-math``).
UNSAFE_FLAGS = ("-ffast-math", "-Ofast", "-funsafe-math-optimizations", "-fassociative-math", "-freciprocal-math",
                "-ffp-contract=fast", "-ffp-contract=on", "-ffinite-math-only", "-fno-signed-zeros",
                "-fno-trapping-math", "-fapprox-func", "-ffp-model=fast", "-ffp-model=aggressive", "-fcx-limited-range",
                "-mrecip", "-menable-unsafe-fp-math", "-fno-honor-nans", "-fno-honor-infinities")


def unsafe_flags(words: list[str]) -> list[str]:
    """The words of ``CC`` that allow reassociation, contraction or approximation (:data:`UNSAFE_FLAGS`;
    ``-mrecip=...`` and ``-Wl,``-free spellings included)."""
    return [word for word in words[1:] if word in UNSAFE_FLAGS or word.startswith("-mrecip=")
            or word.startswith("-ffp-contract=") and word != "-ffp-contract=off"]


def compiler() -> list[str] | None:
    """The C compiler's command (``CC``, else ``cc``), or None where there is none — or where ``CC`` carries a
    flag that changes rounding (:func:`unsafe_flags`): the loop must give numpy's doubles bit for bit."""
    try:
        words = shlex.split(os.environ.get("CC", "")) or ["cc"]
    except ValueError:  # an unbalanced quote: no compiler to be had from it
        return None
    if unsafe_flags(words):
        _warn_unsafe(tuple(unsafe_flags(words)))
        return None
    found = shutil.which(words[0])
    return [found, *words[1:]] if found else None


@lru_cache(maxsize=None)
def _warn_unsafe(flags: tuple[str, ...]) -> None:
    import warnings
    warnings.warn(f"CC has {' '.join(flags)}, which lets the compiler reorder or fuse floating-point operations: "
                  "the sweep's compiled loop is not used (the numpy kernel gives its doubles)", stacklevel=3)


def sample_indices(n: int, size: int = 512) -> np.ndarray:
    """At most ``size`` configurations spread evenly over the whole call of ``n`` (the first and the last
    among them), as int64 indices: the loop's first-call check compares its doubles with numpy's there."""
    if n <= size:
        return np.arange(n, dtype=np.int64)
    return np.unique(np.linspace(0, n - 1, size).round().astype(np.int64))


def signature_of(program: Program, values, micro_batches, n: int, params_hand) -> Signature | None:
    """The call's :class:`Signature`, or None where the loop does not take it (an array of another dtype or
    layout, an integer letter beyond int64, a letter the loop cannot read)."""
    names = set()
    for name in program.inputs:
        if name in DERIVED:
            names.update(_DERIVED_FROM[name])
        elif name != "Psi" or params_hand is None:
            names.add(name)
    sources = []
    for name in sorted(names):
        x = micro_batches if name == "_mb_raw" else values.get(name, 1.0 if name != "Psi" else None)
        if x is None:
            return None
        if isinstance(x, np.ndarray) and x.ndim:
            if (x.ndim != 1 or x.shape[0] != n or not (x.flags.c_contiguous and x.flags.aligned)
                    or not (x.dtype == np.int64 or x.dtype == np.float64) or not x.dtype.isnative):
                return None
            if name in _INTEGER and x.dtype != np.int64:
                return None
            sources.append(Source(name, True, str(x.dtype)))
        elif np.ndim(x):  # a list or another sequence: numpy's conversion, not the loop's
            return None
        else:
            if name in _INTEGER:
                if type(x) is not int and not (isinstance(x, np.ndarray) and x.dtype == np.int64):
                    return None
                if not _INT64[0] <= int(x) < _INT64[1]:
                    return None
            sources.append(Source(name, False))
    return Signature(tuple(sources))


_BUILT: dict = {}
_LOCK = threading.Lock()


def native_kernel(program: Program, signature: Signature, comm_sizes: tuple[float, ...],
                  build: bool = True) -> NativeKernel | None:
    """The compiled loop of ``program`` for ``signature`` (compiled once per process; ``build`` False: only
    if compiled already), or None: no compiler, a program the loop does not write (a power other than
    2, an input as an output), or a compile that failed (not tried again in the process)."""
    key = (id(program), signature, comm_sizes)
    with _LOCK:
        found = _BUILT.get(key)
        if found is not None and found[0] is program:
            return found[1]
        if not build:
            return None
        built = _build(program, signature, comm_sizes) if enabled() else None
        if len(_BUILT) > 256:
            _BUILT.clear()
        _BUILT[key] = (program, built)  # the program held, so its id is not reused while the entry stands
        return built


def refuse(program: Program, signature: Signature, comm_sizes: tuple[float, ...]) -> None:
    """No loop for ``program`` at ``signature`` in this process (its doubles differed from numpy's)."""
    with _LOCK:
        _BUILT[(id(program), signature, comm_sizes)] = (program, None)


@lru_cache(maxsize=1)
def _larger_rule() -> str | None:
    """Which of two equal doubles (+0, -0) ``np.maximum`` returns, the same at every length and for a
    scalar operand ("first" or "second"), or None where it varies: then no loop writes a maximum."""
    seen = set()
    for n in (1, 3, 8, 17, 1000):
        a, b = np.zeros(n), np.full(n, -0.0)
        for x, y, first in ((a, b, a), (b, a, b), (a, -0.0, a), (b, 0.0, b)):
            signs = np.signbit(np.maximum(x, y))
            first_sign = np.signbit(np.broadcast_to(first, signs.shape))
            seen.add("first" if np.array_equal(signs, first_sign) else
                     "second" if not np.any(signs == first_sign) else "mixed")
    return seen.pop() if len(seen) == 1 and "mixed" not in seen else None


def _build(program: Program, signature: Signature, comm_sizes: tuple[float, ...]) -> NativeKernel | None:
    graph = program.graph
    if graph is None:
        return None
    nodes, live, is_array = graph.nodes, graph.live, graph.is_array
    sources = {source.name for source in signature.sources}
    larger = None
    for i, key in enumerate(nodes):
        if live[i] and is_array[i] and key[0] == "pow":
            return None
        if live[i] and key[0] == "const" and not math.isfinite(key[1]):
            return None
        if live[i] and is_array[i] and key[0] == "in" and key[1] not in sources and key[1] not in DERIVED:
            return None  # a column the signature does not read (Psi given as an array beside a hand count)
        if live[i] and is_array[i] and key[0] == "max" and larger is None:
            larger = _larger_rule()
            if larger is None:
                return None
    if any(nodes[i][0] == "in" and is_array[i] for i in graph.roots):
        return None
    # Scalars an array operation reads: computed in Python (the prelude), passed in as doubles.
    boundary = sorted({a for i, key in enumerate(nodes) if live[i] and is_array[i] and key[0] not in ("in", "const")
                       for a in key[1:] if not is_array[a] and nodes[a][0] not in ("const",)})
    c_source = _c_text(graph, signature, boundary, larger or "second")
    function = _compile(c_source)
    if function is None:
        return None
    return NativeKernel(function, signature, _prelude(graph, boundary), tuple(boundary), graph.roots,
                        tuple(is_array[i] for i in graph.roots), comm_sizes)


def _c_text(graph, signature: Signature, boundary: list[int], larger: str = "second") -> str:
    nodes, live, is_array = graph.nodes, graph.live, graph.is_array
    position = {i: k for k, i in enumerate(boundary)}
    lines = [_HEADER, _LARGER[larger], "int sweep_kernel(int64_t n, const void *const *col, const int64_t *whole, "
                      "const double *given, const double *scalar, const double *sizes, double *const *out) {\n"]
    for k, source in enumerate(signature.sources):
        ctype = "int64_t" if source.dtype == "int64" else "double"
        if source.array:
            lines.append(f"    const {ctype} *c{k} = (const {ctype} *)col[{k}];\n")
    lines.append("    for (int64_t i = 0; i < n; i++) {\n")

    def raw(name: str) -> str:  # the double numpy reads for a raw input at configuration i
        k = _index(signature, name)
        return f"(double)c{k}[i]" if signature.sources[k].array else f"given[{k}]"

    def whole(name: str) -> str:  # the int64 value of an integer input at configuration i
        k = _index(signature, name)
        return f"c{k}[i]" if signature.sources[k].array else f"whole[{k}]"

    read = {key[1] for i, key in enumerate(nodes) if live[i] and key[0] == "in" and is_array[i]}
    for name in sorted(read):
        if name == "m":
            lines.append(f"        const int64_t mb_i = {whole('_mb_raw')}, d_i = {whole('d')}, p_i = {whole('p')};\n"
                         "        if (d_i < 1 || mb_i < 0) return 1;  /* outside the rule's proof: numpy's call */\n"
                         "        const int64_t q_i = mb_i / d_i;  /* both whole and non-negative: the floor */\n"
                         "        const double v_m = (double)(p_i == 1 ? 1 : (q_i < p_i ? q_i : p_i));\n")
        elif name == "m_last":
            lines.append("        const double v_m_last = 1.0;\n")
        elif name == "_mb":
            lines.append(f"        const double v__mb = {raw('_mb_raw')};\n")
        elif name == "_comm":  # (x > 1)·size per communicator, summed from 0 in this order (plan._kernel_env)
            terms = "0.0"
            for j, letter in enumerate(("t", "d", "p", "c")):
                terms = f"({terms} + ({raw(letter)} > 1.0 ? sizes[{j}] : 0.0))"
            lines.append(f"        const double v__comm = {terms};\n")
        else:
            lines.append(f"        const double v_{_c_name(name)} = {raw(name)};\n")

    def ref(i: int) -> str:
        key = nodes[i]
        if key[0] == "const":
            return f"({float(key[1]).hex()})"  # exact; parenthesised, so a sign never meets an operator
        if not is_array[i]:
            return f"scalar[{position[i]}]"
        if key[0] == "in":
            return "v_" + _c_name(key[1])
        return f"x{i}"

    for i, key in enumerate(nodes):
        if not (live[i] and is_array[i]) or key[0] in ("in", "const"):
            continue
        kind, args = key[0], [ref(a) for a in key[1:]]
        if kind in _C_OPERATOR:
            text = f"{args[0]} {_C_OPERATOR[kind]} {args[1]}"
        elif kind == "square":
            text = f"{args[0]} * {args[0]}"
        elif kind == "max":
            text = f"larger({args[0]}, {args[1]})"
        elif kind == "neg":
            text = f"-({args[0]})"
        elif kind == "ceil":
            text = f"ceil({args[0]})"
        else:
            raise ValueError(f"no C text for {kind!r}")
        lines.append(f"        const double x{i} = {text};\n")
    for slot, i in enumerate(graph.roots):
        if is_array[i]:  # a NaN's payload is the compiler's choice of operand, not numpy's: numpy's call then
            lines.append(f"        if ({ref(i)} != {ref(i)}) return 1;\n        out[{slot}][i] = {ref(i)};\n")
    lines.append("    }\n    return 0;\n}\n")
    return "".join(lines)


def _index(signature: Signature, name: str) -> int:
    for k, source in enumerate(signature.sources):
        if source.name == name:
            return k
    raise KeyError(name)


def _c_name(name: str) -> str:
    """A letter as part of a C identifier: letters, digits and underscores kept, anything else spelled
    by its code point (the letters are the plan's, ``ARG_NAMES``; this keeps the text C whatever they are)."""
    return "".join(ch if (ch.isascii() and (ch.isalnum() or ch == "_")) else f"_u{ord(ch):x}_" for ch in name)


def _prelude(graph, boundary: list[int]):
    """A Python function of the env (scalars as the numpy kernel reads them) giving the boundary scalars and
    every scalar output, each computed by the numpy kernel's own text for it."""
    nodes, live, is_array = graph.nodes, graph.live, graph.is_array
    wanted = set(boundary) | {i for i in graph.roots if not is_array[i]}

    def ref(i: int) -> str:
        key = nodes[i]
        if key[0] == "const":
            return repr(key[1])
        if key[0] == "in":
            return f"env[{key[1]!r}]"
        return f"x{i}"

    lines = ["def prelude(env):\n"]
    for i, key in enumerate(nodes):
        if live[i] and not is_array[i] and key[0] not in ("in", "const"):
            lines.append(f"    x{i} = {scalar_call(key[0], [ref(a) for a in key[1:]])}\n")
    order = sorted(wanted)
    lines.append(f"    return {{{', '.join(f'{i}: {ref(i)}' for i in order)}}}\n")
    scope = dict(SCOPE)
    exec(compile("".join(lines), "<symbolic sweep kernel prelude>", "exec"), scope)  # written above only
    return scope["prelude"]


def _compile(c_source: str):
    """``c_source`` compiled and loaded (its ``sweep_kernel``), or None where that fails."""
    command = compiler()
    if command is None:
        return None
    folder = None
    try:
        folder = tempfile.mkdtemp(prefix="symbolic-kernel-")
        c_path, library_path = os.path.join(folder, "kernel.c"), os.path.join(folder, "kernel.so")
        with open(c_path, "w", encoding="ascii") as handle:
            handle.write(c_source)
        done = subprocess.run([*command, "-O2", "-ffp-contract=off", "-fPIC", "-shared", "-o", library_path, c_path,
                               "-lm"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            return None
        function = ctypes.CDLL(library_path).sweep_kernel
    except (OSError, subprocess.SubprocessError, UnicodeError, AttributeError):
        return None
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 6
    return function


def run(kernel: NativeKernel, values, micro_batches, n: int, outs: list, params_hand) -> list | None:
    """The outputs of one call (each array output in ``outs[i]`` where that is an array, else a fresh
    one; a scalar output as the numpy kernel gives it), or None where an element lies outside the loop's
    cases (the numpy kernel then evaluates the call)."""
    sources = kernel.signature.sources
    width = max(len(sources), 1)
    columns, whole, given = (ctypes.c_void_p * width)(), (ctypes.c_int64 * width)(), (ctypes.c_double * width)()
    env: dict = {}
    read = []  # the columns the loop reads, held (and checked again) for the call
    for k, source in enumerate(sources):
        x = micro_batches if source.name == "_mb_raw" else values.get(source.name, 1.0)
        if source.array:
            if not (isinstance(x, np.ndarray) and x.dtype == np.dtype(source.dtype) and x.shape == (n,)
                    and x.flags.c_contiguous and x.flags.aligned):
                return None
            read.append(x)
            columns[k] = x.ctypes.data
        else:
            env[source.name] = np.asarray(x, dtype=np.float64)  # the scalar the numpy kernel reads
            given[k] = float(env[source.name])
            if source.name in _INTEGER:
                whole[k] = int(x)
    if params_hand is not None:
        env["Psi"] = float(params_hand)
    if not np.ndim(micro_batches):
        env["_mb"] = np.asarray(micro_batches, dtype=np.float64)
    scalars = kernel.prelude(env)
    boundary = (ctypes.c_double * max(len(kernel.boundary), 1))(*(float(scalars[i]) for i in kernel.boundary))
    sizes = (ctypes.c_double * len(kernel.comm_sizes))(*kernel.comm_sizes)
    targets = (ctypes.c_void_p * max(len(kernel.roots), 1))()
    results: list = []
    for slot, (i, array) in enumerate(zip(kernel.roots, kernel.shapes)):
        if not array:
            results.append(scalars[i])
            continue
        target = outs[slot]
        if target is None:
            target = np.empty(n)
        elif not _writable_column(target, n) or any(np.may_share_memory(target, x) for x in read + results[:slot]):
            return None  # a strided, read-only or overlapping table: numpy's ufuncs write it as it is
        results.append(target)
        targets[slot] = target.ctypes.data
    if kernel.function(n, columns, whole, given, boundary, sizes, targets) != 0:
        return None
    return results


def _writable_column(x, n: int) -> bool:
    """An array the loop may write ``n`` doubles into, one after another."""
    return (isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == (n,) and x.flags.c_contiguous
            and x.flags.aligned and x.flags.writeable)
