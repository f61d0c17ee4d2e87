"""Kernel efficiencies as data: what others measured on each GPU kind, and the rule for the rest.

``symbolic/data/kernels/`` holds published kernel micro-benchmarks, each table with its source,
repository, path and commit:

* ``b200.json`` and ``a100-pcie.json`` — SimuMax's system files (MooreThreads/SimuMax
  ``configs/system/``): GEMM efficiency by shape (m, n, k) and pass (Transformer Engine's TN forward,
  NN input gradient, NT weight gradient; the output m × n, the reduction k), grouped GEMM by
  (groups, M, N, K) and pass, the fused attention kernel forward and backward by (batch, sequence,
  heads, head dims), and the memory-bound kernels' bandwidth efficiency and fixed latency;
* ``index.json`` — the mamf-finder ceilings (stas00/ml-engineering, the maximum achievable BF16 and
  FP8 matmul as a fraction of the dense peak) and which ceiling row each hardware file is.

The rules, stated once (nothing here is fitted to published runs):

* **Interpolation over shapes:** a kernel takes the efficiency of the *nearest measured shape of the
  same pass* in log space (Euclidean distance of the logarithms of its dimensions; GEMM (m, n, k),
  grouped GEMM (groups, M, N, K), attention (sequence, batch × heads, head dim); rows equal in those
  dimensions — attention rows differing only in key/value heads — or equally near the shape, the first
  in the file's sorted order).
* **A GPU kind with no table of its own** borrows the measured kind nearest in dense BF16 peak (in
  log space), each efficiency scaled by the ratio of the two kinds' mamf-finder BF16 ceilings (the
  same benchmark on both) and capped at the borrower's ceiling; the bill names the approximation.
  The A100 SXM rows are the case that matters: no per-shape A100 SXM table is published (SimuMax's
  ``configs/system/a100_bf16.json``, deleted in 3005b17, was one flat 0.75 roofline factor, not a
  measurement), so they borrow the A100-PCIe table × 86.9 / 81.1 = 1.071. That ratio is
  mamf-finder's best GEMM on each card — the same 1,410 MHz boost clock and 312 TFLOPS datasheet
  peak, the SXM card at 400 W TDP against the PCIe card's 300 W (the same README @744d01e1) —
  measured under different PyTorch builds (2.6.0+cu126, 2.5.1+cu124) at different best shapes: it
  carries power limit and software together, and no published figure separates them.
* **FP8 GEMMs:** the tables publish none (SimuMax's ``fp8_matmul`` tables are empty): the BF16
  shape's efficiency × the kind's mamf-finder FP8 / BF16 ceiling ratio, against the FP8 peak.
* **A measured GEMM or attention time includes its own operand traffic:** a kernel priced from a
  table adds no separate HBM time (Calculon's FLOP + memory mode stays for a hardware file with no
  table).
* **The fused attention kernel** (``sdp_fwd``/``sdp_bwd``) was timed causal against the dense count
  2·b·s²·heads·(d_qk + d_v) forward and 2.5× that backward (SimuMax
  ``simu_tools/efficency_test/test_fa_efficiency.py``): the kernel executes half the s² work, so its
  efficiency on the work it executes is half the table's figure, and the time is the same either
  way: dense count / (peak × table figure).
* **NCCL collectives inside one NVLink node** (``collectives``, the B200 file only): SimuMax's
  per-collective bus efficiency and latency (its ``compute_net_op_time``): a ring of n ranks within
  the node moves its ring bytes at ``link_gbps`` GiB/s × the collective's efficiency, and pays
  ``latency_us_per_step`` × its ring steps (2(n − 1) for an all-reduce, n − 1 otherwise) plus a fixed
  latency (the figure for n ranks where the table gives one, else ``fixed_latency_us``). A fabric
  measurement, not a compute one: a borrowing kind does not take it (it keeps the hardware file's
  NCCL ring model), and send-recv and rings that cross nodes keep that model too.
* **Memory-bound kernels:** SimuMax's bandwidth figures (``gbps`` in GiB/s × ``efficient_factor``,
  plus ``latency_us`` per kernel, its ``compute_mem_access_time``) read as a fraction of the measured
  GPU's datasheet HBM bandwidth; ``ce`` is the cross-entropy (loss) kernel's own.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from . import arrays as np  # numpy for a plan's arrays, plain floats for a bill's one layout

KERNELS_DIR = Path(__file__).resolve().parent.parent / "data" / "kernels"
PASSES = ("forward", "input_gradient", "weight_gradient")
#: A causal attention kernel executes half of the dense s² count its table figure is measured against.
CAUSAL_DENSE_OVER_EXECUTED = 2.0


@dataclass(frozen=True)
class Table:
    """Measured shapes of one kernel and pass: dimensions (n rows of d) and efficiencies (n)."""

    shapes: tuple                 #: the measured dimensions, one tuple per row
    efficiencies: tuple           #: the efficiency of each row

    @cached_property
    def log_shapes(self):
        return np.log(np.array(self.shapes, dtype=np.float64))

    @cached_property
    def efficiency(self):
        return np.array(self.efficiencies, dtype=np.float64)

    @cached_property
    def _grids(self) -> dict:
        """Distinct values per dimension (their bytes) → the efficiency of each combination
        (:func:`_nearest_rows`'s memo: a plan's lines and groups share them)."""
        return {}

    @cached_property
    def _python_rows(self) -> tuple:
        """(log-dimensions, efficiency) of each distinct shape, the first row of equal ones (argmin's)."""
        rows: dict = {}
        for shape, eff in zip(self.shapes, self.efficiencies):
            rows.setdefault(tuple(shape), (tuple(math.log(x) for x in shape), eff))
        return tuple(rows.values())

    def nearest(self, *dims):
        """The efficiency of the nearest measured shape (log space) for arrays of dimensions; of rows
        equally near (within :data:`TIE` in squared log distance: a shape midway between two rows, as
        (2048, 12288, 12288) is between (4096, 8192, 14336) and (4096, 14336, 8192)), the first in the
        file's order, so the choice never rests on the last place of a logarithm (numpy's SIMD ``log``
        and libm's differ there). One shape of Python numbers (a bill) is compared in Python, without
        numpy; arrays (a plan) by :func:`_nearest_rows`, each distinct shape compared once."""
        if np.symbolic(*dims):   # the calculator's expressions: the lookup as a function of them
            return nearest_efficiency(table_id(self), *dims)
        if np.scalar(*dims):
            logs = [math.log(max(float(x), 1.0)) for x in dims]
            distances = [sum((a - b) * (a - b) for a, b in zip(logs, row)) for row, _ in self._python_rows]
            near = min(distances)
            near += TIE * (1.0 + near)
            return np.Scalar(next(eff for d, (_, eff) in zip(distances, self._python_rows) if d <= near))
        return _nearest_rows(self, dims)


#: The tables a symbolic :meth:`Table.nearest` has named, by their id (:func:`table_id`): the
#: calculator page embeds each one's rows once, its lookup a call over them.
REGISTERED: list = []


def table_id(table: Table) -> int:
    """The index of ``table`` in :data:`REGISTERED` (added on first use; tables are cached per file)."""
    for index, known in enumerate(REGISTERED):
        if known is table:
            return index
    REGISTERED.append(table)
    return len(REGISTERED) - 1


def nearest_efficiency(table, *dims):
    """``Table.nearest`` as a sympy function of symbolic dimensions: ``nearest_efficiency(id, m, n, k)``,
    evaluated (by :meth:`Table.nearest`'s own Python rule) once every dimension is a number. The
    calculator page prints it as a call of one JavaScript function over the table's rows
    (``symbolic.render.page_time.NEAREST_JS``)."""
    return _nearest_function()(table, *dims)


@cache
def _nearest_function():
    from sympy import Float, Function

    class nearest_efficiency(Function):  # noqa: N801 (the printed name)
        """The efficiency of the nearest measured shape of table ``REGISTERED[id]`` (Table.nearest)."""

        def _eval_is_extended_real(self):
            return True

        def _eval_is_extended_positive(self):
            return True

        def _eval_is_finite(self):
            return True

        @classmethod
        def eval(cls, table, *dims):
            if table.is_Number and all(x.is_Number for x in dims):   # (the page's table id may be a symbol)
                return Float(REGISTERED[int(table)].nearest(*(float(x) for x in dims)))
            return None

    return nearest_efficiency


#: Squared log distances this close (relative to 1 + the distance) are a tie: far above the last-place
#: difference of two logarithm implementations (~10⁻¹⁵), far below any two distinct shapes' gap.
TIE = 1e-9


def _numpy():
    import numpy
    return numpy


#: Largest grid of distinct values per dimension (their product) priced whole; a plan's calls stay
#: under ~110 (GPT-3, Llama 3.1 70B, Mixtral on their plans), a sweep's may not.
GRID_LIMIT = 4096
#: Distinct-value grids remembered per table (each at most GRID_LIMIT efficiencies) before it starts over.
MEMO_LIMIT = 1024


#: Arrays up to this many elements have their distinct values remembered by content (:func:`_distinct`).
DISTINCT_MEMO_SIZE = 1 << 13
_DISTINCT: dict = {}  # (dtype, shape, the array's bytes) → (distinct values, each element's index), read-only


def _distinct(x, np_):
    """(sorted distinct values, each element's index among them) of one dimension's array: one sort
    and a binary search, not ``np.unique``'s several passes (an order less per call on a plan's arrays
    of tens to thousands). Remembered by the array's content (its bytes, up to
    :data:`DISTINCT_MEMO_SIZE` elements): a line's three passes look its m, n, k up in three orders, and
    a plan's lines and groups share dimensions, so each distinct array is sorted once (GPT-3's plan on
    1024 GPUs: 4,347 lookups of ~1,300 arrays); the same values as sorting it again."""
    if x.size == 1:
        return x.reshape(1), np_.zeros(x.shape, dtype=np_.intp)
    key = (x.dtype.str, x.shape, x.tobytes()) if x.size <= DISTINCT_MEMO_SIZE else None
    found = _DISTINCT.get(key) if key is not None else None
    if found is not None:
        return found
    ordered = np_.sort(x, axis=None)
    keep = np_.empty(ordered.size, dtype=bool)
    keep[0] = True
    np_.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    values = ordered[keep]
    index = np_.searchsorted(values, x)
    if key is not None:
        if len(_DISTINCT) >= MEMO_LIMIT:
            _DISTINCT.clear()
        values.flags.writeable = index.flags.writeable = False  # shared between callers: never written
        _DISTINCT[key] = (values, index)
    return values, index


def _first_nearest(table: Table, logs: list, np_):
    """The first nearest row (:data:`TIE`) of each shape whose log-dimensions broadcast from ``logs``,
    the squared distances summed dimension by dimension (left to right, as a sum over the last axis is)."""
    distance = 0.0
    for j, x in enumerate(logs):
        distance = distance + (x[..., None] - table.log_shapes[:, j]) ** 2
    near = distance.min(axis=-1, keepdims=True)
    return np_.argmax(distance <= near + TIE * (1.0 + near), axis=-1)


def _nearest_rows(table: Table, dims) -> object:
    """:meth:`Table.nearest` for arrays. A plan's shapes are products of a few letters (t, c, b, s),
    so each dimension takes few distinct values: those are found per dimension, and when the grid of
    their combinations is small (:data:`GRID_LIMIT`) every combination is priced at once and each
    element gathers its own, the grid remembered per table (the same values recur across a plan's
    lines, passes and groups); a larger grid prices only the combinations that occur. Either way each
    distinct shape is compared exactly, as a single shape is."""
    np_ = _numpy()
    arrays = [np_.asarray(x, dtype=np_.float64) for x in dims]
    shape = np_.broadcast_shapes(*(a.shape for a in arrays))
    distinct = [_distinct(a, np_) for a in arrays]
    values = [v for v, _ in distinct]
    indices = tuple(i for _, i in distinct)
    sizes = [v.size for v in values]
    if math.prod(sizes) <= GRID_LIMIT:
        memo = table._grids
        key = tuple(v.tobytes() for v in values)
        grid = memo.get(key)
        if grid is None:
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            d = len(values)
            logs = [np_.log(np_.maximum(v, 1.0)).reshape((1,) * j + (v.size,) + (1,) * (d - 1 - j))
                    for j, v in enumerate(values)]
            grid = memo[key] = table.efficiency[_first_nearest(table, logs, np_)]
        return grid[indices].reshape(shape)
    # The combinations that occur, numbered exactly (mixed radix over the per-dimension indices,
    # renumbered densely before the radix could pass 2⁶²).
    code, radix = np_.zeros(shape, dtype=np_.int64).ravel(), 1
    for index, size in zip(indices, sizes):
        if radix * size >= 1 << 62:
            _, code = np_.unique(code, return_inverse=True)
            code, radix = code.reshape(-1).astype(np_.int64), int(code.max()) + 1
        code = code * size + np_.broadcast_to(index, shape).ravel()
        radix *= size
    _, first, inverse = np_.unique(code, return_index=True, return_inverse=True)
    logs = [np_.log(np_.maximum(v, 1.0))[np_.broadcast_to(i, shape).ravel()[first]] for v, i in distinct]
    return table.efficiency[_first_nearest(table, logs, np_)][inverse.reshape(-1)].reshape(shape)


@dataclass(frozen=True)
class Collective:
    """One NCCL collective as measured inside one NVLink node (module docstring): its achieved bus
    bandwidth (B/s), its latency per ring step and its fixed latency (s), the latter by ring size."""

    bus_bandwidth: float
    step_latency: float
    fixed_latency: float
    fixed_latency_by_ranks: tuple = ()    #: ((ranks, seconds), ...) where the table gives one

    def latency(self, ranks, steps):
        """Seconds per call of a ring of ``ranks`` (arrays) with ``steps`` ring steps."""
        ranks = np.asarray(ranks, dtype=np.float64)
        fixed = np.zeros_like(ranks) + self.fixed_latency   # (arrays.zeros_like: a plan's or one bill's)
        for n, seconds in self.fixed_latency_by_ranks:
            fixed = np.where(np.equal(ranks, n), seconds, fixed)   # (an Eq for the calculator's symbols)
        return self.step_latency * np.asarray(steps, dtype=np.float64) + fixed


@dataclass(frozen=True)
class KernelTables:
    """The kernel efficiencies one GPU kind is priced with (its own tables or borrowed ones)."""

    hardware: str
    measured_on: str              #: the GPU the tables were measured on
    gemm: dict                    #: pass → Table over (m, n, k)
    grouped: dict                 #: pass → Table over (groups, M, N, K)
    attention: dict               #: "forward"/"backward" → Table over (sequence, batch × heads, head dim)
    scale: float                  #: borrower's ceiling / measured kind's ceiling (1 for its own tables)
    ceiling: float                #: the kind's mamf-finder BF16 ceiling (a cap on every GEMM efficiency)
    fp8_ratio: float | None       #: mamf-finder FP8 / BF16 ceiling of the kind (None: no FP8 figure)
    memory_efficiency: float      #: memory-bound kernels: achieved / datasheet HBM bandwidth
    loss_memory_efficiency: float  #: the cross-entropy kernel's own
    kernel_latency: float         #: fixed seconds per memory-bound kernel (SimuMax's latency_us)
    approximation: str            #: "" for measured tables, else the borrowing the bill names
    sources: tuple                #: "repository path @commit (what)" per table
    collectives: dict = field(default_factory=dict)  #: collective → :class:`Collective` (own tables only)
    #: pass → Table over (groups, M, N, K) of FP8 grouped GEMMs measured in FP8, as a fraction of the FP8 peak
    #: (``index.json``'s ``fp8_grouped``: DeepGEMM's H800 table); a pass without one is priced as BF16 × the FP8 ratio
    grouped_fp8: dict = field(default_factory=dict)

    def gemm_efficiency(self, stage: str, m, n, k, dtype: str = "bf16") -> np.ndarray:
        return self._scaled(self.gemm[stage].nearest(m, n, k), dtype)

    def grouped_efficiency(self, stage: str, groups, m, n, k, dtype: str = "bf16") -> np.ndarray:
        measured_fp8 = self.grouped_fp8.get(stage) if dtype == "fp8" else None
        if measured_fp8 is not None:  # measured in FP8 against the FP8 peak: no BF16 ceiling, no ratio
            return np.minimum(measured_fp8.nearest(groups, m, n, k), 1.0)
        table = self.grouped.get(stage)
        if table is None:
            return self.gemm_efficiency(stage, m, n, k, dtype)
        return self._scaled(table.nearest(groups, m, n, k), dtype)

    def attention_efficiency(self, stage: str, sequence, heads, head_dim) -> np.ndarray:
        if stage not in self.attention:   # a table with no attention rows: the forward GEMM of QKᵀ's shape,
            # counted dense as the attention tables are, at the causal kernel's half (a named approximation)
            return self.gemm_efficiency("forward", np.asarray(sequence) * np.asarray(heads), sequence, head_dim) \
                * CAUSAL_DENSE_OVER_EXECUTED
        return self._attention(stage, sequence, heads, head_dim)

    def _attention(self, stage: str, sequence, heads, head_dim) -> np.ndarray:
        """The table's figure (the dense count of a causal kernel / (time × peak): up to 2, the kernel
        executing half of it), scaled as GEMMs are and capped where the executed work would pass the peak."""
        return np.minimum(self.attention[stage].nearest(sequence, heads, head_dim) * self.scale,
                          CAUSAL_DENSE_OVER_EXECUTED)

    def _scaled(self, eff, dtype):
        eff = np.minimum(eff * self.scale, self.ceiling)
        if dtype in ("fp8", "fp4") and self.fp8_ratio is not None:   # FP4: the FP8 ratio (no FP4 ceiling published)
            eff = eff * self.fp8_ratio
        return eff

    def describe(self) -> str:
        own = f"measured on {self.measured_on}" if not self.approximation else self.approximation
        return (f"kernel tables {own}: GEMM efficiency of the nearest measured shape (log space) per pass, "
                f"capped at mamf-finder's {self.ceiling:.1%}; fused attention from its own table; memory-bound "
                f"kernels at {self.memory_efficiency:.1%} of HBM, the loss kernel at {self.loss_memory_efficiency:.1%}"
                + (f"; collectives inside a node at SimuMax's measured NCCL bus efficiency and latency "
                   f"({', '.join(f'{name} {c.bus_bandwidth / 1e9:,.0f} GB/s' for name, c in self.collectives.items())})"
                   if self.collectives else ""))


def _read(name: str) -> dict:
    return json.loads((KERNELS_DIR / name).read_text())


@cache
def _measured(file: str) -> tuple:
    return _tables_of(_read(file))


def _tables_of(data: dict) -> tuple:
    """A kernel file's tables (the shape of ``data/kernels/b200.json``; ``benchmarks/device_check.py``
    writes the same): GEMM and memory required, grouped GEMM and attention optional."""
    tables = data["tables"]
    gemm = {}
    for stage in PASSES:
        rows = [r for r in tables["gemm"]["rows"] if r[0] == stage]
        gemm[stage] = Table(tuple(tuple(r[1:4]) for r in rows), tuple(r[4] for r in rows))
    grouped = {}
    for stage in PASSES:
        rows = [r for r in tables.get("grouped_gemm", {}).get("rows", []) if r[0] == stage]
        if rows:
            grouped[stage] = Table(tuple(tuple(r[1:5]) for r in rows), tuple(r[5] for r in rows))
    attention = {}
    for stage in ("forward", "backward"):
        # Megatron-Core's query, key and value are views of one projection (not contiguous): that row
        # where the table has both.
        rows = tables.get(f"attention_{stage}", {}).get("rows", [])
        if not rows:
            continue
        kept = {tuple(r[:6]): r for r in rows if r[6]}
        kept.update({tuple(r[:6]): r for r in rows if not r[6]})
        rows = list(kept.values())
        attention[stage] = Table(tuple((r[1], r[0] * r[2], r[4]) for r in rows), tuple(r[7] for r in rows))
    memory = tables["memory"]
    datasheet = memory["datasheet_hbm_bandwidth"]

    def fraction(kernel):
        figures = memory["kernels"].get(kernel, memory["kernels"]["default"])
        return min(1.0, figures["gbps"] * 2**30 * figures["efficiency"] / datasheet)

    latency = memory["kernels"]["default"]["latency_us"] * 1e-6
    sources = tuple(f"{t['repository']} {t['path']} @{t['commit'][:8]} ({t['key']})" for t in tables.values())
    return data["gpu"], gemm, grouped, attention, fraction("default"), fraction("ce"), latency, sources


@cache
def _collectives(file: str) -> dict:
    return collectives_of(_read(file))


def collectives_of(data: dict) -> dict:
    """A kernel file's NCCL collectives inside one node (``tables.collectives``; {} where it has none)."""
    table = data["tables"].get("collectives")
    if not table:
        return {}
    link = table["link_gbps"] * 2**30
    def by_ranks(row):
        return tuple(sorted((int(n), us * 1e-6) for n, us in row.get("fixed_latency_us_by_ranks", {}).items()))

    return {name: Collective(link * row["efficiency"], row["latency_us_per_step"] * 1e-6,
                             row["fixed_latency_us"] * 1e-6, by_ranks(row))
            for name, row in table["rows"].items()}


@cache
def index() -> dict:
    return _read("index.json")


def ceiling(hardware_name: str, dtype: str = "bf16"):
    """mamf-finder's ceiling of a hardware file's GPU (None when the table has no row for it)."""
    data = index()
    row = data["ceilings"]["rows"].get(data["kinds"].get(hardware_name, ""))
    return None if row is None else row.get(dtype)


@cache
def for_hardware(hardware_name: str, peak_bf16_flops: float) -> KernelTables | None:
    """The kernel tables of a hardware file's GPU (by its ``name``): its own measured tables, or the
    nearest measured kind's by dense BF16 peak, scaled by the mamf-finder ceilings (module docstring).
    None for a GPU no ceiling row names (a user's hardware file): its own ``gemm_efficiency`` prices it."""
    data = index()
    own = ceiling(hardware_name)
    if own is None:
        return None
    if hardware_name in data["measured"]:
        measured = hardware_name
    else:
        def peak_of(name):
            if name in data.get("measured_peak_bf16_flops", {}):
                return data["measured_peak_bf16_flops"][name]
            from .hardware import builtin
            return next(hw.peak_bf16_flops for hw in builtin().values() if hw.name == name)
        measured = min(sorted(data["measured"]), key=lambda name: abs(math.log(peak_of(name) / peak_bf16_flops)))
    gpu, gemm, grouped, attention, memory, loss, latency, sources = _measured(data["measured"][measured])
    theirs = ceiling(measured)
    scale = own / theirs
    approximation = "" if measured == hardware_name else (
        f"borrowed from {gpu} (the measured kind nearest in dense BF16 peak), every efficiency × {scale:.3f} "
        f"(mamf-finder ceilings {own:.1%} / {theirs:.1%})")
    assumed = data.get("kinds_assumed", {}).get(hardware_name)
    if assumed:  # a ceiling read off another GPU's row: the answer says so, with whose
        approximation += f"; {assumed}"
    fp8 = ceiling(hardware_name, "fp8")
    own_fabric = _collectives(data["measured"][measured]) if measured == hardware_name else {}
    sources = sources if measured == hardware_name else tuple(x for x in sources if "(networks." not in x)
    grouped_fp8 = {}
    if hardware_name in data.get("fp8_grouped", {}):
        grouped_fp8, source = _fp8_grouped(data["fp8_grouped"][hardware_name])
        sources += (source,)
        approximation += ("; " if approximation else "") + (
            "FP8 grouped GEMMs' forward pass from DeepGEMM's H800 table (fine-grained scaling; a tensorwise "
            "recipe's kernel priced as fast), its gradient passes the BF16 tables × the FP8 ceiling ratio")
    return KernelTables(hardware_name, gpu, gemm, grouped, attention, scale, own,
                        None if fp8 is None else fp8 / own, memory, loss, latency, approximation,
                        # a borrower names the tables it takes, not the fabric it does not
                        sources, own_fabric, grouped_fp8)


@cache
def _fp8_grouped(file: str) -> tuple[dict, str]:
    """A table of FP8 grouped GEMMs measured in FP8 (``data/kernels/deepgemm-h800.json``): pass → Table of
    TFLOPS / the FP8 peak it was measured against, and its source line."""
    data = _read(file)
    peak = data["peak_fp8_tflops"]
    tables = {}
    for stage in PASSES:
        rows = [r for r in data["rows"] if r[0] == stage]
        if rows:
            tables[stage] = Table(tuple(tuple(r[1:5]) for r in rows), tuple(r[5] / peak for r in rows))
    source = data["source"]
    return tables, f"{source['repository']} {source['path']} @{source['commit'][:8]} ({source['key']})"


def from_file(path, hardware_name: str, ceiling_bf16: float) -> KernelTables:
    """The tables of a kernel file at ``path`` (one ``benchmarks/device_check.py`` wrote) for the GPU
    it was measured on, capped at ``ceiling_bf16``: how a measured figure replaces a borrowed one."""
    data = json.loads(Path(path).read_text())
    gpu, gemm, grouped, attention, memory, loss, latency, sources = _tables_of(data)
    return KernelTables(hardware_name, gpu, gemm, grouped, attention, 1.0, ceiling_bf16, None, memory, loss,
                        latency, "", sources, collectives_of(data))


__all__ = ["Collective", "KernelTables", "Table", "REGISTERED", "nearest_efficiency", "table_id", "collectives_of",
           "for_hardware", "from_file", "ceiling", "index", "PASSES"]
