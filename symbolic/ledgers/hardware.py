"""Hardware as data: the figures the step-time model needs, one file per GPU kind.

``symbolic/data/hardware/*.json`` hold, per GPU kind, its dense BF16/FP8 peak,
HBM size and bandwidth, NVLink bandwidth per direction and the size of its
NVLink domain, inter-node bandwidth per GPU, the achievable fractions of each
(GEMM efficiency as a stated function of the GEMM's size), and the latencies
of NCCL's ring model — each figure with its source under ``sources``. A user
file of the same shape is read by the same validator: a missing or
out-of-range field is one line naming it and the fix.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..models.config import ConfigError

HARDWARE_DIR = Path(__file__).resolve().parent.parent / "data" / "hardware"
DEFAULT = "a100-80gb"

#: (field, meaning and unit) of every figure a hardware file must give.
FIGURES = {
    "peak_bf16_flops": "dense BF16 Tensor Core peak, FLOP/s",
    "hbm_bytes": "HBM capacity, B",
    "hbm_bandwidth": "HBM bandwidth, B/s",
    "nvlink_bandwidth": "NVLink bandwidth per GPU per direction, B/s",
    "nvlink_domain": "GPUs in one NVLink domain (a node: 8; GB200 NVL72: 72)",
    "internode_bandwidth": "network bandwidth per GPU per direction, B/s",
    "hbm_efficiency": "achievable fraction of the HBM bandwidth",
    "nvlink_efficiency": "achievable ring bus bandwidth / NVLink bandwidth",
    "internode_efficiency": "achievable ring bus bandwidth / network bandwidth",
}
LATENCIES = ("base", "nvlink_step", "network_step")


@dataclass(frozen=True)
class Plausible:
    """The physically plausible range of one hardware figure (inclusive), its unit and why."""

    low: float
    high: float
    unit: str
    why: str = ""


#: What a hardware file's figures may be: wide enough for any GPU built or announced (an H100's
#: 989 TFLOP/s, a GB200 NVL72's 72-GPU domain, 8 TB/s of HBM), narrow enough that no step time,
#: rate or fraction computed from them leaves the floats (1e-300 FLOP/s would make a step of 1e300 s,
#: and its products overflow to inf, then NaN). A new figure gets its range by one entry here;
#: :func:`plausible` checks every entry a file gives (a field missing from this table is refused
#: with "no stated range", so no unchecked number reaches the model).
PLAUSIBLE: dict[str, Plausible] = {
    "peak_bf16_flops": Plausible(1e12, 1e17, "FLOP/s", "1 TFLOP/s to 100 PFLOP/s per GPU"),
    "peak_fp8_flops": Plausible(1e12, 1e17, "FLOP/s", "1 TFLOP/s to 100 PFLOP/s per GPU"),
    "peak_fp4_flops": Plausible(1e12, 1e17, "FLOP/s", "1 TFLOP/s to 100 PFLOP/s per GPU"),
    "hbm_bytes": Plausible(1e9, 1e13, "B", "1 GB to 10 TB per GPU"),
    "hbm_bandwidth": Plausible(1e10, 1e14, "B/s", "10 GB/s to 100 TB/s"),
    "nvlink_bandwidth": Plausible(1e9, 1e13, "B/s", "1 GB/s to 10 TB/s per direction"),
    "nvlink_domain": Plausible(1, 10**5, "GPUs", "1 to 100,000 GPUs on one NVLink fabric"),
    "internode_bandwidth": Plausible(1e8, 1e13, "B/s", "0.1 GB/s to 10 TB/s per GPU"),
    "hbm_efficiency": Plausible(0.01, 1, "", "a fraction from 0.01 to 1"),
    "nvlink_efficiency": Plausible(0.01, 1, "", "a fraction from 0.01 to 1"),
    "internode_efficiency": Plausible(0.01, 1, "", "a fraction from 0.01 to 1"),
    "gemm_efficiency.threshold": Plausible(0, 1e18, "FLOP", "0 to 10^18 FLOPs per GEMM call"),
    "gemm_efficiency.fraction": Plausible(0.01, 1, "", "a fraction from 0.01 to 1"),
    "latency": Plausible(0, 0.999999, "s", "0 s to under 1 s"),
    "processor_usage": Plausible(0, 0.999999, "", "a fraction from 0 to under 1"),
}


def plausible(value, name: str, where: str, *, integer: bool = False, table: str | None = None) -> float | int:
    """``value`` of figure ``name`` as a float (an int if ``integer``), inside its range in :data:`PLAUSIBLE`
    (``table`` names the entry when it is not ``name``: ``latency`` for ``latency.base``), else one
    :class:`ConfigError` naming the field, the value and the range. Checked before any float is built,
    so a 400-digit integer is refused, not overflowed."""
    from ..core.inputs import clean

    entry = PLAUSIBLE.get(table or name)
    if entry is None:
        raise ConfigError(f"{where}: {name} has no stated range (add it to ledgers.hardware.PLAUSIBLE)")
    meaning = FIGURES.get(name, entry.unit)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {name} must be a number ({meaning}); got {clean(repr(value))[:60]}")
    if value != value or not entry.low <= value <= entry.high:
        shown = f"{value:.6g}" if isinstance(value, float) else (f"{value:,}" if abs(value) < 10**30
                                                                  else f"an integer of {len(str(abs(value)))} digits")
        raise ConfigError(f"{where}: {name} {shown} is outside the plausible range {entry.low:g}..{entry.high:g}"
                          f"{' ' + entry.unit if entry.unit else ''} ({entry.why})")
    if integer and value != int(value):
        raise ConfigError(f"{where}: {name} must be a whole number of {entry.unit}; got {value!r}")
    return int(value) if integer else float(value)
#: Calculon's default share of the SMs an overlapped collective occupies (calculon-ai/calculon
#: systems/a100_80g.json, h100_80g_nvl8.json: networks[].processor_usage), for a file that gives none.
PROCESSOR_USAGE = {"nvlink": 0.15, "network": 0.02}


@dataclass(frozen=True)
class Hardware:
    """One GPU kind. Bandwidths in B/s per GPU and per direction; latencies in s."""

    name: str
    peak_bf16_flops: float
    peak_fp8_flops: float | None
    hbm_bytes: float
    hbm_bandwidth: float
    nvlink_bandwidth: float
    nvlink_domain: int
    internode_bandwidth: float
    gemm_efficiency: tuple[tuple[float, float], ...]  #: (GEMM FLOPs per call ≥ threshold, fraction of peak), descending
    hbm_efficiency: float
    nvlink_efficiency: float
    internode_efficiency: float
    latency: dict = field(default_factory=dict)       #: NCCL ring model: base, nvlink_step, network_step (s)
    #: fraction of the GPU's compute a collective's kernels take while they run behind compute, by link
    #: (Calculon's ``processor_usage``: NVLink 0.15, network 0.02 in its systems/*.json)
    processor_usage: dict = field(default_factory=lambda: dict(PROCESSOR_USAGE))
    sources: dict = field(default_factory=dict)
    note: str = ""
    path: str = ""
    #: dense FP4 (NVFP4) Tensor Core peak, FLOP/s; None where the GPU has none or its file gives none
    peak_fp4_flops: float | None = None
    #: CUDA compute capability (major, minor) — what Transformer Engine checks a precision recipe against
    #: (``layout.precision``); None for a GPU that is not NVIDIA's or a file that gives none
    compute_capability: tuple | None = None

    def peak(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s of the GEMMs in ``dtype`` (fp8, fp4 where the GPU has it)."""
        if dtype == "fp4":
            if not self.peak_fp4_flops:
                raise ConfigError(f"{self.name} has no FP4 peak in its hardware file: choose an FP8 recipe")
            return self.peak_fp4_flops
        if dtype == "fp8":
            if not self.peak_fp8_flops:
                raise ConfigError(f"{self.name} has no FP8 peak: choose bf16 GEMMs or another --hardware")
            return self.peak_fp8_flops
        return self.peak_bf16_flops

    def efficiency(self, gemm_flops):
        """Fraction of peak a GEMM of ``gemm_flops`` FLOPs per call achieves: the
        step function of ``gemm_efficiency`` (works on numpy arrays; a Python number stays one)."""
        if isinstance(gemm_flops, (int, float)):
            return next((value for threshold, value in self.gemm_efficiency if gemm_flops >= threshold),
                        self.gemm_efficiency[-1][1])
        import numpy as np

        x = np.asarray(gemm_flops, dtype=np.float64)
        out = np.full(x.shape, self.gemm_efficiency[-1][1])
        for threshold, value in reversed(self.gemm_efficiency):
            out = np.where(x >= threshold, value, out)
        return out

    def describe(self) -> str:
        return (f"{self.name}: {self.peak_bf16_flops / 1e12:g} TFLOP/s bf16 dense, HBM {self.hbm_bytes / 1e9:g} GB at "
                f"{self.hbm_bandwidth / 1e9:g} GB/s, NVLink {self.nvlink_bandwidth / 1e9:g} GB/s × "
                f"{self.nvlink_efficiency:.2f} in domains of {self.nvlink_domain}, network "
                f"{self.internode_bandwidth / 1e9:g} GB/s × {self.internode_efficiency:.2f} per GPU")


def _number(data: dict, name: str, where: str, *, integer: bool = False, fraction: bool = False) -> float:
    """Figure ``name`` of ``data``, through :func:`plausible` (``fraction`` kept for callers: the
    efficiencies' range says it)."""
    return plausible(data.get(name), name, where, integer=integer)


def from_dict(data, where: str = "hardware file") -> Hardware:
    """Validate a hardware description (the shape of ``data/hardware/*.json``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a hardware file is a JSON object with {', '.join(FIGURES)}")
    from ..core.inputs import clean

    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: name must be a non-empty string")
    if len(name) > 200:
        raise ConfigError(f"{where}: name is {len(name):,} characters; give a GPU's name (at most 200)")
    name = clean(name.strip())  # escaped as config names are: no control character reaches a terminal
    figures = {key: _number(data, key, where, integer=key == "nvlink_domain", fraction=key.endswith("efficiency"))
               for key in FIGURES}
    fp8 = data.get("peak_fp8_flops")
    if fp8 is not None:
        fp8 = _number(data, "peak_fp8_flops", where)
    table = data.get("gemm_efficiency")
    if not isinstance(table, list) or not table or not all(
            isinstance(row, list) and len(row) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in row) for row in table):
        raise ConfigError(f"{where}: gemm_efficiency must be a list of [GEMM FLOPs threshold, fraction] pairs, "
                          "largest threshold first, the last one 0")
    for index, (threshold, fraction) in enumerate(table):
        plausible(threshold, f"gemm_efficiency[{index}][0]", where, table="gemm_efficiency.threshold")
        plausible(fraction, f"gemm_efficiency[{index}][1]", where, table="gemm_efficiency.fraction")
    thresholds = [row[0] for row in table]
    if thresholds != sorted(thresholds, reverse=True) or thresholds[-1] != 0 or any(x < 0 for x in thresholds):
        raise ConfigError(f"{where}: gemm_efficiency thresholds must descend and end with 0; got {thresholds}")
    if not all(0 < row[1] <= 1 for row in table):
        raise ConfigError(f"{where}: gemm_efficiency fractions must be in (0, 1]")
    latency = data.get("latency")
    if not isinstance(latency, dict):
        raise ConfigError(f"{where}: latency must be an object with {', '.join(LATENCIES)} in seconds")
    for key in LATENCIES:
        plausible(latency.get(key), f"latency.{key}", where, table="latency")
    usage = data.get("processor_usage", PROCESSOR_USAGE)
    if not isinstance(usage, dict) or set(usage) - set(PROCESSOR_USAGE):
        raise ConfigError(f"{where}: processor_usage must be an object with {', '.join(PROCESSOR_USAGE)}: the "
                          "fraction of compute an overlapped collective takes on that link, in [0, 1)")
    usage = dict(PROCESSOR_USAGE, **usage)
    for key, value in usage.items():
        plausible(value, f"processor_usage.{key}", where, table="processor_usage")
    fp4 = data.get("peak_fp4_flops")
    if fp4 is not None:
        fp4 = _number(data, "peak_fp4_flops", where)
    capability = data.get("compute_capability")
    if capability is not None:
        if not (isinstance(capability, list) and len(capability) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 100 for x in capability)):
            raise ConfigError(f"{where}: compute_capability must be [major, minor] (9.0: [9, 0]), "
                              f"not {capability!r}")
        capability = tuple(capability)
    sources = data.get("sources", {})
    if not isinstance(sources, dict):
        raise ConfigError(f"{where}: sources must be an object: figure name → where it comes from")
    return Hardware(name, figures["peak_bf16_flops"], fp8, figures["hbm_bytes"], figures["hbm_bandwidth"],
                    figures["nvlink_bandwidth"], figures["nvlink_domain"], figures["internode_bandwidth"],
                    tuple((float(x), float(y)) for x, y in table), figures["hbm_efficiency"],
                    figures["nvlink_efficiency"], figures["internode_efficiency"],
                    {key: float(latency[key]) for key in LATENCIES},
                    {key: float(value) for key, value in usage.items()}, dict(sources), clean(data.get("note", ""))[:500],
                    where, fp4, capability)


@cache
def builtin() -> dict[str, Hardware]:
    """The shipped hardware files by name and by alias (lower case)."""
    out = {}
    for path in sorted(HARDWARE_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        kind = from_dict(data, f"symbolic/data/hardware/{path.name}")
        for alias in [path.stem] + list(data.get("aliases", [])):
            out[alias.lower()] = kind
    return out


def names() -> list[str]:
    return sorted(path.stem for path in HARDWARE_DIR.glob("*.json"))


def load(text: str | None = None) -> Hardware:
    """A shipped GPU kind by name (``a100-80gb``, ``h100``, ``gb200-nvl72`` ...) or a
    path to a JSON file of the same shape. None: the papers' A100-80GB."""
    text = DEFAULT if text is None else text
    kinds = builtin()
    if text.lower() in kinds:
        return kinds[text.lower()]
    path = Path(text)
    if path.suffix == ".json" or path.exists():
        from ..core.inputs import clean, read_json_file

        try:  # a regular file only, size and depth capped (no FIFO, device or 10,000-deep JSON)
            data = read_json_file(path, what="--hardware file")
        except ConfigError:
            raise
        except (OSError, ValueError) as error:
            raise ConfigError(f"--hardware {clean(text)!r}: cannot read it ({clean(error)})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"--hardware {clean(text)!r}: a hardware file holds one JSON object, "
                              f"not a {type(data).__name__}")
        return from_dict(data, f"--hardware {clean(text)}")
    raise ConfigError(f"unknown hardware {text!r}; built-in: {', '.join(names())}, or a path to a JSON file "
                      "shaped like symbolic/data/hardware/a100-80gb.json")
