"""The Python API: one function per question, named like the CLI command.

    >>> import symbolic
    >>> bill = symbolic.bill("llama-2-7b", tp=8, seq=4096, gpu_memory="80GB")
    >>> bill.fits
    True
    >>> print(bill)                      # the summary the CLI prints first  # doctest: +SKIP

``bill``, ``plan``, ``solve``, ``timeline`` and ``derive`` take the CLI's
options as keyword arguments (``--micro-batch`` is ``micro_batch=``; sizes and
counts as text, ``"80GB"``, ``"7B"``, or as integers of bytes and parameters)
and return a result whose ``str()`` is the command's summary, whose
``to_dict()`` is exactly what the command prints with ``--json``, and which
renders in Jupyter (``_repr_html_``, ``_repr_latex_``). Bad arguments raise
:class:`~symbolic.models.config.ConfigError` with the one-line message the
CLI prints (after ``symbolic COMMAND: error:``) — never a ``TypeError`` from
deep inside the engine.
"""
from __future__ import annotations

import json
from pathlib import Path

from .models.config import ConfigError, ModelConfig

#: The width ``str()`` of a result renders at: the notebook's and the README's.
WIDTH = 80


def _model(model) -> ModelConfig:
    from .commands._options import model_from_text

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, (str, Path)):
        return model_from_text(str(model))
    raise ConfigError(f"model {model!r}: give a built-in name (e.g. 'gpt-175b'), the path of an HF "
                      "config.json, or a ModelConfig")


def _positive(value, field: str, example: str, what: str, parse) -> int | None:
    """An int as it is (positive), text through ``parse`` (the CLI's reader), ``None`` as ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{field} {value!r}: give {example}")
    if isinstance(value, int):
        if value <= 0:
            raise ConfigError(f"{field} {value}: {what} must be positive")
        return value
    return parse(value, field)


def _size(value, field: str) -> int | None:
    """Bytes from ``"80GB"``/``"80GiB"`` or an int of bytes; ``None`` stays ``None``."""
    from .commands._options import parse_memory

    return _positive(value, field, "a size with a unit such as '80GB' or '80GiB', or bytes as an int",
                     "a memory size in bytes", parse_memory)


def _count(value, field: str) -> int | None:
    """A count from ``"7B"`` or an int; ``None`` stays ``None``."""
    from .commands._options import parse_count

    return _positive(value, field, "a count such as '7B' or 7000000000", "a parameter count", parse_count)


def _steady(global_batch, pp, micro_batch, dp):
    """Without a global batch, a pipeline in its steady state (``_options.steady_state_batch``)."""
    from .commands._options import steady_state_batch

    return steady_state_batch(global_batch, pp, micro_batch, dp)


def default_loss(config: ModelConfig) -> str:
    """The loss kernel of the model's usual stack (``symbolic.layout.layout.default_loss``)."""
    from .layout.layout import default_loss as usual

    return usual(config)


def _layout(**options):
    from .layout.layout import Layout

    for name in ("sp",):
        if not isinstance(options.get(name, False), bool):
            raise ConfigError(f"{name} must be True or False, got {options[name]!r}")
    return Layout(**options)


def _checked(function):
    """Call ``function`` with its arguments checked first: an unknown or missing
    option is a ConfigError naming it and the options there are (Python would
    raise TypeError), like every other bad argument."""
    import functools
    import inspect

    signature = inspect.signature(function)
    named = [name for name, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD]

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ConfigError(f"{function.__name__}(): {error}; options: {', '.join(named)}") from None
        return function(*args, **kwargs)

    return call


def _margin(margin, memory: int) -> int:
    """``--margin``: a size ("4GB"), a share ("10%"), 0, or bytes as an int; None: the bill's not-counted
    CUDA context and workspaces (``bill.evaluate.default_margin``)."""
    from .commands.plan import parse_margin

    if margin is None:
        return parse_margin(None, memory)

    if isinstance(margin, bool) or not isinstance(margin, (int, str)):
        raise ConfigError(f"--margin {margin!r}: give a size (4GB), a share of the GPU memory (10%) or bytes")
    if isinstance(margin, int):
        if margin < 0:
            raise ConfigError(f"--margin {margin}: a margin is 0 or more bytes")
        margin = f"{margin}B" if margin else "0"
    return parse_margin(margin, memory)


def _engine_errors(call):
    """Run ``call()``; a ValueError of the engine's validators becomes a ConfigError, as the CLI treats it."""
    try:
        return call()
    except ConfigError:
        raise
    except ValueError as error:
        raise ConfigError(str(error)) from None


class Result:
    """What every API call returns: ``str()`` the summary, ``to_dict()`` the
    ``--json`` object, ``text()`` the whole text output, notebook reprs."""

    command = ""

    def __init__(self, data: dict):
        self._data = data

    def to_dict(self) -> dict:
        """Exactly what ``symbolic COMMAND ... --json`` prints, as Python objects."""
        return json.loads(json.dumps(self._data))

    def summary(self, width: int = WIDTH) -> list[str]:
        raise NotImplementedError

    def text(self, width: int = WIDTH) -> str:
        """The command's whole text output at ``width`` columns."""
        return "\n".join(self.summary(width))

    def __str__(self) -> str:
        return "\n".join(self.summary(WIDTH))

    def __repr__(self) -> str:
        first = self.summary(WIDTH)
        verdict = next((line for line in first if line.startswith("VERDICT")), first[0])
        return f"<symbolic.{type(self).__name__}: {verdict}>"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text/plain: the summary
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from .render.notebook import summary_html

        return summary_html(self.summary(WIDTH), self.text(120), self._bar())

    def _bar(self):
        return None


class Bill(Result):
    """One model under one layout: the four ledgers (see ``bill --json`` in the README).

    ``bill.engine`` is the engine's :class:`symbolic.bill.evaluate.Bill` (its
    ``lines``, ``totals``, ``ledger(name)``); its attributes are reachable on
    this object too (``bill.totals``, ``bill.lines``)."""

    command = "bill"

    def __init__(self, engine, step=None):
        from .render.terminal import bill_data
        from .render.time import time_json

        self.engine, self.step = engine, step
        data = bill_data(engine)
        if step is not None:  # the TIME section's keys, as `bill --json` adds them
            data.update(time_json(step))
        super().__init__(data)

    def __getattr__(self, name):
        if name.startswith("_") or name == "engine":
            raise AttributeError(name)
        return getattr(self.engine, name)

    @property
    def total_bytes(self) -> int:
        return self.engine.totals["total_bytes"]

    @property
    def gpu_memory_bytes(self) -> int | None:
        return self.engine.totals.get("gpu_memory_bytes")

    @property
    def headroom_bytes(self):
        return self.engine.totals.get("headroom_bytes")

    @property
    def fits(self) -> bool | None:
        """Whether the total fits the GPU memory given (``None`` without one)."""
        head = self.headroom_bytes
        return None if head is None else head >= 0

    def summary(self, width: int = WIDTH) -> list[str]:
        from .render.summary import bill_summary

        return bill_summary(self._data, width)

    def _repr_html_(self) -> str:
        """The summary and the ledgers (the TIME section is in ``str(bill.text())``): a
        notebook's stored bill holds exact numbers only."""
        from .render.notebook import summary_html

        return summary_html(self.summary(WIDTH), self.text(120, time=False), self._bar())

    def text(self, width: int = WIDTH, brief: bool = False, time: bool = True) -> str:
        from .render.terminal import render_text

        from .render.time import time_json, time_lines

        extra = time_json(self.step) if self.step is not None else None
        text = render_text(self.engine, width=width, brief=brief, extra=extra)
        if self.step is None or brief or not time:
            return text
        from .render.summary import wrap_lines

        return text + "\n\n" + "\n".join(wrap_lines("\n".join(time_lines(self.step, self.engine)), width))

    def _bar(self):
        totals = self.engine.totals
        return (totals["model_states_bytes"], totals["activation_bytes"], totals.get("gpu_memory_bytes"))

    def _repr_latex_(self) -> str:
        from .render.notebook import bill_latex

        return bill_latex(self._data)


@_checked
def bill(model, *, seq: int = 0, micro_batch: int = 1, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1,
         sp: bool = False, recompute: str = "none", zero: int = 0, optimizer: str = "bf16-adam",
         interleave: int = 1, dtype: str = "bf16", global_batch: int = 0, params=None, gpu_memory=None,
         ep: int = 1, etp: int = 0, moe_capacity_factor="1", recompute_modules: str = "",
         fused_swiglu: bool = False, hardware: str | None = None, overlap: str = "default",
         gpus_per_node: int | None = None, lora: int = 0, lora_targets: str = "all-linear",
         base_dtype: str = "bf16", double_quant: bool = True, offload: str = "none",
         optimizer_impl: str = "foreach", flash_attention: bool = False, activation_offload: bool = False,
         cpu_memory=None, moe_dispatcher: str = "hf", moe_pad_to_capacity: bool = False,
         loss: str | None = None) -> Bill:
    """``symbolic bill``: the four ledgers of ``model`` (a built-in name, an HF
    ``config.json`` path or a ModelConfig) under a layout, against ``gpu_memory``
    (``"80GB"``, ``"80GiB"`` or bytes), and the step time on ``hardware`` (a GPU
    kind or a JSON file; default the A100-80GB). ``params`` is seed 001's
    hand-filled N (``"7B"``) for the model states."""
    from .bill.priced import priced_bill
    from .commands._options import parse_ratio, steady_state_batch

    config = _model(model)
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=steady_state_batch(global_batch, pp, micro_batch, dp), cp=cp, ep=ep, etp=etp,
                     moe_capacity=parse_ratio(moe_capacity_factor, "--moe-capacity-factor"),
                     recompute_modules=tuple(x.strip() for x in recompute_modules.split(",") if x.strip()),
                     fused_swiglu=fused_swiglu, lora=lora, lora_targets=lora_targets, base_dtype=base_dtype,
                     double_quant=double_quant, offload=offload, optimizer_impl=optimizer_impl,
                     flash_attention=flash_attention, activation_offload=activation_offload,
                     moe_dispatcher=moe_dispatcher, moe_pad_to_capacity=moe_pad_to_capacity,
                     loss=loss or default_loss(config))
    layout = _engine_errors(lambda: layout.validate(config))
    params_hand = _count(params, "--params")
    memory = _size(gpu_memory, "--gpu-memory")
    gpu, hidden = _time_model(hardware, overlap)
    cpu = _size(cpu_memory, "--cpu-memory")
    engine, step = _engine_errors(lambda: priced_bill(config, layout, gpu, overlap=hidden, gpus_per_node=gpus_per_node,
                                                      params_hand=params_hand, gpu_memory=memory, cpu_memory=cpu))
    return Bill(engine, step)


def _time_model(hardware, overlap):
    """(Hardware, Overlap) of the step-time model from their names, as the CLI reads them."""
    from .ledgers.hardware import load
    from .ledgers.time import OVERLAPS

    if overlap not in OVERLAPS:
        raise ConfigError(f"--overlap {overlap!r}: choose one of {', '.join(OVERLAPS)}")
    return _engine_errors(lambda: load(hardware)), OVERLAPS[overlap]


class Plan(Result):
    """Every valid layout on N GPUs, the fitting ones ranked (``plan --json``).
    ``layouts`` the ranked ones (dicts), ``best`` the first or ``None``."""

    command = "plan"

    def __init__(self, engine, shown, closest, elapsed: float = 0.0):
        from .commands.plan import render_json

        self.engine, self.shown, self.closest, self.elapsed = engine, shown, closest, elapsed
        super().__init__(json.loads(render_json(engine, shown, closest)))

    @property
    def layouts(self) -> list[dict]:
        return self.to_dict()["layouts"]

    @property
    def best(self) -> dict | None:
        return self.layouts[0] if self.layouts else None

    def summary(self, width: int = WIDTH) -> list[str]:
        from .render.summary import plan_summary

        return plan_summary(self._data, width)

    def text(self, width: int = WIDTH) -> str:
        from .commands.plan import render_text

        return render_text(self.engine, self.shown, self.closest, self.elapsed, width)


@_checked
def plan(model, *, gpus: int, gpu_memory, seq: int = 0, global_batch: int = 0, params=None,
         optimizer: str = "bf16-adam", dtype: str = "bf16", top: int = 10, margin=None, hardware: str | None = None,
         overlap: str = "default", max_micro_batch: int = 16, gpus_per_node: int | None = None,
         moe_capacity_factor="1", loss: str | None = None, **fixed) -> Plan:
    """``symbolic plan``: sweep every valid layout of ``model`` on ``gpus`` GPUs
    of ``gpu_memory``; ``fixed`` pins a choice (``tp=8``, ``sp=True``,
    ``recompute="selective"``, ``zero=1``, ``micro_batch``, ``pp``, ``dp``,
    ``cp``, ``interleave``)."""
    import time

    from .models.config import positive_int
    from .commands._options import parse_ratio
    from .search.plan import FIXABLE, plan as run_plan

    unknown = sorted(set(fixed) - set(FIXABLE))
    if unknown:
        raise ConfigError(f"plan() got unknown option(s) {', '.join(unknown)}; fixable choices: "
                          f"{', '.join(FIXABLE)}")
    config = _model(model)
    memory = _size(gpu_memory, "--gpu-memory")
    if memory is None:
        raise ConfigError("--gpu-memory is required: give a size such as '80GB'")
    positive_int("gpus", gpus)
    if not isinstance(top, int) or isinstance(top, bool) or top < 0:
        raise ConfigError(f"--top {top!r}: give 0 (all) or a positive count")
    margin_bytes = _margin(margin, memory)
    gpu, hidden = _time_model(hardware, overlap)
    start = time.perf_counter()
    result = _engine_errors(lambda: run_plan(
        config, gpus, memory, seq=seq, global_batch=global_batch, margin=margin_bytes,
        params_hand=_count(params, "--params"), optimizer=optimizer, dtype=dtype, hardware=gpu,
        max_micro_batch=max_micro_batch, gpus_per_node=gpus_per_node,
        fixed={name: fixed.get(name) for name in FIXABLE}, overlap=hidden,
        moe_capacity=parse_ratio(moe_capacity_factor, "--moe-capacity-factor"),
        loss=loss or default_loss(config)))
    elapsed = time.perf_counter() - start
    shown = result.ranked(top)
    return Plan(result, shown, None if shown else result.closest(), elapsed)


class Solve(Result):
    """The largest micro-batch or sequence length that fits (``solve --json``);
    ``answer`` the value (``None``: nothing fits)."""

    command = "solve"

    def __init__(self, engine):
        from .commands.solve import render_json

        self.engine = engine
        super().__init__(json.loads(render_json(engine)))

    @property
    def answer(self) -> int | None:
        return self.engine.answer

    def summary(self, width: int = WIDTH) -> list[str]:
        from .render.summary import solve_summary

        return solve_summary(self._data, width)

    def text(self, width: int = WIDTH) -> str:
        from .commands.solve import render_text

        return render_text(self.engine, width)


@_checked
def solve(model, *, max: str, gpu_memory, margin=None, params=None, seq: int = 0, micro_batch: int = 1,
          tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1, sp: bool = False, recompute: str = "none",
          zero: int = 0, optimizer: str = "bf16-adam", interleave: int = 1, dtype: str = "bf16",
          global_batch: int = 0, loss: str | None = None) -> Solve:
    """``symbolic solve``: the largest ``max`` (``"micro-batch"`` or ``"seq"``)
    for which the layout fits ``gpu_memory``, solved exactly and checked by the bill."""
    from .search.solve import solve_limit

    targets = {"micro-batch": "micro_batch", "micro_batch": "micro_batch", "seq": "seq"}
    if max not in targets:
        raise ConfigError(f"--max {max!r}: choose micro-batch or seq")
    config = _model(model)
    memory = _size(gpu_memory, "--gpu-memory")
    if memory is None:
        raise ConfigError("--gpu-memory is required: give a size such as '80GB'")
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=_steady(global_batch, pp, micro_batch, dp), cp=cp, loss=loss or default_loss(config))
    margin_bytes = _margin(margin, memory)
    return Solve(_engine_errors(lambda: solve_limit(config, layout, targets[max], memory, margin_bytes,
                                                    _count(params, "--params"))))


class Timeline(Result):
    """Memory over one training step (``timeline --json``): ``peak_bytes``,
    ``t_star``, the classes at the peak, the reserved memory."""

    command = "timeline"

    def __init__(self, data: dict, strategy: str, figure_data=None):
        self.strategy, self._figure = strategy, figure_data
        super().__init__(data)

    @property
    def peak_bytes(self) -> int:
        return self._data["peak_bytes"]

    @property
    def t_star(self) -> str:
        return self._data["t_star"]

    def summary(self, width: int = WIDTH) -> list[str]:
        from .render.summary import timeline_summary

        return timeline_summary(self._data, width)

    def text(self, width: int = WIDTH) -> str:
        from .commands.timeline import render_text

        return render_text(self._data, self.strategy, width)

    def figure(self):
        """The timeline drawn with matplotlib (seed 004 §04.2)."""
        from .render.memory_plot import timeline_figure

        result, reserved, title, memory = self._figure
        return timeline_figure(result, reserved, title, memory)


@_checked
def timeline(model, *, optimize=(), gpu_memory=None, nccl_buffsize="4MiB", nccl_channels: int = 16,
             bucket="25MiB", seq: int = 0, micro_batch: int = 1, tp: int = 1, pp: int = 1, dp: int = 1,
             cp: int = 1, sp: bool = False, recompute: str = "none", zero: int = 0, optimizer: str = "bf16-adam",
             interleave: int = 1, dtype: str = "bf16", global_batch: int = 0,
             loss: str | None = None) -> Timeline:
    """``symbolic timeline``: the four lifetime classes over one step, the peak
    and its phase t*; ``optimize`` names optimisations (``"flash-attention"``, ...)."""
    from .commands.timeline import report
    from .step.optimizations import apply
    from .step.timeline import CommSettings, MemoryOptions

    config = _model(model)
    if isinstance(optimize, str):
        optimize = [optimize]
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=_steady(global_batch, pp, micro_batch, dp), cp=cp, loss=loss or default_loss(config))
    if not isinstance(nccl_channels, int) or nccl_channels <= 0:
        raise ConfigError("--nccl-channels must be a positive integer")
    comm = CommSettings(_size(nccl_buffsize, "--nccl-buffsize"), nccl_channels, _size(bucket, "--bucket"))
    memory = _size(gpu_memory, "--gpu-memory")

    def build():
        applied, options = apply(list(optimize), layout, MemoryOptions(comm=comm))
        data, tl, result, reserved = report(config, applied, options, memory)
        return Timeline(data, tl.strategy.describe(), (result, reserved, f"{config.name}: {tl.strategy.describe()}",
                                                       memory))

    return _engine_errors(build)


class Derivation(Result):
    """A derived expression in the papers' letters (``derive --json``):
    ``expr`` (sympy), ``latex``; with a model, ``at_model``."""

    command = "derive"

    def __init__(self, data: dict):
        from .commands.derive import json_data

        self._latex_at_model = data.get("at_model_latex")
        super().__init__(json_data(data))

    @property
    def expr(self):
        """The expression as sympy, read back through the guarded formula reader."""
        from .core.dims import SYMBOLS
        from .core.expressions import parse_formula

        return parse_formula(self._data["expr"], SYMBOLS)

    @property
    def latex(self) -> str:
        return self._data["latex"]

    def summary(self, width: int = WIDTH) -> list[str]:
        from .commands.derive import render_text

        return render_text(self._data, width).split("\n")

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self._data['latex']}$"

    def _repr_html_(self):  # a formula reads best as LaTeX in a notebook
        return None


@_checked
def derive(quantity: str, *, model=None, **options) -> Derivation:
    """``symbolic derive``: the expression of ``quantity`` (``"activations"``,
    ``"flops-hardware"``, a registry name) under the options of ``derive``
    (``tp=True``, ``sp=True``, ``recompute="selective"``, ``arch="llama"``,
    ``pipeline=True``, ...); with ``model``, also at its dimensions."""
    import argparse

    from .commands import derive as command

    parser = argparse.ArgumentParser(add_help=False)
    command.add_arguments(parser)
    args = parser.parse_args([str(quantity)])
    known = set(vars(args)) - {"quantity", "model", "json", "latex"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"derive() got unknown option(s) {', '.join(unknown)}; options: {', '.join(sorted(known))}")
    choices = {action.dest: action.choices for action in parser._actions if action.choices}
    for name, value in options.items():
        if name in choices and value not in choices[name]:
            raise ConfigError(f"{name}={value!r}: choose from {', '.join(map(str, choices[name]))}")
        setattr(args, name, value)
    if isinstance(model, ModelConfig):
        raise ConfigError("derive(model=...) takes a built-in name or a config.json path")
    args.model = None if model is None else str(model)
    return Derivation(_engine_errors(lambda: command.derivation(args)))
