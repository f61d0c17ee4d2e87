"""Options shared by the commands: one vocabulary for every command, made from the
option schema :data:`symbolic.layout.options.OPTIONS` (which the Python API reads
its keywords through too; the readers of user-typed quantities live there and are
re-exported here).

The same flag means the same thing, with the same type and choices, in every
command that has it (``tests/test_hostile.py`` walks every parser and checks it;
``tests/test_api_contract.py`` checks each against the schema). To add an option
shared by the CLI and the API: one :class:`~symbolic.layout.options.Option` entry
in ``OPTIONS``, then ``add(group, "name")`` in the command's ``add_arguments``
(the API function gets a keyword of the same name; ``_checked`` reads it through
the entry). Otherwise reuse what is here:

- counts and sizes: :func:`bounded_int` (an argparse ``type`` with a stated
  range), :func:`parse_count` (``7B``, ``1.5e9``), :func:`parse_memory`
  (``80GB``, ``80 gb``, ``80GiB``; GB = 10^9 B, GiB = 2^30 B; a bare number is
  refused), :func:`parse_memory_or_share` (``4GB`` or ``10%``),
  :func:`bounded_float`;
- named choices: :func:`dtype` (``bf16``/``bfloat16``, ``fp16``/``float16``/``half``,
  ``fp32``/``float32``, ``fp8``: one canonical form, the short one), and the
  ``add_*_option`` helpers for ``--dtype``, ``--optimizer``, ``--zero``,
  ``--recompute``, which list their choices in ``--help``;
- the stated ranges, :data:`LIMITS`: what a value beyond them would mean is
  outside anything the engine is checked on, so it is refused with the range.

No user text reaches ``eval`` or ``sympify``: numbers are read with
``decimal.Decimal`` after a regular expression, with the exponent bounded
before any arithmetic (``1e99999999`` is refused, not computed).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..core.inputs import clean
from ..layout.layout import MEMORY_LEVERS, Layout, default_loss, steady_state_batch  # noqa: F401 (re-exported)
from ..layout.layout import loss_under_tp as layout_loss_under_tp
from ..layout.options import (COUNT_SUFFIXES, DTYPE_ALIASES, GPU_MEMORY, LIMITS, MEMORY_UNITS, OPTIONS,  # noqa: F401
                              Option, _decimal, _interned_int, add, bounded_float, bounded_int, dtype,
                              model_from_text, parse_count, parse_memory, parse_memory_or_share, parse_ratio, read,
                              typed)
from ..models.config import ConfigError, ModelConfig
from ..layout.precision import read_precision

_COUNT = _interned_int(1, LIMITS["count"])
_positive = _COUNT  # kept for the commands that used it: a count of at least 1 (the same type as --lora's)
#: One ``type`` per layout letter, so every command types them alike (the schema's: :data:`OPTIONS`).
INT_TYPES = {name: OPTIONS[name].type for name in
             ("gpus", "tp", "pp", "dp", "cp", "ep", "etp", "micro_batch", "global_batch", "seq", "interleave")}
ZERO = bounded_int(0, 3)
#: Transformer layers of a pipeline stage (uneven stages): at least 1.
STAGE_LAYERS = OPTIONS["first_stage_layers"].type


def add_stage_layer_options(group, help_suffix: str = "") -> None:
    """Uneven pipeline stages (Megatron-Core's first/last-stage layer counts), the same in every command."""
    for name in ("first_stage_layers", "last_stage_layers"):
        add(group, name, help=OPTIONS[name].help + help_suffix)


def add_pipeline_layout_option(parser) -> None:
    """Megatron-Core's per-chunk pipeline layout (bill and timeline: the commands that account stages by their layers)."""
    add(parser, "pipeline_layout")


def add_schedule_option(parser) -> None:
    """The pipeline schedule (bill, timeline, solve; plan: of every layout with p > 1)."""
    add(parser, "schedule")


def add_fp8_activations_option(group, help_suffix: str = "") -> None:
    add(group, "fp8_activations", help=OPTIONS["fp8_activations"].help + help_suffix)


def add_dtype_option(group, default="bf16", help="activation dtype") -> None:
    add(group, "dtype", default=default, help=f"{help} (bfloat16, float16, float32 spellings accepted)")


def add_optimizer_option(group, default="bf16-adam") -> None:
    add(group, "optimizer", default=default)


def add_zero_option(group, default=0, help="ZeRO stage over d") -> None:
    add(group, "zero", default=default, help=help)


def add_recompute_option(group, default="none", help="activation recompute") -> None:
    add(group, "recompute", default=default, help=help)


def add_model_argument(parser: argparse.ArgumentParser, optional: bool = False) -> None:
    """MODEL; ``optional`` where ``--from`` may name it instead (bill, plan, solve, timeline)."""
    parser.add_argument("model", nargs="?" if optional else None, default=None, help="a built-in model (gpt-22b, gpt-175b, gpt-530b, gpt-1t, gpt-7b, "
                        "llama-2-7b, mixtral-8x7b, llama-3-8b, llama-3.1-70b, llama-3.1-405b, qwen3-8b, "
                        "qwen3-30b-a3b, mixtral-8x22b, gemma-2-9b, deepseek-v3) or a path to a HuggingFace "
                        "config.json (or its folder)")


def load_model(args) -> ModelConfig:
    """The model named by ``args.model``: a built-in name, or a path to an HF
    ``config.json`` file or to the folder holding one (or the ModelConfig ``--from`` read)."""
    if isinstance(args.model, ModelConfig):
        return args.model
    if args.model is None:
        raise ConfigError("MODEL: give a built-in model or an HF config.json (or --from KIND SOURCE with a launch "
                          "config that describes its model)")
    return model_from_text(args.model)


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("layout")
    for name in ("seq", "micro_batch", "tp", "pp", "dp", "cp", "ep", "etp", "moe_capacity_factor",
                 "recompute_modules", "fused_swiglu", "moe_dispatcher", "moe_pad_to_capacity"):
        add(group, name)
    add_stage_layer_options(group)
    add_fp8_activations_option(group)
    add(group, "precision")
    add(group, "sp")
    add(group, "sp_inputs")
    add_recompute_option(group)
    add_zero_option(group)
    add_optimizer_option(group)
    add(group, "interleave")
    add_dtype_option(group)
    add(group, "global_batch", help="sequences per iteration (default micro-batch × dp; with a pipeline its "
                                     "steady state, pp × micro-batch × dp: m = p micro-batches)")
    add_loss_option(group)


#: The bill's fine-tuning and memory levers, in the order --help lists them.
LEVER_OPTIONS = ("lora", "lora_targets", "base_dtype", "double_quant", "offload", "optimizer_impl",
                 "activation_offload", "flash_attention")


def add_lever_options(parser: argparse.ArgumentParser, names: tuple[str, ...] = LEVER_OPTIONS) -> None:
    """Fine-tuning and memory levers (``Layout``'s lora, base_dtype, offload, optimizer_impl, ...);
    ``double_quant`` is spelt ``--no-double-quant``."""
    group = parser.add_argument_group("memory levers")
    for name in names:
        add(group, name)


def add_sweep_lever_options(parser: argparse.ArgumentParser) -> None:
    """plan's, solve's and timeline's memory levers (``Layout.memory_levers``): the bill's, less the options those
    commands have of their own (--optimizer-impl, --flash-attention)."""
    add_lever_options(parser, MEMORY_LEVERS)


def levers_from_args(args) -> dict:
    """The levers given, as Layout fields (those at their defaults left out)."""
    return Layout(**{name: getattr(args, name, OPTIONS[name].default) for name in MEMORY_LEVERS}).memory_levers()


#: Notes for stderr held until the command has run (:func:`flush_notes`): a command refused by a later
#: input (``--gpu-memory 0``) prints its one line, not a note above it about a layout it never priced.
PENDING_NOTES: list[str] = []


def flush_notes(keep: bool = True) -> None:
    """Print the held notes to stderr (``keep``) or drop them (the command was refused), then forget them.
    ``symbolic.cli.main`` calls it after a command's run: printed when it ran, dropped when it raised."""
    import sys

    notes, PENDING_NOTES[:] = list(PENDING_NOTES), []
    if keep:
        for note in notes:
            print(f"note: {note}", file=sys.stderr)


def layout_from_args(args, model: ModelConfig | None = None) -> Layout:
    """The layout the options give, a flag that changes nothing (SP at t = 1, ZeRO at d·c = 1) turned
    off with a note on stderr once the command has run (:func:`flush_notes`;
    :func:`symbolic.layout.layout.settle_no_ops`), as Megatron-LM does."""
    from ..layout.layout import settle_no_ops

    layout, notes = settle_no_ops(_layout_from_args(args, model))
    if model is not None and notes:
        layout.validate(model)  # a layout refused anyway gets its one line, not a note above it
    PENDING_NOTES.extend(notes)
    return layout


def _layout_from_args(args, model: ModelConfig | None) -> Layout:
    """The Layout of a command's parsed arguments; the options a command lacks keep the schema's defaults."""
    def given(name: str):
        return getattr(args, name, OPTIONS[name].default)

    # --dtype fp8 and --fp8-activations are an FP8 training recipe (layout.precision.read_precision)
    choice = read_precision(args.dtype, given("precision"), given("fp8_activations"))
    if choice.note:
        PENDING_NOTES.append(choice.note)
    return Layout(micro_batch=args.micro_batch, seq=args.seq, tp=args.tp, pp=args.pp, dp=args.dp,
                  sp=args.sp, recompute=args.recompute, zero=args.zero, optimizer=args.optimizer,
                  interleave=args.interleave, dtype=choice.dtype, precision=choice.precision,
                  global_batch=steady_state_batch(args.global_batch, args.pp, args.micro_batch, args.dp),
                  cp=given("cp"), ep=given("ep"), etp=given("etp"),
                  moe_capacity=read("moe_capacity_factor", given("moe_capacity_factor")),
                  recompute_modules=read("recompute_modules", given("recompute_modules")),
                  fused_swiglu=given("fused_swiglu"), lora=given("lora"),
                  lora_targets=given("lora_targets"), base_dtype=given("base_dtype"),
                  double_quant=given("double_quant"),
                  offload=given("offload"), optimizer_impl=given("optimizer_impl"),
                  flash_attention=given("flash_attention"), activation_offload=given("activation_offload"),
                  fp8_activations=given("fp8_activations"), first_stage_layers=given("first_stage_layers"),
                  last_stage_layers=given("last_stage_layers"), moe_dispatcher=given("moe_dispatcher"),
                  moe_pad_to_capacity=given("moe_pad_to_capacity"), pipeline_layout=given("pipeline_layout"),
                  sp_inputs=given("sp_inputs"), schedule=given("schedule") or "",
                  loss=loss_from_args(args, model))


def add_loss_option(group) -> None:
    """``--loss``: the loss kernel (``Layout.loss``); default the model's usual stack (``default_loss``)."""
    add(group, "loss")


def loss_from_args(args, model: ModelConfig | None) -> str:
    """The ``--loss`` given, else the model's usual stack's at the layout's TP size (``layout.default_loss``),
    else eager."""
    given = getattr(args, "loss", None)
    tp = getattr(args, "tp", 1)
    return given or (default_loss(model, tp if isinstance(tp, int) else 1) if model is not None else "eager")


def loss_under_tp(args, model: ModelConfig, loss: str) -> str | None:
    """For ``plan``, which sweeps t: the loss kernel of its layouts with t > 1 when no ``--loss`` was typed and
    the preset left the model's usual one — the bill's default under tensor parallelism
    (``layout.default_loss``), so each layout is priced as its bill would be; None otherwise."""
    if getattr(args, "loss", None) is not None or model is None:
        return None
    return layout_loss_under_tp(model, loss)


def add_time_options(parser: argparse.ArgumentParser, gpus_per_node: bool = True) -> None:
    """--hardware, --overlap (and --gpus-per-node): the step-time model's inputs."""
    group = parser.add_argument_group("step-time model")
    add(group, "hardware")
    add(group, "overlap", default=None)  # None: the --framework preset's, else "default" (time_options)
    if gpus_per_node:
        add(group, "gpus_per_node")


def time_options(args):
    """(hardware, overlap, gpus_per_node) from :func:`add_time_options`'s arguments: the overlap of
    ``--overlap``, else of the ``--framework`` preset, else the default strategy."""
    from ..ledgers.hardware import load
    from ..ledgers.time import OVERLAPS, Overlap

    preset = framework_preset(args)
    if getattr(args, "overlap", None) is None and preset is not None:
        overlap = Overlap(*preset.overlap_fields())
    else:
        overlap = OVERLAPS[getattr(args, "overlap", None) or "default"]
    return load(args.hardware), overlap, getattr(args, "gpus_per_node", None)


# --- framework presets (symbolic/layout/frameworks.py) ---------------------------

def add_framework_option(parser: argparse.ArgumentParser) -> None:
    """``--framework NAME``: the schema's entry (``OPTIONS["framework"]``), the API's ``framework=``."""
    add(parser, "framework")


def framework_preset(args):
    from ..layout.frameworks import framework

    return framework(getattr(args, "framework", None))


def apply_framework(layout: Layout, args, overlap: bool = True, model=None) -> Layout:
    """``layout`` with the preset's defaults in every field not typed (``layout.options.typed``: a typed
    ``--optimizer bf16-adam`` is kept; a launch config's fields count as typed); what it filled is kept
    in ``args._preset`` for the layout line (:func:`symbolic.layout.frameworks.apply_preset`). With no
    ``--framework`` (and no launch config, whose reader names its framework) and ``model`` given, a layout only
    a distributed framework runs takes the assumed preset (:func:`symbolic.layout.frameworks.preset_or_assumed`),
    set in ``args.framework`` so the step time's overlap and TIME section take it too."""
    from ..layout.frameworks import apply_preset, preset_or_assumed

    launched = getattr(args, "launch", None) is not None
    preset, why = preset_or_assumed(getattr(args, "framework", None), None if launched else model, layout)
    if why:
        args.framework = preset.name
    overlap = overlap and getattr(args, "overlap", None) is None  # a typed (or launch config's) --overlap wins
    choice = apply_preset(layout, preset, typed(args), overlap=overlap, inferred=why)
    if choice is None:
        return layout
    args._preset = choice
    return choice.layout


def framework_factors(step, args) -> None:
    """Name the preset (and why, where it was assumed) and each of its settings in the step's factors (the
    TIME section prints them)."""
    preset = framework_preset(args)
    if preset is not None:
        step.factors.update(preset.step_factors(getattr(getattr(args, "_preset", None), "inferred", "")))


def check_output(path: str, field: str = "--output") -> Path:
    """Before any expensive work: ``path`` names a regular file or a new one (not a
    folder, a FIFO, a device or a socket: writing there could block forever or
    stream nowhere) in an existing, writable folder; else one :class:`ConfigError`
    naming the field and the fix."""
    import os
    import stat

    target = Path(path)
    if not str(path).strip():
        raise ConfigError(f"{field}: give a file name")
    if target.is_dir():
        raise ConfigError(f"{field} {clean(path)!r} is a folder; give a file name")
    try:
        mode = os.stat(target).st_mode
    except OSError:
        mode = None  # a new file (or a dangling link: opening it creates the file)
    if mode is not None and not stat.S_ISREG(mode):
        from ..core.inputs import _kind

        raise ConfigError(f"{field} {clean(path)!r} is {_kind(mode)}, not a regular file; give a file name")
    parent = target.parent
    if not parent.is_dir():
        raise ConfigError(f"{field} {clean(path)!r}: folder {clean(parent)!r} does not exist; create it or write "
                          "elsewhere")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ConfigError(f"{field} {clean(path)!r}: not writable (permissions); write elsewhere")
    # os.access answers yes to root everywhere, but a filesystem may still refuse (sysfs, a read-only
    # mount): open the file now — created and removed again if new, untouched if it exists — so the
    # refusal comes before the work (the calculator page takes seconds to build), not after it.
    try:
        if mode is None and not os.path.lexists(target):   # (a dangling link is left to the write)
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(target)
        elif mode is not None:
            os.close(os.open(target, os.O_WRONLY))
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else "refused"
        raise ConfigError(f"{field} {clean(path)!r}: cannot write there ({reason.lower()}); write elsewhere") from None
    return target


def write_output(path: str, data: str | bytes, field: str = "--output") -> int:
    """Write a command's output file; any failure (missing or read-only folder, a
    directory, a full disk, /dev/full) is one :class:`ConfigError` naming the
    field and the path. Returns the bytes written."""
    import errno

    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = check_output(path, field)
    try:
        with open(target, "wb") as handle:
            handle.write(payload)
    except OSError as error:
        why = "no space left on the device" if error.errno == errno.ENOSPC else (error.strerror or str(error))
        raise ConfigError(f"{field} {clean(path)!r}: cannot write ({why})") from None
    return len(payload)


def write_figure(figure, path: str, field: str = "--png", dpi: int = 110) -> None:
    """Render a matplotlib figure in memory, then :func:`write_output` it (so a
    bad path fails as one line, and nothing half-written is left by the renderer)."""
    import io

    buffer = io.BytesIO()
    suffix = Path(path).suffix.lower().lstrip(".") or "png"
    try:
        figure.savefig(buffer, dpi=dpi, format=suffix)
    except ValueError as error:
        raise ConfigError(f"{field} {clean(path)!r}: {clean(error)}; give a .png (or .pdf, .svg) name") from None
    write_output(path, buffer.getvalue(), field)


# --- --from KIND SOURCE: a launch config read (symbolic.layout.launch) -------------------------------------------

#: Layout fields -> the argparse dest that carries each (the ones spelt differently).
_LAUNCH_DESTS = {"moe_capacity": "moe_capacity_factor"}
#: What ``plan`` sweeps: a launch config's value is reported, not fixed (``--tp 8`` fixes it).
_PLAN_SWEEPS = ("tp", "pp", "dp", "cp", "ep", "etp", "sp", "recompute", "zero", "micro_batch", "interleave",
                "recompute_modules")


def add_from_option(parser) -> None:
    """``--from KIND SOURCE`` (bill, plan, solve, timeline): the layout and model of a launch config."""
    add(parser, "launch")  # the schema's entry, spelt --from
    parser.set_defaults(_launch_parser=parser)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _was_typed(args, dest: str, parser) -> bool:
    """Whether ``dest`` was typed: the parser's record (``layout.options.record_typed``), else (a parser
    made without it) whether its value differs from its default."""
    if getattr(args, "_records_typed", False):
        return dest in getattr(args, "_typed", ())
    return getattr(args, dest) != parser.get_default(dest)


def apply_launch(args, command: str):
    """Read ``args.launch`` and set the options the user did not type from it (a typed flag wins, and
    is listed); returns the :class:`~symbolic.layout.launch.LaunchReading` and the lines to print."""
    from ..layout.launch import read_launch

    kind, source = args.launch
    parser = args._launch_parser
    model = model_from_text(args.model) if isinstance(args.model, str) else None
    from ..layout.launch import LAYOUT_FIELDS
    typed = [field for field in LAYOUT_FIELDS if hasattr(args, _LAUNCH_DESTS.get(field, field))
             and _was_typed(args, _LAUNCH_DESTS.get(field, field), parser)]
    reading = read_launch(kind, source, model, typed)
    if args.model is None:
        if reading.model is None:
            raise ConfigError(f"--from {clean(kind)}: the config does not describe its model; give MODEL "
                              "(a built-in name or an HF config.json) before --from")
        args.model = reading.model
    extra: list[str] = []
    swept = []
    priced_as = ""
    for field, value in reading.layout_fields:
        dest = _LAUNCH_DESTS.get(field, field)
        if command == "plan" and field in _PLAN_SWEEPS:
            if value not in (None, 1, 0, False, (), "none") or field == "micro_batch":
                swept.append(f"{_flag(dest)} {value}" if not isinstance(value, bool) else _flag(dest))
            continue
        if not hasattr(args, dest) and field == "sp_inputs" and value != "sharded":
            # plan and solve price SP as Megatron-Core's; the DTensor frameworks' gathered inputs are the bill's
            priced_as = (f"`{command}` prices sequence parallelism as Megatron-Core's (linear inputs kept sharded); "
                         f"the config's framework keeps them all-gathered: bill the chosen layout with "
                         f"--sp-inputs {clean(str(value))} for its own memory")
            continue
        if not hasattr(args, dest) and field == "precision":
            # plan prices FP8 as its sweeps carry it (fp8_activations: FP8 inputs and GEMMs, read beside it)
            if value != "bf16":
                extra.append(f"`{command}` prices the config's {clean(str(value))} recipe as FP8 linear inputs and "
                             "GEMMs, without TE's weight copies: bill the chosen layout for them")
            continue
        if not hasattr(args, dest):
            from ..layout.layout import Layout
            if getattr(Layout(), field) != value:
                raise ConfigError(f"--from {clean(kind)}: {field} = {clean(str(value))} is read, but `{command}` does "
                                  "not model it; use bill or timeline")
            continue
        if _was_typed(args, dest, parser):
            extra.append(f"{_flag(dest)} {getattr(args, dest)} (typed) wins over the config's {clean(str(value))}")
            continue
        if field == "recompute_modules":
            value = ",".join(value)
        elif field == "moe_capacity":
            value = str(value)
        setattr(args, dest, value)
        args._launch_fields = getattr(args, "_launch_fields", frozenset()) | {field}  # the preset does not override
    # The framework preset (--framework, symbolic/layout/frameworks.py), where the command has one.
    if hasattr(args, "framework") and not _was_typed(args, "framework", parser):
        args.framework = reading.framework
    elif hasattr(args, "framework") and args.framework != reading.framework:
        extra.append(f"--framework {args.framework} (typed) wins over the config's {reading.framework}")
    for option, value in reading.time_options:
        if hasattr(args, option) and not _was_typed(args, option, parser):
            setattr(args, option, value)
    if swept:
        extra.append("plan sweeps the layout; the config's: " + " ".join(swept) + " (type them to fix them)")
    if reading.gpus and command == "plan" and args.gpus != reading.gpus:
        extra.append(f"the config's world size is {reading.gpus} GPUs; --gpus {args.gpus} is planned")
    if priced_as:
        extra.append(priced_as)
    return reading, extra


def run_from_launch(args) -> int:
    """Run the command with ``--from`` applied, and say what was read: a short block after the
    answer's first lines, or ``read_from`` in ``--json``."""
    import contextlib
    import io
    import json
    import os

    from ..render.summary import wrap
    from ..render.terminal import output_width

    reading, extra = apply_launch(args, args.command)
    width = output_width()
    buffer = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        with contextlib.redirect_stdout(buffer):
            code = args._run(args)
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    text = buffer.getvalue()
    if getattr(args, "json", False):
        try:
            data = json.loads(text)
        except ValueError:
            print(text, end="")
            return code
        data["read_from"] = dict(reading.to_dict(), overrides=extra)
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return code
    block = [piece for line in reading.lines() + [f"  {line}" for line in extra]
             for piece in wrap(line, width, subsequent="    ")]
    head, gap, rest = text.partition("\n\n")
    print(head + "\n" + "\n".join(block) + ("\n\n" + rest if gap else "\n"), end="" if gap else "")
    return code
