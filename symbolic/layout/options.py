"""The one declared schema of what a user sets — every option's name, kind, range,
choices, unit and help — and the readers of user-typed quantities.

Both ways in are made from it and neither from the other: the command line
(``commands/_options.py`` turns an :class:`Option` into an argparse argument)
and the Python API (``api.py`` reads each keyword through :meth:`Option.read`).
It lives here, below both, so ``api.py`` needs nothing of ``commands/``.

The API's contract, kind by kind (:meth:`Option.read`):

- ``int``: a Python ``int`` in the stated range, or its text as the CLI reads it
  (``tp="8"`` is 8); a ``bool`` is not a count (``tp=True`` is refused);
- ``flag``: ``True`` or ``False`` only (``"no"`` is not a flag);
- ``choice``: one of the choices, in any spelling the CLI accepts
  (``dtype="bfloat16"``; ``zero=1`` or ``"1"``, never ``True``);
- ``memory``: text with its unit (``"80GB"``, ``"80GiB"``; for ``gpu_memory`` a
  GPU's name) — a bare number is refused: GB or GiB?;
- ``count``: an int or text with a suffix (``"7B"``);
- ``ratio``: text (``"1.25"``, ``"5/4"``), an int, a ``Fraction`` or a finite float;
- ``names``: comma-separated text or a list of names; ``text``: a string or a path;
- ``margin``: a size, a share (``"10%"``) or 0;
- ``launch``: ``(KIND, SOURCE)``, the CLI's ``--from KIND SOURCE``. The API has no ``launch=``
  keyword: ``symbolic.from_launch(KIND, SOURCE)`` reads the config into a value first, and its
  ``options()`` are the keywords (``framework=`` among them) — a reading to inspect, where a keyword
  would hide it.

What the user typed is known on both ways in: a parser made by :func:`record_typed` notes each
option given on the command line in ``args._typed``, and the API's keywords given are known by the
call. A ``--framework``/``framework=`` preset fills only the others (``layout.frameworks.apply_preset``),
so ``--optimizer bf16-adam`` typed at its default is kept.

Everything else is one :class:`~symbolic.models.config.ConfigError` naming the
keyword, the value and the fix. To add an option: one :class:`Option` entry in
:data:`OPTIONS` (then ``_options.add(group, "name")`` on the command line; the
API reads a keyword of that name through it by itself).

No user text reaches ``eval`` or ``sympify``: numbers are read with
``decimal.Decimal`` after a regular expression, with the exponent bounded
before any arithmetic (``1e99999999`` is refused, not computed).
"""
from __future__ import annotations

import argparse
import functools
import math
import re
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from ..core.inputs import clean
from ..models.config import ConfigError, ModelConfig
from ..models.losses import LOSS_KERNELS
from .choices import (BASE_DTYPES, FLOAT_ACTIVATION_DTYPES, LAUNCH_KINDS, LORA_TARGETS, MOE_DISPATCHERS, OFFLOAD_MODES,
                      OPTIMIZER_IMPLS, RECOMPUTE_POLICIES, SCHEDULE_NAMES, SP_INPUTS, ZERO_STAGES)
from .frameworks import FRAMEWORKS, NO_FRAMEWORK
from .precision import DEFAULT_FP8, PRECISIONS
from .recipes import RECIPES

#: Memory units, keyed in lower case (``80gb`` = ``80GB``); GB = 10^9 B, GiB = 2^30 B.
MEMORY_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
                "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
_MEMORY_BY_LOWER = {unit.lower(): size for unit, size in MEMORY_UNITS.items()}
COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}

#: Stated ranges of what a user types (inclusive). Beyond them a value is refused with the range.
LIMITS = {
    "gpus": 10**7, "tp": 10**7, "pp": 10**7, "dp": 10**7, "cp": 10**7, "ep": 10**7, "etp": 10**7,
    "micro_batch": 10**6, "global_batch": 10**9, "seq": 10**8, "interleave": 10**5,
    "params": 10**16, "memory": 10**18, "count": 10**6, "stage_layers": 10**6,
}
# ``lora`` (a rank) is bounded by the count's range here and by the model's hidden size in Layout.validate.

#: GPU memory by name (seed 004 §09: H100 → H200 → B200), the usable bytes per GPU.
#: H100 SXM 80 GB and H200 141 GB HBM3/HBM3e (NVIDIA datasheets); B200: 192 GB physical
#: HBM3e of which 180 GB usable (seed 004 §09; NVIDIA DGX B200 lists 1,440 GB for 8 GPUs).
GPU_MEMORY = {"h100": 80 * 10**9, "h200": 141 * 10**9, "b200": 180 * 10**9}

#: Accepted spellings of each activation dtype, and the canonical (printed) form.
DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "fp8": "fp8", "float8": "fp8", "f8": "fp8",
}

_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"


def _decimal(text: str) -> Decimal | None:
    """A finite decimal from ``[digits][.digits][e±digits]`` text, or None; the
    exponent is checked before the value is built (no ``1e99999999``)."""
    if not re.fullmatch(_NUMBER, text):
        return None
    exponent = re.search(r"[eE]([+-]?)([0-9]+)$", text)
    if exponent:
        digits = exponent.group(2).lstrip("0") or "0"
        if len(digits) > 3 or int(digits) > 60:  # beyond every stated range: the caller's range check decides
            return Decimal(0) if exponent.group(1) == "-" else Decimal(10) ** 61
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def parse_memory(text, field: str = "--gpu-memory") -> int:
    """'80GB', '80 gb', '80GiB', '1.5TB' -> bytes (an int is returned as it is,
    range-checked); for ``--gpu-memory`` a GPU's name (h100, h200, b200) -> its
    usable memory (:data:`GPU_MEMORY`). A bare number is refused: GB or GiB?"""
    if field == "--gpu-memory" and isinstance(text, str) and text.strip().lower() in GPU_MEMORY:
        return GPU_MEMORY[text.strip().lower()]
    if isinstance(text, int) and not isinstance(text, bool):
        value = Decimal(text)
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([A-Za-z]+)\s*", str(text or ""))
        number = _decimal(match.group(1)) if match else None
        unit = _MEMORY_BY_LOWER.get(match.group(2).lower()) if match else None
        if number is None or unit is None:
            raise ConfigError(f"{field} {clean(text)!r}: give a number with a unit, e.g. 80GB (10^9 B) or 80GiB "
                              f"(2^30 B); units: {', '.join(MEMORY_UNITS)}"
                              + (f"; or a GPU: {', '.join(GPU_MEMORY)}" if field == "--gpu-memory" else ""))
        value = number * unit if number <= LIMITS["memory"] else number
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {clean(text)!r} is not a positive whole number of bytes")
    if value > LIMITS["memory"]:
        raise ConfigError(f"{field} {clean(text)!r}: more than {LIMITS['memory']:.0e} B (1 EB), the stated range")
    return int(value)


def parse_count(text, field: str = "--params", limit: int = LIMITS["params"]) -> int:
    """'7B', '1.5b', '175e9', '7000000000' -> an exact positive integer, at most ``limit``."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = Decimal(text)
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([KMBTkmbt]?)\s*", str(text or ""))
        number = _decimal(match.group(1)) if match else None
        if number is None:
            raise ConfigError(f"{field} {clean(text)!r}: give a count such as 7B, 1.5B, 175e9 or 7000000000")
        value = number * COUNT_SUFFIXES[match.group(2).upper()] if number <= limit else number
    if value != value.to_integral_value() or value <= 0:
        raise ConfigError(f"{field} {clean(text)!r} is not a positive whole number")
    if value > limit:
        raise ConfigError(f"{field} {clean(text)!r}: more than {limit:,}, the stated range")
    return int(value)


def parse_memory_or_share(text, gpu_memory: int, field: str = "--margin") -> int:
    """'0', '4GB', '10%' (of ``gpu_memory``) -> bytes, below ``gpu_memory``."""
    text = str(text if text is not None else "").strip()
    if text.endswith("%"):
        share = _decimal(text[:-1].strip())
        if share is None or not 0 <= share < 100:
            raise ConfigError(f"{field} {clean(text)!r}: a share must be a number from 0% up to (not including) 100%")
        return int(share * gpu_memory / 100)
    if text in ("0", "0B", "0 B"):
        return 0
    margin = parse_memory(text, field)
    if margin >= gpu_memory:
        raise ConfigError(f"{field} {clean(text)!r} must be below the GPU memory ({gpu_memory:,} B)")
    return margin


@functools.lru_cache(maxsize=None)  # one type object per range: the same flag has the same type everywhere
def bounded_int(low: int, high: int, what: str = ""):
    """An argparse ``type``: an integer in [low, high] (``what`` names the range's reason)."""
    def parse(text: str) -> int:
        text = str(text).strip()
        if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is not an integer")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high:,}{what}")
        return value
    parse.__name__ = f"int[{low}..{high}]"
    parse.low, parse.high = low, high
    return parse


def bounded_float(low: float, high: float, low_open: bool = False):
    """An argparse ``type``: a finite decimal number in [low, high] ((low, high] if ``low_open``)."""
    def parse(text: str) -> float:
        number = _decimal(str(text).strip())
        if number is None:
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is not a number")
        if number > Decimal(repr(high)) or number < Decimal(repr(low)) or (low_open and number == Decimal(repr(low))):
            raise argparse.ArgumentTypeError(f"{clean(text)!r} is outside {'(' if low_open else '['}{low:g}, {high:g}]")
        return float(number)
    parse.__name__ = f"float[{low:g}..{high:g}]"
    return parse


def dtype(text: str) -> str:
    """An argparse ``type``: any spelling of an activation dtype -> its canonical name."""
    return DTYPE_ALIASES.get(str(text).strip().lower(), str(text))



def parse_ratio(text: str, field: str, limit: int = 1000, low: Fraction | int = 0) -> Fraction:
    """'1.25', '5/4', '1' -> an exact positive Fraction at most ``limit`` and at
    least ``low`` (never eval)."""
    match = re.fullmatch(r"\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*(?:/\s*([0-9]{1,30})\s*)?", str(text or ""))
    if not match or (match.group(2) is not None and int(match.group(2)) == 0):
        raise ConfigError(f"{field} {clean(text)!r}: give a positive number such as 1, 1.25 or 5/4")
    value = Fraction(Decimal(match.group(1))) / (int(match.group(2)) if match.group(2) else 1)
    if not 0 < value <= limit:
        raise ConfigError(f"{field} {clean(text)!r} must be positive and at most {limit}")
    if value < low:
        raise ConfigError(f"{field} {clean(text)!r} must be at least {low} (from {low} to {limit})")
    return value



def model_from_text(text: str) -> ModelConfig:
    """A built-in name or a config path -> the model, with every string that came
    from the file made safe to print (:func:`symbolic.core.inputs.clean`)."""
    from ..models.builtin import preset, presets

    if text in presets():
        return preset(text)
    path = Path(text)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        from ..models.hf import load_hf_config
        model = load_hf_config(path)
        return replace(model, name=clean(model.name), source=clean(model.source),
                       approximations=tuple(clean(note) for note in model.approximations))
    return preset(clean(text))  # the error naming the built-in models




# --- the schema -----------------------------------------------------------------

#: The kinds of option :meth:`Option.read` knows (see the module's docstring).
KINDS = ("int", "flag", "choice", "memory", "count", "ratio", "names", "text", "margin", "launch")

_interned_int = bounded_int  # (kept for commands/_options.py's imports)


def _plain(value) -> str:
    """``value`` for a message: its repr, control characters escaped, at most 60 characters."""
    text = clean(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Option:
    """One user-settable option, as the CLI and the API share it.

    ``name`` is the API's keyword (``micro_batch``) and, dashed, the flag
    (``--micro-batch``); ``kind`` one of :data:`KINDS`; ``low``/``high`` the
    inclusive range of an ``int`` (or ``ratio``); ``choices`` the allowed values
    of a ``choice`` (or ``names``); ``aliases`` other spellings of a choice;
    ``unit`` what a number means (printed in ``--help`` and in refusals)."""

    name: str
    kind: str
    help: str
    default: object = None
    low: object = None
    high: object = None
    choices: tuple = ()
    aliases: dict = field(default_factory=dict, hash=False, compare=False)
    unit: str = ""
    metavar: str | tuple | None = None
    #: the command line's spelling where it is not the name dashed (``--from``; a flag on by default,
    #: ``double_quant``, is turned off by ``--no-double-quant``)
    cli_flag: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.name.replace("_", "-")

    @property
    def type(self):
        """The argparse ``type`` (``None``: the command parses the text itself, with its own message)."""
        if self.kind == "int":
            return _interned_int(self.low, self.high)
        if self.kind == "choice" and self.aliases:
            return dtype if self.aliases is DTYPE_ALIASES else _alias_reader(self.name)
        if self.kind == "choice" and self.choices and all(isinstance(c, int) for c in self.choices):
            return int
        return None

    def argument(self, **overrides) -> tuple[tuple, dict]:
        """``(flags, keywords)`` for ``add_argument``; ``overrides`` replace the schema's (a command's own help,
        default ``None`` for "swept")."""
        keywords: dict = {"help": self.help, "default": self.default}
        if self.kind == "flag":  # off by default: --name turns it on; on by default: --no-name turns it off
            keywords["action"] = "store_false" if self.default else "store_true"
            keywords["default"] = bool(self.default)
            if self.cli_flag:
                keywords["dest"] = self.name
        elif self.kind == "launch":  # --from KIND SOURCE
            keywords.update(nargs=2, metavar=self.metavar, dest=self.name)
        else:
            if self.type is not None:
                keywords["type"] = self.type
            if self.kind == "choice":
                keywords["choices"] = self.choices
            if self.metavar:
                keywords["metavar"] = self.metavar
        keywords.update(overrides)
        if keywords.get("action") not in (None, "store", "append"):  # a switch takes no type nor metavar
            keywords.pop("type", None)
            keywords.pop("metavar", None)
        return (self.flag,), keywords

    def _refuse(self, value, fix: str) -> ConfigError:
        return ConfigError(f"{self.name}={_plain(value)}: {fix} ({self.flag} on the command line)")

    def read(self, value):
        """``value`` as the engine takes it, read as the CLI reads its text, or a
        :class:`ConfigError` naming the keyword, the value and the fix. ``None`` is
        "not given" for an option whose default is ``None``."""
        if value is None and self.default is None:
            return None
        if self.kind == "int" and type(value) is type(self.default) and value == self.default:
            return value  # the default, spelt as the schema spells it (seq=0: the model's; lora=0: off)
        reader = getattr(self, f"_read_{self.kind}")
        return reader(value)

    def _range(self) -> str:
        return f"{self.low:,}..{self.high:,}"

    def _read_int(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            why = "a bool is not a count" if isinstance(value, bool) else f"a {type(value).__name__} is not an integer"
            raise self._refuse(value, f"{why}; give an integer in {self._range()}")
        if isinstance(value, str):
            try:
                return self.type(value)
            except argparse.ArgumentTypeError as error:
                raise self._refuse(value, f"{error}; give an integer in {self._range()}") from None
        if not self.low <= value <= self.high:
            raise self._refuse(value, f"outside the stated range {self._range()}")
        return value

    def _read_flag(self, value):
        if not isinstance(value, bool):
            raise self._refuse(value, "a flag is True or False")
        return value

    def _read_choice(self, value):
        allowed = ", ".join(map(str, self.choices))
        if isinstance(value, bool):
            raise self._refuse(value, f"a bool is not a choice; choose one of {allowed}")
        if isinstance(value, str) and self.type is not None:
            try:
                value = self.type(value.strip())
            except (ValueError, argparse.ArgumentTypeError):
                pass
        if isinstance(value, (str, int)) and value in self.choices:
            return value
        raise self._refuse(value, f"choose one of {allowed}")

    def _read_memory(self, value):
        if isinstance(value, Path) or not isinstance(value, str):
            example = "'80GB' (10^9 B) or '80GiB' (2^30 B)"
            if self.name == "gpu_memory":
                example += f", or a GPU: {', '.join(GPU_MEMORY)}"
            why = ("a bare number has no unit" if isinstance(value, (int, float)) and not isinstance(value, bool)
                   else f"a {type(value).__name__} is not a size")
            raise self._refuse(value, f"{why}; give text with its unit, {example}")
        if self.name == "gpu_memory":
            return value  # a size or a GPU's name (its memory AND its hardware): ledgers.gpus.resolve reads it
        return parse_memory(value, self.flag)

    def _read_margin(self, value):
        if isinstance(value, int) and not isinstance(value, bool) and value == 0:
            return "0"
        if not isinstance(value, str):
            raise self._refuse(value, "give a size with its unit (4GB), a share of the GPU memory (10%) or 0")
        return value  # read against the GPU memory by parse_memory_or_share

    def _read_count(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise self._refuse(value, "give a count such as '7B', '175e9' or 7000000000")
        return parse_count(value, self.flag, self.high or LIMITS["params"])

    def _read_ratio(self, value):
        if isinstance(value, float) and math.isfinite(value):
            value = repr(value)
        elif isinstance(value, Fraction):
            value = f"{value.numerator}/{value.denominator}"
        elif isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise self._refuse(value, f"give a number such as 1, 1.25 or '5/4' from {self.low} to {self.high}")
        return parse_ratio(value, self.flag, self.high, self.low or 0)

    def _read_names(self, value):
        if isinstance(value, str):
            names = tuple(name.strip() for name in value.split(",") if name.strip())
        elif isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value):
            names = tuple(name.strip() for name in value if name.strip())
        else:
            raise self._refuse(value, "give a name, comma-separated names, or a list of names")
        unknown = [name for name in names if self.choices and name not in self.choices]
        if unknown:
            raise self._refuse(value, f"unknown {', '.join(map(_plain, unknown))}; choose from "
                               f"{', '.join(self.choices)}")
        return names

    def _read_launch(self, value):
        """``(KIND, SOURCE)``: a launch config's kind and its path or its parsed mapping (Megatron: its
        path or its command line, as text or a list of words)."""
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise self._refuse(value, f"give (KIND, SOURCE), KIND one of {', '.join(self.choices)}")
        kind, source = value
        if not isinstance(kind, str) or kind not in self.choices:
            raise self._refuse(value, f"KIND {_plain(kind)}: choose one of {', '.join(self.choices)}")
        if isinstance(source, Path):
            source = str(source)
        words = isinstance(source, (list, tuple)) and all(isinstance(word, str) for word in source)
        if not (isinstance(source, str) or words and kind == "megatron" or isinstance(source, dict)
                and kind != "megatron"):
            raise self._refuse(value, "SOURCE: give a path, or the command line as text or a list of words"
                               if kind == "megatron" else "SOURCE: give a path, or the config as a dict")
        return kind, source

    def _read_text(self, value):
        if isinstance(value, Path):
            return str(value)
        if not isinstance(value, str):
            raise self._refuse(value, f"give text{' (' + self.metavar + ')' if self.metavar else ''}")
        return value


@functools.lru_cache(maxsize=None)  # one type object per option: the same flag has the same type everywhere
def _alias_reader(name: str):
    def read(text: str):
        option = OPTIONS[name]
        return option.aliases.get(str(text).strip().lower(), str(text))
    read.__name__ = name
    return read


def _int(name: str, help: str, default=1, low: int = 1, high: int | None = None, metavar: str | None = None):
    return Option(name, "int", help, default, low, LIMITS.get(name, LIMITS["count"]) if high is None else high,
                  metavar=metavar)


#: Every option a user sets, by its API keyword. The CLI's flag is the name, dashed.
OPTIONS: dict[str, Option] = {option.name: option for option in (
    # the layout (symbolic.layout.Layout)
    _int("seq", "sequence length s (default: the model's training length, else 4096 capped by "
         "max_position_embeddings)", default=0),
    _int("micro_batch", "micro-batch size b (default 1)"),
    _int("tp", "tensor-parallel size t"),
    _int("pp", "pipeline-parallel size p"),
    _int("dp", "data-parallel size d"),
    _int("cp", "context-parallel size c: each sequence split over c ranks (GPUs = t·p·d·c)"),
    _int("ep", "expert-parallel size e: routed experts split over e ranks folded into t·d·c "
               "(Megatron-Core's expert_model_parallel_size; GPUs stay t·p·d·c)"),
    _int("etp", "expert tensor-parallel size e_t: each expert's FFN width split e_t ways "
                "(Megatron-Core's expert_tensor_parallel_size; default: tp)", default=0),
    _int("interleave", "model chunks per stage, interleaved schedule (v; 1 = plain 1F1B)"),
    _int("global_batch", "sequences per iteration (default micro-batch × dp)", default=0),
    _int("first_stage_layers", "layers on the first pipeline stage (Megatron-Core's "
         "--decoder-first-pipeline-num-layers; the others split the rest evenly)", default=0,
         high=LIMITS["stage_layers"], metavar="N"),
    _int("last_stage_layers", "layers on the last pipeline stage (Megatron-Core's "
         "--decoder-last-pipeline-num-layers)", default=0, high=LIMITS["stage_layers"], metavar="N"),
    Option("sp", "flag", "sequence parallelism over the TP group", False),
    Option("sp_inputs", "choice", "under --sp, what a linear layer keeps of its input: sharded (Megatron-Core: the "
           "sequence shard, re-gathered in backward) or gathered (PyTorch DTensor, torchtitan: the all-gathered "
           "input); default sharded, a --framework's own", "sharded", choices=SP_INPUTS),
    Option("recompute", "choice", "activation recompute: none, selective (Megatron-Core's, --recompute-modules), full, "
           "op-sac (torchtitan's per-op selective checkpointing: every other matmul's output and the attention "
           "kernel's kept; bill and timeline)", "none", choices=RECOMPUTE_POLICIES),
    Option("zero", "choice", "ZeRO stage over d", 0, choices=ZERO_STAGES),
    Option("optimizer", "choice", "model-state recipe (bytes per parameter)", "bf16-adam",
           choices=tuple(sorted(RECIPES))),
    Option("dtype", "choice", "activation dtype (bfloat16, float16, float32 spellings accepted); fp8 is the FP8 "
           f"training recipe {DEFAULT_FP8} (see --precision)", "bf16",
           choices=FLOAT_ACTIVATION_DTYPES, aliases=DTYPE_ALIASES),
    Option("moe_capacity_factor", "ratio", "tokens of the busiest expert over the balanced share s·b·k/E "
           "(1.25, 5/4; default 1; at least 1, at most E/k)", "1", low=1, high=1000, metavar="F"),
    Option("recompute_modules", "names", "with --recompute selective: Megatron-Core's modules recomputed, "
           "comma-separated (core_attn, moe_act, layernorm, mla_up_proj; default core_attn)", "",
           metavar="LIST"),  # the names are checked by Layout.validate, which says why one is not modelled
    Option("fused_swiglu", "flag", "the experts' SwiGLU as one fused kernel (keeps only its input)", False),
    Option("moe_dispatcher", "choice", "hf: HF's eager experts loop (what the traces check); alltoall: "
           "Megatron-Core's alltoall token dispatcher (permute/unpermute) and grouped experts", "hf",
           choices=MOE_DISPATCHERS),
    Option("moe_pad_to_capacity", "flag", "Megatron-Core's moe_pad_expert_input_to_capacity: every expert "
           "computes on its capacity C_f·s·b·k/E rows (with --moe-capacity-factor > 1, --moe-dispatcher alltoall)",
           False),
    Option("loss", "choice", "the loss kernel: eager (transformers, fp32 logits), vocab-parallel (Megatron), "
           "loss-parallel (PyTorch's loss_parallel on DTensor logits, torchtitan), "
           "fused (flash-attn / llm-foundry), chunked (torchtune), liger (fused linear CE); default: an HF model's "
           "eager, the papers' GPT models' vocab-parallel", None, choices=LOSS_KERNELS),
    Option("precision", "choice", "the training precision recipe, as Transformer Engine names it: bf16 (default), "
           "fp8-delayed (DelayedScaling), fp8-current (Float8CurrentScaling: tensorwise, current amax), fp8-blockwise "
           "(DeepSeek-V3's 1×128/128×128, Float8BlockScaling), mxfp8, nvfp4 (Blackwell only); each sets the GEMMs' "
           "dtype per pass, the saved linear inputs and the weight copies TE keeps; --dtype fp8 means "
           f"{DEFAULT_FP8}", None, choices=tuple(PRECISIONS)),
    Option("fp8_activations", "flag", "the linear layers' saved inputs kept in FP8 for backward "
           f"(Transformer Engine; DeepSeek-V3 §3.3.3); in a bill, the FP8 recipe {DEFAULT_FP8}", False),
    Option("schedule", "choice", "the pipeline schedule: 1f1b, interleaved (with --interleave v), the zero-bubble "
           "zb-h1, zb-h2, zb-v (Qi et al. 2024), DeepSeek's dualpipe (two parameter copies per rank) and dualpipev; "
           "default Megatron's 1F1B, interleaved under --interleave", None, choices=SCHEDULE_NAMES),
    Option("pipeline_layout", "text", "Megatron-Core's --pipeline-model-parallel-layout: the p·v virtual stages' "
           "layers in layer order, | between stages (E embedding, t layer, L loss; t*3, (tt|)*2 repeat), "
           "e.g. 'Et*3|t*3|(t*4|)*13t*3L' for 61 layers on --pp 4 --interleave 4", "", metavar="LAYOUT"),
    # memory levers
    _int("lora", "LoRA adapters of rank R; the base weights are frozen (no gradients, no optimizer states)",
         default=0, high=LIMITS["count"], metavar="R"),
    Option("lora_targets", "choice", "the weights LoRA adapts (default all-linear, as QLoRA)", "all-linear",
           choices=LORA_TARGETS),
    Option("base_dtype", "choice", "storage of the frozen base weights under --lora (nf4: QLoRA)", "bf16",
           choices=BASE_DTYPES),
    Option("double_quant", "flag", "NF4 constants in fp32, not double-quantised (QLoRA without DQ; "
           "double_quant=False in the API)", True, cli_flag="--no-double-quant"),
    Option("offload", "choice", "optimizer: ZeRO-Offload (gradients and optimizer states in CPU memory); "
           "optimizer-states: the optimizer states alone, gradients on the GPU (Megatron's --optimizer-cpu-offload); "
           "params: FSDP CPU offload (parameters too)", "none", choices=OFFLOAD_MODES),
    Option("optimizer_impl", "choice", "foreach: PyTorch's default step (fp32 temporaries); fused: FusedAdam "
           "(none)", "foreach", choices=OPTIMIZER_IMPLS),
    Option("activation_offload", "flag", "saved activations stream to CPU memory; a two-layer double buffer "
           "stays on the GPU", False),
    Option("flash_attention", "flag", "the fused attention kernel on a GPT layer: no s×s tensor saved "
           "(LLaMA/MoE have it)", False),
    # sizes and counts
    Option("gpu_memory", "memory", "memory per GPU to compare against (80GB, 80GiB, or h100, h200, b200)",
           None, unit="B", metavar="SIZE"),
    Option("gpu", "text", "the GPU: sets --gpu-memory and --hardware from one hardware file (h100, h200, b200, "
           "b300, gb200, gb300, a100-40gb, a100-80gb, h800, a800, mi300x, mi325x, mi355x, l40s, l4, rtx-4090, "
           "rtx-5090, rtx-6000-ada, rtx-a6000); --gpu-memory and --hardware override it", None,
           metavar="NAME"),
    Option("cpu_memory", "memory", "CPU memory per GPU's process, for what is offloaded", None, unit="B",
           metavar="SIZE"),
    Option("params", "count", "hand-filled parameter count for the model states (7B, 175e9)", None,
           high=LIMITS["params"], metavar="N"),
    Option("margin", "margin", "memory reserved for what the verdict leaves out: a size (4GB) or a share of "
           "--gpu-memory (10%%); default the bill's not-counted CUDA context and workspaces (0.50 GB); 0 drops it",
           None,
           unit="B", metavar="SIZE"),
    Option("nccl_buffsize", "memory", "NCCL_BUFFSIZE per channel (4MiB)", "4MiB", unit="B", metavar="SIZE"),
    Option("bucket", "memory", "gradient bucket, data parallel (25MiB)", "25MiB", unit="B", metavar="SIZE"),
    _int("nccl_channels", "NCCL channels per communicator (16)", default=16, high=1024, metavar="N"),
    # the step-time model
    Option("hardware", "text", "GPU kind (a100-80gb (default), a100-40gb, h100-sxm, h200, b200, gb200-nvl72, and every "
           "--gpu name) or a JSON file shaped like symbolic/data/hardware/a100-80gb.json", None, metavar="NAME|FILE"),
    Option("overlap", "choice", "communication hidden behind compute: default (DP grad reduce except its last "
           "bucket, param all-gather / ZeRO-3 prefetch; TP exposed), none, all (also TP)", "default",
           choices=("default", "none", "all")),
    _int("gpus_per_node", "GPUs per NVLink domain (default: the hardware's, 8; GB200 NVL72: 72)", default=None,
         high=LIMITS["tp"]),
    # where the layout comes from: a framework's defaults, a launch config
    Option("framework", "choice", "a framework's defaults for what was not typed: attention kernel, TP/DP overlap, "
           "distributed optimizer (ZeRO), buckets, prefetch, loss kernel, fp32 main gradients — each cited in the "
           "TIME section (symbolic/layout/frameworks.py); a typed option always wins. Not given: a layout with "
           "t, p, c or e > 1 of an HF config takes megatron-core's, said in the layout line; none: the bill's own",
           None, choices=(*FRAMEWORKS, NO_FRAMEWORK), aliases={name: name for name in (*FRAMEWORKS, NO_FRAMEWORK)},
           metavar="NAME"),
    Option("launch", "launch", "read the layout (and the model, if it names one) from a launch config: KIND is one "
           f"of {', '.join(LAUNCH_KINDS)}; SOURCE a file (Megatron: also the command line in quotes). Flags typed "
           "here win; what was taken, ignored and assumed is printed (the API: symbolic.from_launch)", None,
           choices=LAUNCH_KINDS, metavar=("KIND", "SOURCE"), cli_flag="--from"),
    # plan and solve
    _int("gpus", "number of GPUs N = t·p·d·c (at most 10^7)", default=None),
    _int("max_micro_batch", "largest micro-batch tried without --global-batch (powers of two; default 16)",
         default=16, high=LIMITS["micro_batch"]),
    _int("top", "layouts to show (0: all that fit; default 10)", default=10, low=0, high=10**9),
    Option("max", "choice", "what to maximise (its own layout option, if given, is ignored)", None,
           choices=("micro-batch", "seq"), aliases={"micro_batch": "micro-batch"}),
    # timeline
    Option("optimize", "names", "apply an optimisation (repeatable): zero, fp8-weights, fp8-optimizer, "
           "optimizer-offload, activation-offload, fp8-activations, flash-attention, fused-cross-entropy", (),
           metavar="NAME"),
    Option("stage", "text", "pipeline stage: first (most micro-batches in flight), last (the output side and loss), "
           "middle (uneven first/last counts: rank 1, the busiest middle stage) or a pipeline rank 0 … p−1 (a "
           "per-chunk layout or placed dense layers: any stage)", "first", metavar="STAGE"),
)}


def add(group, name: str, **overrides):
    """Add option ``name`` of :data:`OPTIONS` to an argparse parser or group (``overrides``: a command's own
    help or default)."""
    flags, keywords = OPTIONS[name].argument(**overrides)
    return group.add_argument(*flags, **keywords)


def read(name: str, value):
    """The API's reading of keyword ``name`` (:meth:`Option.read`)."""
    return OPTIONS[name].read(value)


# --- which options the user typed ------------------------------------------------
# argparse fills every option it was not given with its default, so a typed ``--optimizer bf16-adam``
# and the default look alike. A preset (``--framework``) or a launch config (``--from``) fills only what
# was not typed: every action of a parser made by :func:`record_typed` notes its ``dest`` in
# ``args._typed`` when its flag appears on the command line.

@functools.lru_cache(maxsize=None)
def _recording(base: type) -> type:
    """``base`` (an argparse Action) that also adds its ``dest`` to ``namespace._typed`` when called."""
    class Recording(base):
        def __call__(self, parser, namespace, values, option_string=None):
            super().__call__(parser, namespace, values, option_string)
            namespace._typed = frozenset(getattr(namespace, "_typed", ())) | {self.dest}

    Recording.__name__ = Recording.__qualname__ = base.__name__
    return Recording


def record_typed(parser) -> None:
    """Make every option later added to ``parser`` (and its groups) record that it was typed
    (:func:`typed`): argparse looks an ``action`` up in the parser's registry, by name or by class."""
    names = {"store": argparse._StoreAction, None: argparse._StoreAction, "store_const": argparse._StoreConstAction,
             "store_true": argparse._StoreTrueAction, "store_false": argparse._StoreFalseAction,
             "append": argparse._AppendAction, "append_const": argparse._AppendConstAction,
             "extend": argparse._ExtendAction, "count": argparse._CountAction,
             argparse.BooleanOptionalAction: argparse.BooleanOptionalAction}
    for key, base in names.items():
        parser.register("action", key, _recording(base))
    parser.set_defaults(_records_typed=True)


def typed(args) -> frozenset:
    """The options given on the command line (their dests) and the Layout fields a launch config set
    (``--from``: as if typed), which a preset leaves as they are."""
    return frozenset(getattr(args, "_typed", ())) | frozenset(getattr(args, "_launch_fields", ()))
