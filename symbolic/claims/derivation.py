"""``derive``: one registered quantity's expression under a layout's switches, as plain data.

The request is a named, frozen value (:class:`DeriveRequest`) that the CLI builds from its flags and
the Python API (:func:`symbolic.derive`) from keywords — each read by the same option schema
(:data:`symbolic.layout.options.OPTIONS`) where the option is one the other commands take too, so
``--tp 8`` and ``tp=8`` are refused or accepted alike. :func:`derivation` turns it into what
``derive --json`` prints: the expression, its paper form, its LaTeX and, given a model or values,
the expression at them.

A *letter* option (``tp``, ``cp``, ``pp``, ``interleave``, ``ep``, ``etp``, ``lora``) is a switch and
a value at once: ``True`` keeps the letter a symbol (t stays t); a number is also substituted.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..models.config import ConfigError

#: Short names a user types, and the registry entries they stand for.
ALIASES = {
    "activations": "activations.per_layer",
    "activations-total": "activations.stage",
    "interleave-factor": "activations.interleave_factor",
    "params": "params",
    "states": "states.per_gpu",
    "bytes-per-param": "states.bytes_per_param",
    "flops-forward": "flops.forward",
    "flops": "flops.model_training",
    "flops-hardware": "flops.hardware_training",
    "flops-per-token": "flops.kaplan_training_per_token",
    "comm-volume": "communication.traffic",
}

#: A letter option's name and the letter it substitutes.
LETTERS = (("tp", "t"), ("cp", "c"), ("pp", "p"), ("interleave", "v"), ("ep", "e"), ("etp", "e_t"))
#: Options that only substitute a letter's value.
VALUES = (("dp", "d"), ("seq", "s"), ("micro_batch", "b"))
#: On/off switches.
SWITCHES = ("sp", "pipeline", "uneven", "fp8_activations", "double_quant")
#: One of the schema's choices (read by :data:`symbolic.layout.options.OPTIONS`).
CHOICES = ("recompute", "dtype", "optimizer", "zero", "lora_targets", "base_dtype", "offload")
#: Options with a value of their own: (name, the values taken).
OWN = {"tied": (None, True, False), "positions": (None, "rope", "learned")}


@dataclass(frozen=True)
class DeriveRequest:
    """What ``derive`` is asked: the quantity (an alias of :data:`ALIASES` or a registry name), the
    model whose inventory and dimensions it is taken at (a built-in name or a config.json path), the
    inventory (``arch``: the model's, else ``gpt``), and the layout's switches and values."""

    quantity: str
    model: str | None = None
    arch: str | None = None
    tp: bool | int = False
    sp: bool = False
    cp: bool | int = False
    recompute: str = "none"
    dtype: str = "bf16"
    ep: bool | int = False
    etp: bool | int = False
    pipeline: bool = False
    pp: bool | int = False
    interleave: bool | int = False
    dp: int | None = None
    seq: int | None = None
    micro_batch: int | None = None
    uneven: bool = False
    fp8_activations: bool = False
    optimizer: str = "bf16-adam"
    zero: int = 0
    tied: bool | None = None
    positions: str | None = None
    lora: bool | int = False
    lora_targets: str = "all-linear"
    base_dtype: str = "bf16"
    double_quant: bool = True
    offload: str = "none"

    @classmethod
    def of(cls, source) -> "DeriveRequest":
        """From any object with the request's fields as attributes (the CLI's parsed arguments)."""
        return cls(**{item.name: getattr(source, item.name) for item in fields(cls)})

    def substitutions(self) -> dict[str, int]:
        """The letters given a value (``tp=8``: t = 8)."""
        return {letter: value for name, letter in LETTERS + VALUES
                if (value := getattr(self, name)) is not None and not isinstance(value, bool)}

    def on(self, name: str) -> bool:
        """Whether a letter option or switch is on (``tp=8`` is on, as ``tp=True``); ``pipeline`` also
        by ``pp``."""
        if name == "pipeline":
            return bool(self.pipeline or self.pp)
        return bool(getattr(self, name))


def request(quantity, model=None, **options) -> DeriveRequest:
    """A :class:`DeriveRequest` from the Python API's keywords, each read as its flag reads; a wrong
    name or value is one :class:`ConfigError` line naming the keyword, the value and the fix."""
    from ..layout.options import OPTIONS, _plain

    if not isinstance(quantity, str):
        raise ConfigError(f"quantity {_plain(quantity)}: give a quantity's name, e.g. 'activations'")
    known = {item.name for item in fields(DeriveRequest)} - {"quantity", "model"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"derive() got unknown option(s) {', '.join(map(_plain, unknown))}; options: "
                          f"{', '.join(sorted(known))}")
    letters = {name for name, _ in LETTERS} | {"lora"}

    def flag(name: str) -> str:
        return "--no-double-quant" if name == "double_quant" else "--" + name.replace("_", "-")

    def read(name: str, value):
        if name in letters and isinstance(value, bool):  # tp=True: the letter stays a symbol
            return value
        if name in SWITCHES or name in OWN:
            allowed = OWN.get(name, (True, False))
            if any(type(value) is type(choice) and value == choice for choice in allowed):
                return value
            raise ConfigError(f"{name}={_plain(value)}: give one of {', '.join(map(repr, allowed))} "
                              f"({flag(name)} on the command line)")
        if name == "arch":
            from ..models.architectures import ARCHITECTURES

            if value is None or (isinstance(value, str) and value in ARCHITECTURES):
                return value
            raise ConfigError(f"arch={_plain(value)}: choose from {', '.join(sorted(ARCHITECTURES))} "
                              "(--arch on the command line)")
        if value is None and name in {n for n, _ in VALUES}:
            return None
        return OPTIONS[name].read(value)

    return DeriveRequest(quantity, None if model is None else str(model),
                         **{name: read(name, value) for name, value in options.items()})


def quantity_options(name: str, ask: DeriveRequest, arch: str) -> dict:
    """The registry function's keywords for quantity ``name`` under the request (inventory ``arch``)."""
    family = name.split(".")[0]
    if family == "activations":
        options = dict(tensor_parallel=ask.on("tp"), sequence_parallel=ask.sp, recompute=ask.recompute,
                       dtype=ask.dtype, pipeline=ask.on("pipeline"), interleaved=ask.on("interleave"))
        if ask.on("cp"):  # only when asked: the options printed for the other layouts stay as they were
            options["context_parallel"] = True
        if ask.on("ep"):
            options["expert_parallel"] = True
        if ask.on("etp"):
            options["expert_tensor_parallel"] = True
        if ask.fp8_activations:
            options["fp8_gemm_inputs"] = True
        if ask.uneven:
            options["uneven_stages"] = True
        if name == "activations.interleave_factor":
            options.pop("pipeline")
            options.pop("interleaved")
            options.pop("uneven_stages", None)
        return dict(options, arch=arch)
    if family == "params":
        given = {} if name == "params.kaplan" else {
            key: value for key, value in (("tied", ask.tied), ("positions", ask.positions)) if value is not None}
        return dict(arch=arch, **given)
    if name == "states.experts_per_gpu":
        return dict(arch=arch, recipe=ask.optimizer, zero=ask.zero, expert_parallel=ask.on("ep"),
                    expert_tensor_parallel=ask.on("etp"))
    if family == "states":
        return dict(recipe=ask.optimizer, **({"zero": ask.zero} if name == "states.per_gpu" else {}))
    if name in ("flops.hardware_training", "flops.recompute_ratio", "flops.recompute_ratio_leading"):
        return dict(arch=arch, recompute=ask.recompute)
    if family == "flops":
        return dict(arch=arch)
    if family == "communication":
        options = dict(arch=arch, sequence_parallel=ask.sp, recompute=ask.recompute, zero=ask.zero,
                       pipeline=ask.on("pipeline"), interleaved=ask.on("interleave"), context_parallel=ask.on("cp"),
                       dtype=ask.dtype, recipe=ask.optimizer)
        if ask.tied is not None:
            options["tied"] = ask.tied
        return options
    return {}


def model_and_arch(ask: DeriveRequest):
    """The request's model (or None) and the inventory it is derived in: ``arch`` if given (it must be
    the model's), else the model's — a composed family's own recipe, registered — else ``gpt``."""
    from ..layout.options import model_from_text

    model = model_from_text(ask.model) if ask.model else None
    if model is not None and ask.arch is not None and ask.arch != model.arch:
        raise ValueError(f"--arch {ask.arch} contradicts --model {model.name}, whose inventory is "
                         f"{model.arch}: drop --arch")
    arch = ask.arch
    if model is not None and model.arch == "composed" and arch is None:
        from ..models.architectures import composed  # the model's own recipe, in its own letters

        arch = composed.register(model)
    return model, arch or (model.arch if model is not None else "gpt")


def derivation(ask: DeriveRequest) -> dict:
    """What ``derive`` prints, as plain data (the ``--json`` object): the quantity, its options, the
    expression, its paper form and LaTeX; with values or a model, the expression at them."""
    from sympy import sstr

    from ..core.forms import paper_form, to_latex
    from ..core.numeric import substitute
    from .quantities import REGISTRY, evaluate

    if ask.quantity == "state-terms":
        raise ValueError("state-terms prints each term (derive state-terms), not one expression")
    name = ALIASES.get(ask.quantity, ask.quantity)
    if name not in REGISTRY:
        raise ValueError(f"unknown quantity {ask.quantity!r}; use one of {', '.join(ALIASES)} "
                         f"or a registry name ({', '.join(sorted(REGISTRY))})")
    model, arch = model_and_arch(ask)
    # a composed family with a router (Qwen3-MoE, DeepSeek) is a mixture of experts as the moe inventory is
    experts = arch == "moe" or (arch.startswith("composed:") and model is not None and bool(model.experts))
    if name == "states.per_gpu" and experts:  # the routed experts on their own grid
        name = "states.experts_per_gpu"
    if (ask.on("ep") or ask.on("etp")) and not experts and name.split(".")[0] in ("activations", "states"):
        raise ValueError("--ep/--etp split the routed experts: use them with --arch moe (or an MoE --model)")
    substitutions = ask.substitutions()
    options = quantity_options(name, ask, arch)
    expr = evaluate(name, **options)
    shown = paper_form(expr)
    entry = REGISTRY[name]
    data = {"quantity": name, "options": options, "unit": entry.unit, "expr": sstr(expr),
            "paper_form": sstr(shown), "latex": to_latex(shown), "doc": entry.doc}
    if substitutions:
        data["substituted"] = substitutions
    if substitutions and model is None:
        at_values = paper_form(substitute(expr, substitutions))
        data.update(at_values=sstr(at_values), at_values_latex=to_latex(at_values))
    if model is not None:
        # At the model's dimensions, the layout's letters (b, t, p, d, ...) stay symbols unless given.
        values = {**model.values(), **substitutions}
        at_model = paper_form(substitute(expr, values))
        data.update(model=model.name, model_values=values, at_model=sstr(at_model),
                    approximations=list(model.approximations), at_model_latex=to_latex(at_model))
    return data
