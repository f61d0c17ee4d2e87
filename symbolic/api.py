"""The Python API: one function per question, named like the CLI command.

    >>> import symbolic
    >>> bill = symbolic.bill("llama-2-7b", tp=8, seq=4096, gpu_memory="80GB")
    >>> bill.fits
    True
    >>> print(bill)                      # the summary the CLI prints first  # doctest: +SKIP

``bill``, ``plan``, ``solve``, ``timeline`` and ``derive`` take the CLI's
options as keyword arguments (``--micro-batch`` is ``micro_batch=``), each read
through the one option schema the CLI's parser is made from
(:mod:`symbolic.layout.options`): the CLI's spellings and Python's natural
types — counts as ints or their text, flags as ``True``/``False``, sizes as text
with a unit (``"80GB"``, ``"80GiB"``; a bare number is refused), parameter
counts as ``"7B"`` or an int — and return a result whose ``str()`` is the command's summary, whose
``to_dict()`` is exactly what the command prints with ``--json``, and which
renders in Jupyter (``_repr_html_``, ``_repr_latex_``). Bad arguments raise
:class:`~symbolic.models.config.ConfigError` with the one-line message the
CLI prints (after ``symbolic COMMAND: error:``) — never a ``TypeError`` from
deep inside the engine.
"""
from __future__ import annotations

import contextvars
import json
from pathlib import Path

from .core.inputs import clean
from .models.config import ConfigError, ModelConfig

#: The keywords the caller gave in the call being run (:func:`_checked` sets it): a ``framework=``
#: preset fills only the others, as ``--framework`` fills only the options not typed.
_TYPED: contextvars.ContextVar[frozenset] = contextvars.ContextVar("typed", default=frozenset())

#: The width ``str()`` of a result renders at: the notebook's and the README's.
WIDTH = 80


def _model(model) -> ModelConfig:
    from .layout.options import model_from_text

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, (str, Path)):
        return model_from_text(str(model))
    raise ConfigError(f"model {_plain(model)}: give a built-in name (e.g. 'gpt-175b'), the path of an HF "
                      "config.json, or a ModelConfig")


def _plain(value) -> str:
    from .layout.options import _plain as plain

    return plain(value)


def _gpu_choice(gpu, gpu_memory, hardware, required: bool = False):
    """``gpu=`` (a GPU's name: its memory and its hardware), ``gpu_memory=`` and ``hardware=`` overriding
    it, as the CLI's ``--gpu``, ``--gpu-memory`` and ``--hardware`` (:mod:`symbolic.ledgers.gpus`); each
    already read by the option schema (a size is bytes, a GPU's name stays text)."""
    from .ledgers.gpus import resolve

    choice = _engine_errors(lambda: resolve(gpu, gpu_memory, None if hardware is None else str(hardware)))
    if required and choice.memory is None:
        raise ConfigError("--gpu-memory is required: give a GPU (gpu='h100') or a size such as gpu_memory='80GB'")
    return choice


def _steady(global_batch, pp, micro_batch, dp):
    """Without a global batch, a pipeline in its steady state (``_options.steady_state_batch``)."""
    from .layout.layout import steady_state_batch

    return steady_state_batch(global_batch, pp, micro_batch, dp)


def _loss_under_tp(config: ModelConfig, loss: str) -> str | None:
    """``plan``'s kernel for its layouts with t > 1 (``symbolic.layout.layout.loss_under_tp``)."""
    from .layout.layout import loss_under_tp

    return loss_under_tp(config, loss)


def default_loss(config: ModelConfig, tp=1) -> str:
    """The loss kernel of the model's usual stack at ``tp`` (``symbolic.layout.layout.default_loss``)."""
    from .layout.layout import default_loss as usual

    return usual(config, tp if isinstance(tp, int) else 1)


def _levers(**given) -> dict:
    """plan's memory levers (LoRA, QLoRA's base, offload, activation offload) as Layout fields, those
    at their defaults left out (``Layout.memory_levers``, as ``commands._options.levers_from_args``)."""
    from .layout.layout import Layout

    return Layout(**given).memory_levers()


def _layout(**options):
    from .layout.layout import Layout

    # A flag that changes nothing (SP at t = 1, ZeRO at d·c = 1) is turned off with a note, as
    # Megatron-LM does: a UserWarning here, "note:" on the CLI's stderr.
    import warnings

    from .layout.layout import settle_no_ops
    from .layout.precision import read_precision

    # dtype="fp8" is an FP8 training recipe, as on the command line (layout.precision.read_precision)
    choice = read_precision(options.pop("dtype", "bf16"), options.pop("precision", None),
                            options.get("fp8_activations", False))
    if choice.note:
        warnings.warn(choice.note, UserWarning, stacklevel=3)
    layout, notes = settle_no_ops(Layout(dtype=choice.dtype, precision=choice.precision, **options))
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=3)
    return layout


def _read_options(arguments: dict, extra: str | None, read_extra: bool) -> dict:
    """The keyword arguments of a call, every one the schema knows read through it
    (:meth:`symbolic.layout.options.Option.read`); the ``**extra`` ones too when
    ``read_extra`` (plan's fixed choices: ``None`` there is "swept")."""
    from .layout.options import OPTIONS

    out = {}
    for name, value in arguments.items():
        if name == extra:
            for key, item in value.items():
                out[key] = OPTIONS[key].read(item) if read_extra and key in OPTIONS and item is not None else item
        else:
            out[name] = OPTIONS[name].read(value) if name in OPTIONS else value
    return out


def _checked(function=None, *, read_extra: bool = True):
    """Call ``function`` with its arguments checked first: an unknown or missing
    option is a ConfigError naming it and the options there are (Python would
    raise TypeError), like every other bad argument; every keyword the option
    schema knows is read through it (its type, range, choices, unit)."""
    import functools
    import inspect

    if function is None:
        return functools.partial(_checked, read_extra=read_extra)
    signature = inspect.signature(function)
    named = [name for name, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD]
    extra = next((name for name, p in signature.parameters.items() if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise ConfigError(f"{function.__name__}(): {error}; options: {', '.join(named)}") from None
        given = frozenset(bound.arguments) | frozenset(bound.arguments.get(extra, ()) if extra else ())
        bound.apply_defaults()  # the defaults are read too: the engine gets one kind of value either way
        options = _read_options(bound.arguments, extra, read_extra)
        token = _TYPED.set(given)
        try:
            return function(**options)
        finally:
            _TYPED.reset(token)

    return call


def _preset(framework, layout, overlap: str | None = None, config=None):
    """``framework=``: the preset's defaults in every field the caller did not give
    (:func:`symbolic.layout.frameworks.apply_preset`), and the step-time overlap — the caller's
    ``overlap=`` if given, else the preset's, else ``overlap``'s default — as (PresetChoice or None,
    Layout, Overlap or None). No ``framework=`` and ``config`` given: a layout only a distributed framework
    runs takes the assumed preset, as the CLI's (:func:`symbolic.layout.frameworks.preset_or_assumed`)."""
    from .layout.frameworks import apply_preset, preset_or_assumed

    preset, why = preset_or_assumed(framework, config, layout)
    typed = _TYPED.get()
    choice = apply_preset(layout, preset, typed, overlap=overlap is not None, inferred=why)
    hidden = None
    if overlap is not None:
        from .ledgers.time import OVERLAPS, Overlap

        hidden = Overlap(*preset.overlap_fields()) if preset is not None and "overlap" not in typed \
            else OVERLAPS[overlap]
    return choice, (choice.layout if choice is not None else layout), hidden


def _margin(margin, memory: int) -> int:
    """``--margin``: a size ("4GB"), a share ("10%"), 0 (read by the schema first); None: the bill's
    not-counted CUDA context and workspaces (``bill.evaluate.default_margin``)."""
    from .bill.evaluate import margin_bytes

    return margin_bytes(margin, memory)


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
        from .render.bill_json import bill_data
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
        from .render.summary import bar_parts

        totals = self.engine.totals  # the verdict's instant, part by part: the summary's "total = parts"
        return (bar_parts(totals), totals.get("gpu_memory_bytes"))

    def _repr_latex_(self) -> str:
        from .render.notebook import bill_latex

        return bill_latex(self._data)


def _schedule(schedule) -> str:
    """``schedule=`` checked before a Layout holds it (ConfigError naming the choices)."""
    from .layout.choices import SCHEDULE_NAMES

    if schedule in ("", None):
        return ""
    if not isinstance(schedule, str) or schedule not in SCHEDULE_NAMES:
        raise ConfigError(f"schedule must be one of {', '.join(SCHEDULE_NAMES)}, not {schedule!r}")
    return schedule


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
         gpu: str | None = None, loss: str | None = None, framework: str | None = None,
         sp_inputs: str = "sharded", schedule: str | None = None, first_stage_layers: int = 0,
         last_stage_layers: int = 0, precision: str | None = None) -> Bill:
    """``symbolic bill``: the four ledgers of ``model`` (a built-in name, an HF
    ``config.json`` path or a ModelConfig) under a layout, against ``gpu_memory``
    (``"80GB"``, ``"80GiB"`` or bytes), and the step time on ``hardware`` (a GPU
    kind or a JSON file; default the A100-80GB). ``params`` is seed 001's
    hand-filled N (``"7B"``) for the model states. ``framework`` (``"megatron-core"``, ...) fills what
    was not given with that framework's defaults (``--framework``; a keyword given always wins)."""
    from .bill.priced import priced_bill
    from .layout.layout import steady_state_batch

    config = _model(model)
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=steady_state_batch(global_batch, pp, micro_batch, dp), cp=cp, ep=ep, etp=etp,
                     moe_capacity=moe_capacity_factor, recompute_modules=recompute_modules,
                     fused_swiglu=fused_swiglu, lora=lora, lora_targets=lora_targets, base_dtype=base_dtype,
                     double_quant=double_quant, offload=offload, optimizer_impl=optimizer_impl,
                     flash_attention=flash_attention, activation_offload=activation_offload,
                     moe_dispatcher=moe_dispatcher, moe_pad_to_capacity=moe_pad_to_capacity,
                     loss=loss or default_loss(config, tp), sp_inputs=sp_inputs, schedule=_schedule(schedule),
                     first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers, precision=precision)
    filled, layout, hidden = _preset(framework, layout, overlap, config)
    layout = _engine_errors(lambda: layout.validate(config))
    choice = _gpu_choice(gpu, gpu_memory, hardware)
    engine, step = _engine_errors(lambda: priced_bill(config, layout, choice.hardware, overlap=hidden,
                                                      gpus_per_node=gpus_per_node, params_hand=params,
                                                      gpu_memory=choice.memory, cpu_memory=cpu_memory))
    engine.gpu = choice
    engine.preset = filled
    if filled is not None:  # the TIME section names the preset (given or assumed) and each of its settings
        step.factors.update(_named_framework(filled.framework).step_factors(filled.inferred))
    return Bill(engine, step)


def _named_framework(name):
    from .layout.frameworks import framework

    return framework(name)


def _required(value, name: str, example: str):
    """``value`` of a keyword the command requires (the schema reads ``None`` as not given)."""
    if value is None:
        raise ConfigError(f"{name} is required: give {example} (--{name.replace('_', '-')} on the command line)")
    return value


def _time_model(hardware, overlap):
    """(Hardware, Overlap) of the step-time model from their names, as the CLI reads them."""
    from .ledgers.hardware import load
    from .ledgers.time import OVERLAPS

    return _engine_errors(lambda: load(hardware)), OVERLAPS[overlap]


class Plan(Result):
    """Every valid layout on N GPUs, the fitting ones ranked (``plan --json``).
    ``layouts`` the ranked ones (dicts), ``best`` the first or ``None``."""

    command = "plan"

    def __init__(self, engine, shown, closest, elapsed: float = 0.0, gpu=None):
        from .render.plan import render_json

        self.engine, self.shown, self.closest, self.elapsed, self.gpu = engine, shown, closest, elapsed, gpu
        super().__init__(json.loads(render_json(engine, shown, closest, gpu)))

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
        from .render.plan import render_text

        return render_text(self.engine, self.shown, self.closest, self.elapsed, width, gpu=self.gpu)


@_checked
def plan(model, *, gpus: int, gpu_memory=None, seq: int = 0, global_batch: int = 0, params=None,
         optimizer: str = "bf16-adam", dtype: str = "bf16", top: int = 10, margin=None, hardware: str | None = None,
         overlap: str = "default", max_micro_batch: int = 16, gpus_per_node: int | None = None,
         moe_capacity_factor="1", gpu: str | None = None, loss: str | None = None, framework: str | None = None,
         lora: int = 0, lora_targets: str = "all-linear", base_dtype: str = "bf16", double_quant: bool = True,
         offload: str = "none", activation_offload: bool = False, schedule: str | None = None,
         first_stage_layers: int = 0, last_stage_layers: int = 0, **fixed) -> Plan:
    """``symbolic plan``: sweep every valid layout of ``model`` on ``gpus`` GPUs
    of ``gpu_memory``; ``fixed`` pins a choice (``tp=8``, ``sp=True``,
    ``recompute="selective"``, ``zero=1``, ``micro_batch``, ``pp``, ``dp``,
    ``cp``, ``interleave``). ``schedule``: the pipeline schedule of every layout with p > 1 (``"zb-h1"``, ...;
    ``--schedule``); ``first_stage_layers``/``last_stage_layers``: one uneven split for every layout (default:
    where p does not divide the layers, Megatron's first/last splits are searched, each layout naming its own)."""
    import time

    from .search.plan import FIXABLE, plan as run_plan

    unknown = sorted(set(fixed) - set(FIXABLE))
    if unknown:
        raise ConfigError(f"plan() got unknown option(s) {', '.join(unknown)}; fixable choices: "
                          f"{', '.join(FIXABLE)}")
    config = _model(model)
    choice = _gpu_choice(gpu, gpu_memory, hardware, required=True)
    memory = choice.memory
    _required(gpus, "gpus", "a GPU count such as 64")
    margin_bytes = _margin(margin, memory)
    from .layout.layout import Layout
    from .layout.precision import plan_dtype

    dtype, fp8, note = plan_dtype(dtype, False)   # dtype="fp8": the FP8 recipe's inputs and GEMMs, as the CLI's
    if note:
        import warnings
        warnings.warn(note, UserWarning, stacklevel=3)
    # the preset fills the swept layouts' shared fields not given (the ZeRO stage is swept), as the CLI's
    _, shared, hidden = _preset(framework, Layout(optimizer=optimizer, dtype=dtype, loss=loss or default_loss(config),
                                                  flash_attention=False), overlap)
    start = time.perf_counter()
    result = _engine_errors(lambda: run_plan(
        config, gpus, memory, seq=seq, global_batch=global_batch, margin=margin_bytes,
        params_hand=params, optimizer=shared.optimizer, dtype=dtype, hardware=choice.hardware,
        max_micro_batch=max_micro_batch, gpus_per_node=gpus_per_node,
        fixed={name: fixed.get(name) for name in FIXABLE}, overlap=hidden,
        moe_capacity=moe_capacity_factor, loss=shared.loss, flash_attention=shared.flash_attention,
        fp8_activations=fp8,
        # no loss given and none filled: each layout's default, the bill's (vocabulary-parallel under TP)
        loss_under_tp=None if loss is not None else _loss_under_tp(config, shared.loss),
        levers=_levers(lora=lora, lora_targets=lora_targets, base_dtype=base_dtype, double_quant=double_quant,
                       offload=offload, activation_offload=activation_offload),
        schedule=_schedule(schedule), first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers))
    elapsed = time.perf_counter() - start
    from .render.plan import MAX_LISTED

    shown = result.ranked(min(top or MAX_LISTED, MAX_LISTED))  # as the CLI: each listed layout is evaluated exactly
    return Plan(result, shown, None if shown else result.closest(), elapsed, choice)


class Solve(Result):
    """The largest micro-batch or sequence length that fits (``solve --json``);
    ``answer`` the value (``None``: nothing fits)."""

    command = "solve"

    def __init__(self, engine, gpu=None, preset=None):
        from .render.solve import render_json

        self.engine, self.gpu, self.preset = engine, gpu, preset
        super().__init__(json.loads(render_json(engine, gpu, preset)))

    @property
    def answer(self) -> int | None:
        return self.engine.answer

    def summary(self, width: int = WIDTH) -> list[str]:
        from .render.summary import solve_summary

        return solve_summary(self._data, width)

    def text(self, width: int = WIDTH) -> str:
        from .render.solve import render_text

        return render_text(self.engine, width, gpu=self.gpu, preset=self.preset)


@_checked
def solve(model, *, max: str, gpu_memory=None, margin=None, params=None, seq: int = 0, micro_batch: int = 1,
          tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1, sp: bool = False, recompute: str = "none",
          zero: int = 0, optimizer: str = "bf16-adam", interleave: int = 1, dtype: str = "bf16",
          global_batch: int = 0, gpu: str | None = None, loss: str | None = None,
          framework: str | None = None,
          lora: int = 0, lora_targets: str = "all-linear", base_dtype: str = "bf16", double_quant: bool = True,
          offload: str = "none", activation_offload: bool = False, sp_inputs: str = "sharded",
          precision: str | None = None, schedule: str | None = None, first_stage_layers: int = 0,
          last_stage_layers: int = 0) -> Solve:
    """``symbolic solve``: the largest ``max`` (``"micro-batch"`` or ``"seq"``)
    for which the layout fits ``gpu_memory``, solved exactly and checked by the bill."""
    from .search.solve import solve_limit

    targets = {"micro-batch": "micro_batch", "seq": "seq"}
    _required(max, "max", "'micro-batch' or 'seq'")
    config = _model(model)
    choice = _gpu_choice(gpu, gpu_memory, None, required=True)
    memory = choice.memory
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=_steady(global_batch, pp, micro_batch, dp), cp=cp, loss=loss or default_loss(config, tp),
                     lora=lora, lora_targets=lora_targets, base_dtype=base_dtype, double_quant=double_quant,
                     offload=offload, activation_offload=activation_offload, sp_inputs=sp_inputs,
                     schedule=_schedule(schedule), first_stage_layers=first_stage_layers,
                     last_stage_layers=last_stage_layers, precision=precision)
    filled, layout, _ = _preset(framework, layout, config=config)
    margin_bytes = _margin(margin, memory)
    return Solve(_engine_errors(lambda: solve_limit(config, layout, targets[max], memory, margin_bytes,
                                                    params)), choice, filled)


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
        from .render.timeline import render_text

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
             interleave: int = 1, dtype: str = "bf16", global_batch: int = 0, gpu: str | None = None,
             loss: str | None = None, framework: str | None = None,
             lora: int = 0, lora_targets: str = "all-linear", base_dtype: str = "bf16", double_quant: bool = True,
             offload: str = "none", activation_offload: bool = False, sp_inputs: str = "sharded",
             schedule: str | None = None, first_stage_layers: int = 0, last_stage_layers: int = 0,
             precision: str | None = None) -> Timeline:
    """``symbolic timeline``: the four lifetime classes over one step, the peak
    and its phase t*; ``optimize`` names optimisations (``"flash-attention"``, ...)."""
    from .render.timeline import report
    from .step.optimizations import apply
    from .step.timeline import CommSettings, MemoryOptions

    config = _model(model)
    layout = _layout(micro_batch=micro_batch, seq=seq, tp=tp, pp=pp, dp=dp, sp=sp, recompute=recompute,
                     zero=zero, optimizer=optimizer, interleave=interleave, dtype=dtype,
                     global_batch=_steady(global_batch, pp, micro_batch, dp), cp=cp, loss=loss or default_loss(config, tp),
                     lora=lora, lora_targets=lora_targets, base_dtype=base_dtype, double_quant=double_quant,
                     offload=offload, activation_offload=activation_offload, sp_inputs=sp_inputs,
                     schedule=_schedule(schedule), first_stage_layers=first_stage_layers,
                     last_stage_layers=last_stage_layers, precision=precision)
    filled, layout, _ = _preset(framework, layout, config=config)
    comm = CommSettings(nccl_buffsize, nccl_channels, bucket)
    choice = _gpu_choice(gpu, gpu_memory, None)
    memory = choice.memory
    if layout.precision != "bf16" and gpu is not None:   # the recipe on the GPU named (its weight copies), as the CLI's
        from .layout.precision import on_hardware
        layout = on_hardware(layout, choice.hardware)

    def build():
        applied, options = apply(list(optimize), layout, MemoryOptions(comm=comm))
        data, tl, result, reserved = report(config, applied, options, memory)
        data["gpu"] = choice.as_dict()
        if filled is not None and filled.fields:  # what framework= filled, as the CLI's --json
            data["framework_preset"] = filled.as_dict()
        return Timeline(data, tl.strategy.describe(), (result, reserved, f"{config.name}: {tl.strategy.describe()}",
                                                       memory))

    return _engine_errors(build)


class Derivation(Result):
    """A derived expression in the papers' letters (``derive --json``):
    ``expr`` (sympy), ``latex``; with a model, ``at_model``."""

    command = "derive"

    def __init__(self, data: dict):
        from .render.derive import json_data

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
        from .render.derive import render_text

        return render_text(self._data, width).split("\n")

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self._data['latex']}$"

    def _repr_html_(self):  # a formula reads best as LaTeX in a notebook
        return None


@_checked(read_extra=False)
def derive(quantity: str, *, model=None, **options) -> Derivation:
    """``symbolic derive``: the expression of ``quantity`` (``"activations"``,
    ``"flops-hardware"``, a registry name) under the options of ``derive``
    (``tp=True``, ``sp=True``, ``recompute="selective"``, ``arch="llama"``,
    ``pipeline=True``, ...); with ``model``, also at its dimensions."""
    from .claims.derivation import derivation, request

    if model is not None and not isinstance(model, (str, Path)):
        raise ConfigError(f"derive(model={_plain(model)}) takes a built-in name or a config.json path")
    ask = request(quantity, model, **options)  # each keyword read as its flag reads
    return Derivation(_engine_errors(lambda: derivation(ask)))


def from_launch(kind: str, source, model=None, **typed):
    """``--from KIND SOURCE``: what a launch config says, as a frozen
    :class:`~symbolic.layout.launch.LaunchReading` — the Layout fields it sets, its model (if it
    describes one), the framework preset's name, and every option taken, ignored or assumed.
    ``kind``: megatron, nemo, megatron-bridge, torchtitan, deepspeed, accelerate, axolotl, llamafactory;
    ``source``: a path
    (Megatron: also the command line, as text or a list of words); ``model``: the model trained,
    where the config has none (a built-in name, an HF config.json path or a ModelConfig)::

        reading = symbolic.from_launch("megatron", "--tensor-model-parallel-size 8 ...")
        symbolic.bill(**reading.options(), gpu_memory="80GB")

    ``typed``: layout keywords as ``symbolic.bill`` takes them (``tp=4``, ``recompute="full"``,
    ``micro_batch=1``, ``moe_capacity_factor="1.25"``), each read through the option schema — the CLI's
    flags typed beside ``--from``: each wins over the config's value (listed among the options taken) and
    gets past a field the reader could not take (listed as ignored, the typed value giving it)::

        symbolic.from_launch("torchtitan", "debug_model.toml", recompute="full")  # past selective_ac_option 2
    """
    from .layout.launch import LAYOUT_FIELDS, read_launch
    from .layout.options import OPTIONS, read

    kind, source = read("launch", (kind, source))  # the kind and the source's type, as --from reads them
    fields = {}
    for name, value in typed.items():
        field = "moe_capacity" if name == "moe_capacity_factor" else name
        if field not in LAYOUT_FIELDS or name not in OPTIONS or name == "moe_capacity":
            keywords = sorted(n for n in OPTIONS if ("moe_capacity" if n == "moe_capacity_factor" else n)
                              in LAYOUT_FIELDS and n != "moe_capacity")
            raise ConfigError(f"from_launch({clean(name)}=...): not a layout keyword; give one of "
                              f"{', '.join(keywords)}")
        fields[field] = OPTIONS[name].read(value)
    reading = read_launch(kind, source, _model(model) if model is not None else None, tuple(fields))
    return reading.with_typed(fields)
