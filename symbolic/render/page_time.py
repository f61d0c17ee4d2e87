"""The step time as an expression: :func:`symbolic.ledgers.time.price` run once on symbols, for the
calculator page (issue 23 item 5).

``price`` is written over :mod:`symbolic.ledgers.arrays`, whose third backend builds sympy expressions
when its arguments are sympy (``where``/``maximum``/``minimum`` unevaluated functions, ``Table.nearest``
the function ``nearest_efficiency(table, dims…)``). Called with the layout's letters (t p d v b B s) as
symbols and each of ``TimeDerivation.expressions()`` as a symbol ``n_i`` (a number where the expression
is one), it returns the step time and each part of its breakdown as expressions of those symbols — the
bill's own pricing code, every branch kept as a selection, no second copy of the model. The page
evaluates the ``n_i`` from the derivation's expressions (its letters) and then this expression.

Condition: the pipeline's stages even (``pacing_stage`` needs L_1 and L_p: uneven stages are not a page
input) and no context parallelism (c = 1: no page input either).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

#: The layout's letters ``price`` reads (c is 1 on the page: no context-parallel input).
PRICE_LETTERS = ("t", "p", "d", "v", "b", "B", "s")
#: The breakdown's parts, in ``price``'s order (``StepTime.breakdown``).
PARTS = ("compute", "elementwise", "tp_exposed", "cp_exposed", "ep_exposed", "pp_exposed", "bubble",
         "dp_exposed", "zero3_exposed", "overlap_slowdown", "optimizer")
#: What :func:`priced` returns, in order: the step, its parts, the model and hardware FLOPs per GPU.
OUTPUTS = ("step", *PARTS, "model_flops", "hardware_flops")


def number_symbol(index: int):
    from sympy import Symbol
    return Symbol(f"n{index}", real=True)


def shell_numbers(expressions) -> list:
    """``n_i`` for each of ``TimeDerivation.expressions()``, the expression itself where it is a number
    (a pass count, a call's group of one: ``price``'s branches on it fold away)."""
    return [x if x.is_Number else number_symbol(i) for i, x in enumerate(expressions)]


@dataclass(frozen=True)
class PricedTime:
    """The step time of one derivation shell on one GPU kind as expressions (:data:`OUTPUTS`) of the
    letters and the ``n_i``; ``factors`` as ``price`` names them (the kernel tables, the overlap)."""

    outputs: tuple
    factors: dict
    peak: float


def priced(derivation, numbers, hardware, gemm_dtype: str = "bf16") -> PricedTime:
    """``price`` on symbols: ``numbers`` the values of ``derivation.expressions()`` (symbols, or the
    expressions themselves), the letters :data:`PRICE_LETTERS` as the dimension symbols."""
    from ..core.dims import SYMBOLS
    from ..ledgers.time import price

    letters = {name: SYMBOLS[name] for name in PRICE_LETTERS}
    step = price(derivation, list(numbers), letters, hardware, gemm_dtype=gemm_dtype)
    outputs = (step.step_seconds, *(step.breakdown[name] for name in PARTS), step.model_flops, step.hardware_flops)
    return PricedTime(outputs, step.factors, step.peak)


def evaluate(expr, values: dict) -> float:
    """``expr`` at ``values`` (names → numbers) as a float: every symbol replaced, the backend's functions
    evaluated by the numeric rules."""
    from sympy import Integer, sympify

    expr = sympify(expr)
    numbers = {x: (Integer(values[x.name]) if isinstance(values[x.name], int) else values[x.name])
               for x in expr.free_symbols}
    return float(expr.xreplace(numbers))


# --- the page's step-time section ------------------------------------------------

#: The GPUs the page prices time on: every shipped hardware file (``symbolic/data/hardware``' names, as
#: ``--gpu`` takes them; a test checks the list is the folder's). Their figures are page data
#: (:data:`HARDWARE_FIGURES`), so one printed function serves every GPU of a pricing class
#: (:func:`pricing_class`).
PAGE_GPUS = ("a100-40gb", "a100-80gb", "a800-80gb", "h100-sxm", "h800", "h200", "b200", "b300", "gb200-nvl72",
             "gb300-nvl72", "mi300x", "mi325x", "mi355x", "l40s", "l4", "rtx-4090", "rtx-5090", "rtx-6000-ada",
             "rtx-a6000")
#: The hardware figures ``price`` reads, as the page's symbols (``H.name`` in its functions): the file's
#: peaks, bandwidths, efficiencies, NVLink domain, NCCL latencies and processor usage, and the kernel
#: tables' scale, ceiling, FP8 ratio, memory-bound efficiencies and which embedded table each lookup reads
#: (:data:`TABLE_FIGURES`). ``peak_gemm_fp8`` is the FP8 peak, the BF16 one on a GPU with none (``price``
#: runs its FP8 GEMMs in BF16 there), ``fp8_ratio`` 1 where mamf-finder has no FP8 figure
#: (``KernelTables._scaled`` then leaves the efficiency as it is).
TABLE_FIGURES = tuple(f"table_{kind}_{stage}" for kind in ("gemm", "grouped") for stage in
                      ("forward", "input_gradient", "weight_gradient")) + ("table_attention_forward",
                                                                            "table_attention_backward")
#: The hardware file's figures: page figure → (``Hardware`` field, the key where the field is a dict).
HARDWARE_FIELDS = {"peak_bf16": ("peak_bf16_flops", None), "peak_gemm_fp8": ("peak_fp8_flops", None),
                   "hbm_bandwidth": ("hbm_bandwidth", None), "nvlink_bandwidth": ("nvlink_bandwidth", None),
                   "nvlink_efficiency": ("nvlink_efficiency", None), "nvlink_domain": ("nvlink_domain", None),
                   "internode_bandwidth": ("internode_bandwidth", None),
                   "internode_efficiency": ("internode_efficiency", None), "latency_base": ("latency", "base"),
                   "latency_nvlink_step": ("latency", "nvlink_step"),
                   "latency_network_step": ("latency", "network_step"),
                   "usage_nvlink": ("processor_usage", "nvlink"), "usage_network": ("processor_usage", "network")}
#: The kernel tables' figures: page figure → ``KernelTables`` field.
KERNEL_FIELDS = {"kernel_scale": "scale", "kernel_ceiling": "ceiling", "fp8_ratio": "fp8_ratio",
                 "memory_efficiency": "memory_efficiency", "loss_memory_efficiency": "loss_memory_efficiency"}
HARDWARE_FIGURES = (*HARDWARE_FIELDS, *KERNEL_FIELDS, *TABLE_FIGURES)


def hardware_symbol(name: str):
    from sympy import Symbol
    if name.startswith("table_"):   # an index into the page's tables (0 is one)
        return Symbol(f"hw_{name}", integer=True, nonnegative=True)
    return Symbol(f"hw_{name}", positive=True)


def _table_tables(tables) -> dict:
    """:data:`TABLE_FIGURES` → the :class:`~symbolic.ledgers.kernels.Table` of ``tables`` each names."""
    return {**{f"table_gemm_{stage}": table for stage, table in tables.gemm.items()},
            **{f"table_grouped_{stage}": table for stage, table in tables.grouped.items()},
            **{f"table_attention_{stage}": table for stage, table in tables.attention.items()}}


def hardware_values(hw) -> dict:
    """:data:`HARDWARE_FIGURES` of one hardware file and its kernel tables (the numbers ``price`` uses)."""
    from ..ledgers import kernels

    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    values = {figure: getattr(hw, field) if key is None else getattr(hw, field)[key]
              for figure, (field, key) in HARDWARE_FIELDS.items()}
    values.update({figure: getattr(tables, field) for figure, field in KERNEL_FIELDS.items()})
    values["peak_gemm_fp8"] = hw.peak_fp8_flops or hw.peak_bf16_flops
    if tables.fp8_ratio is None:
        values["fp8_ratio"] = 1.0
    return {**values, **{name: kernels.table_id(table) for name, table in _table_tables(tables).items()},
            **_fabric_values(hw, tables)}


def fabric_shape() -> tuple:
    """The measured in-node collectives of the page's GPUs that have their own (SimuMax's, the B200's):
    ((collective, (ranks with a fixed latency of their own, …)), …), the union over those GPUs. The page's
    functions take each one's figures as ``H.coll_*`` (:func:`_fabric_values`)."""
    from ..ledgers import kernels
    from ..ledgers.hardware import builtin

    shape: dict = {}
    for gpu in PAGE_GPUS:
        hw = builtin()[gpu]
        tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
        for name, measured in (tables.collectives if tables is not None else {}).items():
            shape.setdefault(name, set()).update(n for n, _ in measured.fixed_latency_by_ranks)
    return tuple((name, tuple(sorted(ranks))) for name, ranks in sorted(shape.items()))


def _fabric_name(collective: str, what: str) -> str:
    return f"coll_{collective.replace('-', '_')}_{what}"


def _fabric_values(hw, tables) -> dict:
    """The ``H.coll_*`` figures of ``hw``: its own measured collectives' (a ranks count its table has no
    figure for: the fixed latency, as ``Collective.latency`` falls back to); for a collective it has not
    measured, the NCCL ring model's own figures inside a node — the NVLink bus bandwidth × efficiency, the
    NVLink step latency, the base latency — so that ``link``'s measured branch gives the ring model's
    time exactly (inside a node no step crosses the network: latency = base + steps × NVLink step)."""
    out = {}
    for name, ranks in fabric_shape():
        measured = tables.collectives.get(name)
        if measured is None:
            bus, step, fixed, by = (hw.nvlink_bandwidth * hw.nvlink_efficiency, hw.latency["nvlink_step"],
                                    hw.latency["base"], {})
        else:
            bus, step, fixed, by = (measured.bus_bandwidth, measured.step_latency, measured.fixed_latency,
                                    dict(measured.fixed_latency_by_ranks))
        out.update({_fabric_name(name, "bus"): bus, _fabric_name(name, "step"): step,
                    _fabric_name(name, "fixed"): fixed,
                    **{_fabric_name(name, f"fixed_{n}"): by.get(n, fixed) for n in ranks}})
    return out


def pricing_class(hw) -> tuple:
    """What ``price`` branches on beyond :data:`HARDWARE_FIGURES` and the measured collectives' figures
    (:func:`fabric_shape`): which kernel tables the GPU's kind has (grouped GEMM and attention tables or
    not: the lookups' fallbacks). Every shipped GPU is of one class."""
    from ..ledgers import kernels

    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    if tables is None:  # the GEMM-size step function (hw.efficiency) is numeric only: no page function
        raise ValueError(f"{hw.name}: no kernel tables (index.json's ceilings): the page cannot price it")
    return tuple(sorted(_table_tables(tables)))


def symbolic_hardware(hw):
    """``hw`` and its kernel tables with :data:`HARDWARE_FIGURES` as symbols: ``price`` on them gives one
    class's expressions (:func:`pricing_class`: the structure stays ``hw``'s)."""
    from dataclasses import fields, replace

    from ..ledgers import kernels

    x = {name: hardware_symbol(name) for name in HARDWARE_FIGURES}
    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    changes: dict = {}
    for figure, (field, key) in HARDWARE_FIELDS.items():
        if key is None:
            changes[field] = x[figure]
        else:
            changes.setdefault(field, {})[key] = x[figure]
    symbolic = replace(hw, **changes)
    figures = {f.name: getattr(tables, f.name) for f in fields(tables)}
    looked_up = {name: _SymbolicTable(x[name]) for name in _table_tables(tables)}
    figures.update(gemm={stage: looked_up[f"table_gemm_{stage}"] for stage in tables.gemm},
                   grouped={stage: looked_up[f"table_grouped_{stage}"] for stage in tables.grouped},
                   attention={stage: looked_up[f"table_attention_{stage}"] for stage in tables.attention})
    figures.update({field: x[figure] for figure, field in KERNEL_FIELDS.items()})
    figures.update(collectives={
        name: kernels.Collective(hardware_symbol(_fabric_name(name, "bus")), hardware_symbol(_fabric_name(name, "step")),
                                 hardware_symbol(_fabric_name(name, "fixed")),
                                 tuple((n, hardware_symbol(_fabric_name(name, f"fixed_{n}"))) for n in ranks))
        for name, ranks in fabric_shape()})
    return symbolic, _SymbolicTables(**figures)


@dataclass(frozen=True)
class _SymbolicTable:
    """A kernel table chosen by the page's data: ``nearest`` is the lookup of table ``H.<figure>``."""

    table: object   #: the symbol of its id (:data:`TABLE_FIGURES`)

    def nearest(self, *dims):
        from ..ledgers.kernels import nearest_efficiency
        return nearest_efficiency(self.table, *dims)


@cache
def _symbolic_tables_class():
    from ..ledgers.kernels import KernelTables

    class SymbolicTables(KernelTables):
        """Kernel tables whose figures are symbols: ``describe`` (a formatted text) is the page's own."""

        def describe(self) -> str:
            return "the page's kernel tables (figures per GPU: page data)"

    return SymbolicTables


def _SymbolicTables(**figures):  # noqa: N802 (a class, built late: ledgers before render)
    return _symbolic_tables_class()(**figures)


#: The optimizer recipe and activation dtype the page's step time is priced for (beside the page's own
#: opening ones): ``Layout()``'s defaults, mixed-precision Adam with BF16 activations. Each further
#: choice multiplies the derivations (every model × SP × recompute × ZeRO × schedule) and the page.
TIME_OPTIMIZERS = ("bf16-adam",)
TIME_DTYPES = ("bf16",)
#: The LoRA bases the page prices time for (the LLaMA inventory: ``html.LEVER_ARCH``).
TIME_LORA_BASES = ("bf16", "int8", "nf4")
#: One compute line's numbers (TimeDerivation.expressions' eight per line), as the line functions' arguments.
LINE_FIELDS = ("flops", "gemm_flops", "hbm_bytes", "groups", "m", "n", "k", "passes")
#: The compute totals ``price(compute_totals=…)`` starts from (the page sums its lines into them).
TOTALS = ("gemm", "gemm_output", "paced_flops", "attention")


def combo_key(arch: str, tied: bool, positions: str, loss: str, sp: bool, recompute: str, zero: int,
              pipeline: str, optimizer: str, dtype: str, expert_parallel: bool, lora_base: str) -> str:
    """The page's key of one discrete time choice (the page's script builds the same from its inputs)."""
    return "|".join(str(x) for x in (arch, int(tied), positions, loss, int(sp), recompute, zero, pipeline, optimizer,
                                     dtype, int(expert_parallel), lora_base))


class _Printer:
    """sympy's JavaScript printer with doubles printed to round-trip (17 digits) and the backend's
    functions as the page's: ``where`` its own, ``maximum``/``minimum`` Math's, the table lookup
    ``nearestEfficiency`` (the page's runtime, :data:`NEAREST_JS`)."""

    def __init__(self):
        from sympy import Basic
        from sympy.printing.jscode import JavascriptCodePrinter

        memo: dict = {}

        class Printer(JavascriptCodePrinter):
            def _print_Float(self, expr):
                return repr(float(expr))

            def _print_Symbol(self, expr):
                if expr.name.startswith("hw_"):   # a hardware figure: the chosen GPU's (page data)
                    return "H." + expr.name[3:]
                return super()._print_Symbol(expr)

            def _print_Relational(self, expr):
                op = {"==": "===", "!=": "!=="}.get(expr.rel_op, expr.rel_op)
                return f"({self._print(expr.lhs)} {op} {self._print(expr.rhs)})"

            def _print(self, expr, **kwargs):
                # each distinct subexpression printed once (the functions share most of their terms): a
                # node's text depends on the node only (our Float's text does not depend on its depth), except
                # where its printing noted an unsupported node or a number symbol, whose declarations the
                # printer's doprint adds: those, and every node above them, are printed afresh each time
                if kwargs or not isinstance(expr, Basic):
                    return super()._print(expr, **kwargs)
                text = memo.get(expr)
                if text is None:
                    noted = self._noted()
                    text = super()._print(expr)
                    if self._noted() == noted:
                        memo[expr] = text
                return text

            def _noted(self) -> int:
                return len(getattr(self, "_not_supported", ())) + len(getattr(self, "_number_symbols", ()))

        self.printer = Printer({"user_functions": {"nearest_efficiency": "nearestEfficiency", "where": "where",
                                                   "maximum": "Math.max", "minimum": "Math.min"}})

    def __call__(self, expr) -> str:
        return self.printer.doprint(expr)


def _function(printer, arguments: str, outputs, prelude: str = "") -> str:
    """A JavaScript function of ``arguments`` returning ``outputs`` (a list), common subexpressions once."""
    from sympy import cse, sympify

    replacements, reduced = cse([sympify(x) for x in outputs], optimizations=None, order="none")
    body = "".join(f"const {name} = {printer(value)}; " for name, value in replacements)
    return f"function ({arguments}) {{ {prelude}{body}return [{', '.join(printer(x) for x in reduced)}]; }}"


def line_seconds(line, hardware, gemm_dtype: str, tables=True):
    """One compute line's seconds on ``hardware`` as an expression of its eight numbers (symbols q0…q7):
    ``price`` of a derivation of that line alone (``detail``: its ``compute_lines`` entry)."""
    from sympy import Integer, Symbol

    from ..core.dims import SYMBOLS
    from ..ledgers.time import TimeDerivation, price

    numbers = [Symbol(f"q{i}", real=True) for i in range(len(LINE_FIELDS))] + [Integer(0)] * 6
    letters = {name: SYMBOLS[name] for name in PRICE_LETTERS}
    step = price(TimeDerivation([line], None, None, None, None, []), numbers, letters, hardware,
                 gemm_dtype=gemm_dtype, detail=True, kernel_tables=tables)
    return step.compute_lines[0]["seconds"]


def rest_outputs(comm, numbers, hardware, tables=True):
    """The step time and its parts of the derivation's collectives, pacing, bubble and optimizer, from the
    compute totals (symbols G0…G3, :data:`TOTALS`) and ``numbers`` (its six totals and the classes')."""
    from sympy import Symbol

    from ..core.dims import SYMBOLS
    from ..ledgers.time import TimeDerivation, price

    totals = tuple(Symbol(f"G{i}", real=True) for i in range(len(TOTALS)))
    letters = {name: SYMBOLS[name] for name in PRICE_LETTERS}
    step = price(TimeDerivation([], None, None, None, None, list(comm)), list(numbers), letters, hardware,
                 compute_totals=totals, kernel_tables=tables)
    return (step.step_seconds, *(step.breakdown[name] for name in PARTS), step.model_flops, step.hardware_flops)


NEAREST_JS = """// Table.nearest (symbolic.ledgers.kernels), its rule as written there: squared distance of the logarithms
// of max(x, 1) to each row's, the first row within TIE·(1 + nearest) in the file's order.
function nearestEfficiency(id, ...dims) {
  const [rows, efficiencies] = TIME.tables[id];
  const logs = dims.map((x) => Math.log(Math.max(x, 1)));
  const distances = rows.map((row) => row.reduce((sum, x, i) => sum + (logs[i] - Math.log(x)) * (logs[i] - Math.log(x)), 0));
  let near = Math.min(...distances);
  near += TIME.tie * (1 + near);
  return efficiencies[distances.findIndex((d) => d <= near)];
}
function where(condition, a, b) { return condition ? a : b; }
"""


def time_section(combos: dict, arguments: tuple, batch, gpus: tuple = PAGE_GPUS) -> str:
    """The page's ``TIME`` table (JavaScript): ``combos`` maps :func:`combo_key` to (the arguments of
    :func:`symbolic.bill.timing.time_derivation`, the GEMM dtype); ``arguments`` the page's letters (the
    expressions' functions take them in this order), ``batch`` the page's B (b·d·G). Each derivation's
    expressions are printed once (shared across combos), its compute lines priced by a function per (kernel, pricing class) and the
    rest by a function per (collectives' shape, pricing class), the GPU's figures their argument ``H``; cached in the bill's cache folder by the combos' key and
    the package's fingerprint (``symbolic.bill.cache``)."""
    import json

    from ..bill.cache import entry_path

    key = json.dumps({"page-time": sorted(combos), "gpus": list(gpus), "arguments": [x.name for x in arguments],
                      "B": str(batch), "v": 2})
    if key in _SECTIONS:
        return _SECTIONS[key]
    path = entry_path(key, "page-time-")

    def build() -> tuple[str, str]:
        text = _time_section(combos, gpus, arguments, batch)
        return text, text

    text = cached_section(path, key, lambda text: text if text.startswith("const TIME") else None, build)
    _SECTIONS[key] = text
    return text


_SECTIONS: dict = {}   # this process's sections by key (a page rendered twice prints its time once)


def cached_section(path, key: str, load, build):
    """A page section (its step time, its formulas) read from the cache entry at ``path``
    (``symbolic.bill.cache.read_entry`` with ``load``), or built (``build()`` → (the section, the entry's
    text)) and written there. The build holds a lock file beside the entry (``flock``), and looks again once
    it has it: two processes sharing a cache folder (the test suite's two pytest-xdist workers, two
    ``calculator`` commands at once) build a section once — the second waits, then reads the first's entry
    (the build is ~10 s of CPU each). Without ``path`` (the cache off) it builds; where the lock cannot be
    taken (not POSIX, a folder that cannot be written) it builds unlocked, as before."""
    from ..bill.cache import read_entry, write_entry

    if path is None:
        return build()[0]
    if path.exists():
        found = read_entry(path, key, load)
        if found is not None:
            return found
    with _one_builder(path):
        if path.exists():  # built by another process while this one waited for the lock
            found = read_entry(path, key, load)
            if found is not None:
                return found
        section, text = build()
        write_entry(path, key, text)
    return section


@contextmanager
def _one_builder(path):
    """Held while this process builds the entry at ``path``: an exclusive ``flock`` on ``<entry>.lock`` (:func:`_lock_path`)
    (released by the kernel if the process dies, so a crashed build leaves no lock behind)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, each process builds its own (the entries are written atomically)
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(_lock_path(path), "a")
    except OSError:  # a folder that cannot be written: write_entry will not store the entry either
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_path(path):
    """The build lock beside the entry at ``path`` (:func:`_one_builder`, :func:`being_built`)."""
    return path.with_suffix(".lock")


def being_built(path) -> bool:
    """Whether another process holds the build lock of the entry at ``path`` now (:func:`_one_builder`'s
    ``flock``, probed without waiting): the page's renderer then builds its other section first, rather than
    wait for this one (the suite's two workers each build one of a cold page's two sections, not one both)."""
    if path is None or path.exists():
        return False
    try:
        import fcntl
        handle = open(_lock_path(path), "a")
    except (ImportError, OSError):
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def scope_text() -> str:
    """What the page's step time covers, in one line (the page names it where a choice is not priced)."""
    return (f"every inventory × SP × recompute × ZeRO × pipeline schedule × e, the {'/'.join(TIME_OPTIMIZERS)} "
            f"recipe at {'/'.join(TIME_DTYPES)} activations (and the page's opening ones), the eager loss (GPT: "
            f"and vocab-parallel), LoRA on the LLaMA inventory ({'/'.join(TIME_LORA_BASES)} bases), on "
            f"{', '.join(PAGE_GPUS)}")


def _time_section(combos: dict, gpus: tuple, arguments: tuple, batch) -> str:
    import json

    from sympy import Symbol

    from ..bill.timing import time_derivation
    from ..core.dims import B
    from ..ledgers import kernels
    from ..ledgers.hardware import builtin
    from ..ledgers.time import ComputeLine

    printer = _Printer()
    names = ", ".join(x.name for x in arguments)
    expressions: dict = {}          # printed expression → index
    kinds: dict = {}                # (kernel, attention core, gemm dtype, output side) → index
    line_sets: dict = {}            # lines (kind, output, attention, expression indices) → index
    signatures: dict = {}           # (comm shell, constants) → index
    shells: list = []               # per signature: (comm, numbers)
    table = {}

    seen: dict = {}                 # expression → index (the same expression in many combos printed once)

    def index(expr) -> int:
        found = seen.get(expr)
        if found is None:
            found = seen[expr] = _index(expr)
        return found

    def _index(expr) -> int:
        expr = expr.xreplace({B: batch})
        stray = expr.free_symbols - set(arguments)
        if stray:
            raise ValueError(f"time expression {expr}: {stray} not among the page's inputs")
        code = printer(expr)
        return expressions.setdefault(code, len(expressions))

    for name, (args, gemm_dtype) in combos.items():
        derivation = time_derivation(*args)
        values = derivation.expressions()
        lines, at = [], 0
        for line in derivation.compute:
            kind = kinds.setdefault((line.kernel, line.attention_core, gemm_dtype, line.name.startswith("output/")),
                                    len(kinds))
            lines.append((kind, int(line.name.startswith("output/")), int(line.attention_core),
                          tuple(index(x) for x in values[at:at + len(LINE_FIELDS)])))
            at += len(LINE_FIELDS)
        rest = values[at:]
        numbers = shell_numbers(rest)
        shell = tuple((c.key, c.group, c.collective, c.phase, c.overlap) for c in derivation.comm)
        signature = (shell, tuple((i, x) for i, x in enumerate(numbers) if x.is_Number))
        if signature not in signatures:
            signatures[signature] = len(signatures)
            shells.append((derivation.comm, numbers))
        table[name] = [line_sets.setdefault(tuple(lines), len(line_sets)), signatures[signature],
                       [index(x) for x in rest]]
    hardware = builtin()
    line_functions, rest_functions, gpu_data, classes = [], [], {}, {}
    for gpu in gpus:
        hw = hardware[gpu]
        tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
        kind = pricing_class(hw)
        if kind not in classes:       # the class's functions, printed once on its first GPU's structure
            classes[kind] = len(classes)
            shw, stables = symbolic_hardware(hw)
            line_functions.append([
                _function(printer, ", ".join(f"q{i}" for i in range(len(LINE_FIELDS))) + ", H",
                          [line_seconds(ComputeLine("output/x" if output else "layer/x", None, None, core, 0, kernel),
                                        shw, dtype, stables)])
                for (kernel, core, dtype, output) in kinds])
            functions = []
            for comm, numbers in shells:
                used = sorted({int(x.name[1:]) for x in numbers if isinstance(x, Symbol)})
                prelude = "".join(f"const n{i} = n[{i}]; " for i in used)
                functions.append(_function(printer, "G0, G1, G2, G3, n, " + ", ".join(PRICE_LETTERS) + ", H",
                                           rest_outputs(comm, numbers, shw, stables), prelude))
            rest_functions.append(functions)
        gpu_data[gpu] = {"name": hw.name, "peak": hw.peak("bf16"), "describe": hw.describe(),
                         "kernels": tables.describe(), "approximation": tables.approximation,
                         "class": classes[kind], "H": hardware_values(hw)}
    tables = [_rows(t) for t in kernels.REGISTERED]
    out = ["const TIME = {", f"  tie: {kernels.TIE!r},", f"  tables: {json.dumps(tables)},",
           "  exprs: [" + ",\n    ".join(f"function ({names}) {{ return {code}; }}" for code in expressions) + "],",
           f"  lineSets: {json.dumps([[list(x[:3]) + [list(x[3])] for x in s] for s in line_sets])},",
           f"  combos: {json.dumps(table)},", f"  gpus: {json.dumps(gpu_data)},",
           "  lines: [" + ",\n".join("[" + ",\n".join(fs) + "]" for fs in line_functions) + "],",
           "  rests: [" + ",\n".join("[" + ",\n".join(fs) + "]" for fs in rest_functions) + "],",
           "};", NEAREST_JS]
    return "\n".join(out)


def _rows(table) -> list:
    """A kernel table's distinct shapes (the first row of equal ones, as ``Table.nearest``'s Python rule
    keeps) and their efficiencies, for the page's ``nearestEfficiency``."""
    rows: dict = {}
    for shape, efficiency in zip(table.shapes, table.efficiencies):
        rows.setdefault(tuple(shape), efficiency)
    return [[list(shape) for shape in rows], list(rows.values())]


def not_priced_lines() -> dict:
    """The bill's ``timing.not_priced`` lines the page's choices can raise, by the page's condition:
    expert parallelism, LoRA under ZeRO-3, a quantised base, offload (each the one line its layout gets)."""
    from ..bill.timing import not_priced
    from ..layout.layout import Layout

    def one(layout):
        lines = not_priced(layout)
        if len(lines) != 1:
            raise ValueError(f"expected one not-priced line for {layout}, got {lines}")
        return lines[0]

    return {"ep": one(Layout(ep=2)), "lora_zero3": one(Layout(lora=16, zero=3)),
            **{f"base:{base}": one(Layout(lora=16, base_dtype=base)) for base in ("int8", "nf4")},
            **{f"offload:{kind}": one(Layout(offload=kind)) for kind in ("optimizer", "params")},
            "activation_offload": one(Layout(activation_offload=True))}


__all__ = ["HARDWARE_FIGURES", "hardware_symbol", "hardware_values", "pricing_class", "symbolic_hardware",
           "LINE_FIELDS", "NEAREST_JS", "OUTPUTS", "PAGE_GPUS", "PARTS", "PRICE_LETTERS", "PricedTime", "TIME_DTYPES",
           "TIME_LORA_BASES", "TIME_OPTIMIZERS", "TOTALS", "combo_key", "evaluate", "line_seconds", "not_priced_lines",
           "priced", "rest_outputs", "scope_text", "shell_numbers", "time_section"]
