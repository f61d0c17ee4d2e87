"""The answer first: the few lines that say whether a configuration fits.

Every command that answers a question (``bill``, ``plan``, ``solve``,
``timeline``) opens with a summary built here: the model, the layout, the
verdict (fits or not, by how much), the total per GPU against the GPU memory,
the dominant term, and the step time where a ledger provides one. The
summaries read the commands' JSON data (the dict ``--json`` prints), never the
engine's objects, so a key another ledger adds (``step_seconds``,
``paper_total_bytes``, ``params_per_gpu``) shows up here without a change to
the ledger that did not know it: optional keys are printed when present.

Plain strings, wrapped at word boundaries to the width asked for
(:func:`wrap`): no line is longer than the width unless a single word is.
"""
from __future__ import annotations

import re
import textwrap
from fractions import Fraction

from ..core.units import fmt, fmt_bytes
from ..models.layer_kinds import layer_mix

#: Nominal memory of common training GPUs (as marketed, decimal GB), used only
#: when no ``--gpu-memory`` is given, to say which of them the total fits.
#: NVIDIA A100 40GB/80GB, H100 80GB, H200 141GB, B200 192GB datasheets.
COMMON_GPUS = ((40 * 10**9, "40 GB (A100 40GB)"), (80 * 10**9, "80 GB (A100/H100 80GB)"),
               (141 * 10**9, "141 GB (H200)"), (192 * 10**9, "192 GB (B200)"))

#: The memory ledgers whose lines make up the bill's total, by name as printed.
MEMORY_LEDGERS = {"model_states": "model states", "activations": "activations"}


#: The classes of the verdict's instant (``bill.evaluate.PEAK_CLASSES``), as every output names them.
PART_NAMES = {"model_states": "model states", "activations": "activations", "output_side": "output side",
              "transients": "transients", "communication": "communication buffers"}


def verdict_parts(data: dict) -> list[tuple[str, str, Fraction]]:
    """(class, name, bytes) of what is alive at the verdict's instant (``verdict_parts`` of the bill's
    JSON), the empty ones left out: the one breakdown the text, the bars and ``--json`` share; they sum
    to ``total_bytes``. A bill without it (an older JSON): model states, activations, the rest of the peak."""
    parts = data.get("verdict_parts")
    if not parts:
        states, acts = number(data["model_states_bytes"]), number(data.get("activation_bytes", 0))
        rest = number(data["total_bytes"]) - states - acts
        return [(cls, name, size) for cls, name, size in (("model_states", "model states", states),
                                                          ("activations", "activations", acts),
                                                          ("rest", "the rest of the peak", rest)) if size]
    return [(cls, PART_NAMES.get(cls, cls), number(value)) for cls, value in parts.items() if number(value)]


def bar_parts(data: dict) -> list[tuple[str, str, Fraction]]:
    """:func:`verdict_parts` as the bars draw them: (bar kind, name, bytes), model states as ``states``
    (the terminal's glyphs and the notebook's colours)."""
    return [("states" if cls == "model_states" else cls, name, size) for cls, name, size in verdict_parts(data)]


def parts_words(data: dict) -> str:
    """``model states 43.65 GB + activations 10.27 GB + ...`` at the verdict's instant."""
    return " + ".join(f"{name} {fmt(size, 'GB')}" for _, name, size in verdict_parts(data))


def instant_words(data: dict) -> str:
    """Where the verdict's instant is: ``the loss``, ``the first stage's optimizer step``."""
    phase, stage = data.get("verdict_phase"), data.get("verdict_stage")
    if not phase:
        return ""
    pipeline = (data.get("layout") or {}).get("pp", 1) > 1
    if pipeline and data.get("verdict_stage_words"):  # a middle stage: "of stage 2 of 4 (...)"
        return f"at the {phase} of {data['verdict_stage_words']}"
    return f"at the {phase}" + (f" of the {stage} stage" if pipeline and stage else "")


def number(value) -> Fraction:
    """A JSON value (int or ``"p/q"``) as an exact fraction."""
    return Fraction(value) if not isinstance(value, str) else Fraction(value)


def wrap(text: str, width: int, indent: str = "", subsequent: str | None = None) -> list[str]:
    """``text`` wrapped at spaces to ``width``; never splits a word (a word
    longer than the width stays whole, on a line of its own) — but a file path longer than a line
    (a source cited in full) may break after one of its slashes."""
    subsequent = indent + "  " if subsequent is None else subsequent
    # A number and its unit stay on one line: "10.27 GB", never "10.27" / "GB".
    glued = _UNIT_AFTER_NUMBER.sub(lambda m: m.group(1) + _GLUE + m.group(2), text)
    room = max(width, 20) - len(subsequent)
    glued = " ".join(word.replace("/", "/" + _SLASH_BREAK) if len(word) > room and "/" in word else word
                     for word in glued.split(" "))
    lines = textwrap.wrap(glued, width=max(width, 20), initial_indent=indent, subsequent_indent=subsequent,
                          break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]
    return [line.replace(_SLASH_BREAK, "").replace(_SLASH_BREAK.rstrip(), "").replace(_GLUE, " ")
            for line in lines]


_GLUE = "\x00"
#: a place a long path may break (a space textwrap breaks at, marked so it is removed where it does not)
_SLASH_BREAK = "\x01 "
_UNIT_AFTER_NUMBER = re.compile(r"([0-9)]) (GB|GiB|MB|MiB|B|TFLOPs|PFLOPs|FLOPs|params|billion|s|ms|GPUs)\b")


def _share(part, whole) -> str:
    return fmt(Fraction(part) / Fraction(whole), "%", 1) if whole else "–"


def layout_words(layout: dict, values: dict | None = None, skip: tuple[str, ...] = (),
                 every_size: bool = False, experts: bool = False) -> str:
    """``t=8 p=8 d=1 (64 GPUs), b=1, s=2048, SP, selective recompute, ZeRO-0, bf16-adam``;
    ``skip`` leaves out ``micro_batch`` or ``seq`` (what ``solve`` answers). ``every_size``: every parallel
    size named, 1 included — t, p, d, c, and for a mixture of experts (``experts``) e and e_t, then v
    (``t=2 p=1 d=1024 c=1 e=1 e_t=1 v=1``): a plan chose each of them, so its answer says each."""
    values = values or {}
    t, p, d, c = (layout.get(k, 1) or 1 for k in ("tp", "pp", "dp", "cp"))
    seq = values.get("s") or layout.get("seq")
    if every_size:
        grid = f" e={layout.get('ep', 1) or 1} e_t={layout.get('etp') or t}" if experts else ""
        words = [f"t={t} p={p} d={d} c={c}{grid} v={layout.get('interleave', 1) or 1} ({t * p * d * c} GPUs)"]
    else:
        words = [f"t={t} p={p} d={d}" + (f" c={c}" if c > 1 else "") + f" ({t * p * d * c} GPUs)"]
    if "micro_batch" not in skip:
        words.append(f"b={layout.get('micro_batch', 1)}")
    if seq and "seq" not in skip:
        # a stated default is said (an assumption); the model's own training length is the model's
        default = layout.get("seq_from", "").startswith("default")
        words.append(f"s={seq}" + (f" ({layout['seq_from']})" if default else ""))
    if layout.get("stage_layers") and p > 1:  # a plan's uneven split (Megatron-Core's first/last-stage layers)
        words.append(split_words(layout["stage_layers"], p, layout.get("first_stage_layers", 0),
                                 layout.get("last_stage_layers", 0)))
    schedule = layout.get("schedule") or ""
    if schedule not in ("", "1f1b", "interleaved") and p > 1:   # a schedule beyond Megatron's (layout.schedules)
        words.append(f"{schedule} schedule" + (f" (v={layout['interleave']} chunks per rank)"
                                               if layout.get("interleave", 1) > 1 else ""))
    elif layout.get("interleave", 1) > 1:
        words.append("interleaved" if every_size else f"v={layout['interleave']} interleaved")
    if layout.get("sp"):  # DTensor's SP keeps the linear layers' all-gathered inputs (Layout.sp_inputs)
        words.append("SP (linear inputs all-gathered)" if layout.get("sp_inputs") == "gathered" else "SP")
    recompute = layout.get("recompute", "none")
    words.append("no recompute" if recompute == "none" else f"{recompute} recompute")
    words.append(f"ZeRO-{layout.get('zero', 0)}")
    for key in ("optimizer", "dtype"):
        if layout.get(key):
            words.append(layout[key] + (" activations" if key == "dtype" else ""))
    words += lever_words(layout)
    if layout.get("loss"):  # the loss kernel, a choice like the attention kernel (Layout.loss)
        words.append(f"{layout['loss']} loss")
    if layout.get("global_batch"):
        steady = p > 1 and layout["global_batch"] == p * (layout.get("micro_batch", 1) or 1) * d
        words.append(f"global batch {layout['global_batch']}"
                     + (f" (m = p = {p}: the pipeline's steady state)" if steady else ""))
    return ", ".join(words)


def precision_line(layout: dict) -> str:
    """``precision: fp8-delayed (TE DelayedScaling, format HYBRID): fprop E4M3 × E4M3, ...``: the layout's
    low-precision recipe (``layout.precision``), or "" for bf16."""
    from ..layout.precision import PRECISIONS

    recipe = PRECISIONS.get(layout.get("precision") or "bf16")
    if recipe is None or not recipe.low_precision:
        return ""
    copies = [copy.name for copy in recipe.weight_copies if layout.get("fp8_transpose_cache", True) or not copy.transpose]
    kept = ("weight copies kept: " + ", ".join(copies) if layout.get("zero") != 3 else
            "weight copies: none kept under ZeRO-3 (quantised per layer as it runs)")
    return (f"precision: {recipe.words()}; {kept}" + ("; amax histories" if recipe.amax_history else "")
            + "; master weights and optimizer states: the --optimizer recipe's")


def split_words(counts, pp: int, first: int = 0, last: int = 0) -> str:
    """``split 2+14×4+3 layers (--first-stage-layers 2 --last-stage-layers 3)``: an uneven pipeline's stages (first,
    each middle, last; first and last at p = 2) and the flags that make it (0: the stage as the middle ones)."""
    body = (f"{counts[0]}+{counts[1]}" if len(counts) == 2 else f"{counts[0]}+{pp - 2}×{counts[1]}+{counts[2]}")
    flags = " ".join(f"--{name}-stage-layers {value}" for name, value in (("first", first), ("last", last)) if value)
    return f"split {body} layers" + (f" ({flags})" if flags else "")


def preset_words(data: dict) -> str:
    """``; from --framework megatron-core: fused attention, ...``: what the preset filled (the layout line
    names every field that came from it, so a typed one is told apart), from ``framework_preset``."""
    from ..layout.frameworks import filled_words

    preset = data.get("framework_preset")
    return "; " + filled_words(preset["framework"], preset["filled"], preset.get("inferred", "")) if preset else ""


def lever_words(layout: dict) -> list[str]:
    """The memory levers of a layout (Layout's lora, base_dtype, offload, activation_offload), in words."""
    words = []
    if layout.get("lora"):
        words.append(f"LoRA r={layout['lora']}"
                     + (f" ({layout['lora_targets']})" if layout.get("lora_targets", "all-linear") != "all-linear"
                        else "")
                     + (f" on an {layout['base_dtype']} base" if layout.get("base_dtype", "bf16") != "bf16" else ""))
    if layout.get("offload", "none") != "none":
        words.append(f"{layout['offload']} offload")
    if layout.get("activation_offload"):
        words.append("activation offload")
    return words


def verdict(total, capacity, what: str = "per GPU") -> str:
    """``FITS in 80.00 GB: 53.92 GB per GPU (67.4%), 26.08 GB headroom`` or
    ``DOES NOT FIT in 80.00 GB: ... over by ...``; without a capacity, which
    common GPUs it fits."""
    total = Fraction(total)
    if capacity:
        head = Fraction(capacity) - total
        if head >= 0:
            return (f"FITS in {fmt(capacity, 'GB')}: {fmt(total, 'GB')} {what} ({_share(total, capacity)}), "
                    f"headroom {fmt(head, 'GB')}")
        return (f"DOES NOT FIT in {fmt(capacity, 'GB')}: {fmt(total, 'GB')} {what} ({_share(total, capacity)}), "
                f"over by {fmt(-head, 'GB')}")
    fits = [name for size, name in COMMON_GPUS if total <= size]
    short = [(size, name) for size, name in COMMON_GPUS if total > size]
    words = f"{fmt(total, 'GB')} {what}; no --gpu or --gpu-memory given: "
    if fits:
        words += f"fits {fits[0]}"
        if short:
            size, name = short[-1]
            words += f", not {name}: over by {fmt(total - size, 'GB')}"
    else:
        size, name = COMMON_GPUS[-1]
        words += f"fits none of the common GPUs, over {name} by {fmt(total - size, 'GB')}"
    return words


def gpu_line(choice: dict | None, time: bool = True) -> str:
    """The answer's GPU line from the ``gpu`` key of a command's JSON: which GPU, its memory, and the
    hardware the step time is for (``time=False``: a command that prices no time)."""
    if not choice:
        return ""
    memory = choice.get("memory_bytes")
    hardware, hardware_from = choice.get("hardware", ""), choice.get("hardware_from", "")
    if choice.get("name") and choice.get("memory_from") == hardware_from:
        words = f"GPU: {choice['name']}, {fmt(memory, 'GB')} ({hardware_from})"
        return words + ("; the step time is for it" if time else "")
    words = "GPU: " + (f"{fmt(memory, 'GB')} ({choice.get('memory_from')})" if memory else
                       "no memory given (--gpu NAME)")
    if time:
        words += f"; step time on {hardware} (" + ("the default" if hardware_from == "default" else hardware_from) + ")"
    return words


#: Lines the bill's summary prints when its data has the key (another ledger's addition):
#: key -> the line, from the exact value. A new total slots in here as one entry.
OPTIONAL_LINES = (
    ("paper_total_bytes", lambda v: f"the papers' total (model states + activations): {fmt(v, 'GB')}"),
    ("params_per_gpu", lambda v: f"parameters per GPU: {int(v):,}"),
)


def bill_summary(data: dict, width: int = 80) -> list[str]:
    """The bill's answer in a few lines, from its JSON data (``bill --json``)."""
    lines = data.get("lines", [])
    total = number(data["total_bytes"])
    states, acts = number(data["model_states_bytes"]), number(data["activation_bytes"])
    config = data.get("model_config", {})
    out = [f"{data['model']}" + (f" — {config['source']}" if config.get("source") else ""),
           "layout: " + layout_words(data.get("layout", {}), data.get("values")) + preset_words(data)]
    if precision_line(data.get("layout", {})):   # the training recipe, named as the frameworks name it
        out.append(precision_line(data["layout"]))
    mix = layer_mix(config.get("layers") or 0, config.get("dims") or {})
    if mix:  # a hybrid's kinds of layer (models.layer_kinds), before the answer that depends on them
        out.insert(1, f"layer mix: {mix}")
    out.append("VERDICT: " + verdict(total, data.get("gpu_memory_bytes")))
    if data.get("gpu"):  # which GPU the memory and the step time are for (--gpu, --gpu-memory, --hardware)
        out.append(gpu_line(data["gpu"], time="step_seconds" in data))
    # the verdict is the peak: what is alive at its instant, class by class, and the papers' sum beside it
    parts = parts_words(data)
    # a middle stage's peak: the ledgers (their lines, the papers' total) are the first stage's
    middle = data.get("verdict_stage_words")
    if total != states + acts:
        parts += f"; papers' total {fmt(states + acts, 'GB')}" + (" (the first stage's)" if middle else "")
    where = instant_words(data)
    out.append(f"total per GPU: {fmt_bytes(total)}" + (f" {where}" if where else "") + f" = {parts}")
    out += [line(number(data[key])) for key, line in OPTIONAL_LINES
            if data.get(key) is not None and (key != "paper_total_bytes" or number(data[key]) != states + acts)]
    ledger_total = {"model states": states, "activations": acts}
    big_ledger = max(ledger_total, key=ledger_total.get)
    memory_lines = [line for line in lines if line.get("ledger") in MEMORY_LEDGERS]
    biggest = ledger_total[big_ledger]
    dominant = f"dominant: {big_ledger} {fmt(biggest, 'GB')} ({_share(biggest, total)})"
    if middle:  # the peak's own classes, and a word that the lines below are another stage's
        _, name, size = max(verdict_parts(data), key=lambda part: part[2])
        dominant = (f"dominant at the peak: {name} {fmt(size, 'GB')} ({_share(size, total)}); the ledgers below "
                    f"list the first stage, not {middle}")
    elif memory_lines:
        top = max(memory_lines, key=lambda line: number(line["value"]))
        dominant += (f"; largest line: {top['name']} ({MEMORY_LEDGERS[top['ledger']]}) "
                     f"{fmt(number(top['value']), 'GB')} ({_share(number(top['value']), total)})")
    out.append(dominant)
    compute = []
    if data.get("flops_per_iteration") is not None:
        compute.append(f"{fmt(number(data['flops_per_iteration']), 'TFLOPs')} per iteration")
    if data.get("flops_per_gpu_per_iteration") is not None:
        compute.append(f"{fmt(number(data['flops_per_gpu_per_iteration']), 'TFLOPs')} per GPU")
    if data.get("step_seconds") is not None:
        compute.append(f"step {float(number(data['step_seconds'])):.3f} s")
    if compute:
        out.append("compute: " + ", ".join(compute))
    unpriced = (data.get("time_model") or {}).get("not_priced") or ()
    if data.get("step_seconds") is not None and unpriced:
        # a step time that leaves a mechanism out says so where it is printed, --brief too
        out.append("⚠ not in the step time: " + "; ".join(item.split(":")[0] for item in unpriced)
                   + " (the time section says what of each)")
    if data.get("approximations"):
        out.append(f"⚠ {len(data['approximations'])} approximation(s) apply (listed below)")
    return [piece for line in out for piece in wrap(line, width)]


def _margin_words(data: dict) -> str:
    """plan's and solve's margin, as their header says it: the GPU memory less the margin kept for what
    the verdict leaves out (by default the bill's not-counted CUDA context and workspaces)."""
    margin = number(data.get("margin_bytes") or 0)
    return f" (margin {fmt(margin, 'GB')})" if margin else ""


def plan_summary(data: dict, width: int = 80) -> list[str]:
    """``plan``'s answer: how many layouts fit and the best one, from its JSON data."""
    gpu = data["gpu_memory_bytes"]
    out = [f"{data['model']} on {data['gpus']} GPUs × {fmt(gpu, 'GB')}, s = {data['seq']}"
           + (f" ({data['seq_from']})" if data.get("seq_from", "").startswith("default") else "")
           + (f", global batch {data['global_batch']}" if data.get("global_batch") else "")
           + _margin_words(data)]
    layouts = data.get("layouts") or []
    if layouts:
        best = layouts[0]
        out.append(f"VERDICT: {data['fitting']:,} of {data['evaluated']:,} valid layouts fit; best by step time:")
        out.append("  " + layout_words(best, every_size=True, experts=bool(data.get("experts"))))
        out.append("  " + verdict(number(best["total_bytes"]), data.get("usable_bytes") or gpu)
                   + (f", step {best['step_seconds']:.3f} s" if best.get("step_seconds") is not None else ""))
    else:
        out.append(f"VERDICT: NO LAYOUT FITS: none of {data['evaluated']:,} valid layouts fits in "
                   f"{fmt(data.get('usable_bytes') or gpu, 'GB')} per GPU")
        closest = data.get("closest")
        if closest:
            out.append("  closest: " + layout_words(closest, every_size=True, experts=bool(data.get("experts"))))
            out.append("  " + verdict(number(closest["total_bytes"]), data.get("usable_bytes") or gpu))
    out += [f"  NOTE: {note}" for note in data.get("notes") or ()]  # a pinned choice not kept, said
    if data.get("gpu"):
        out.append(gpu_line(data["gpu"]))
    return [piece for line in out for piece in wrap(line, width, subsequent="    ")]


def solve_summary(data: dict, width: int = 80) -> list[str]:
    """``solve``'s answer: the largest micro-batch or sequence length that fits."""
    target = data["target"]
    name = target.replace("_", "-")
    letter = "b" if target == "micro_batch" else "s"
    out = [f"{data['model']}: largest {name} that fits in {fmt(data['usable_bytes'], 'GB')} per GPU"
           + _margin_words(data),
           "layout: " + layout_words(data.get("layout", {}), skip=(target,)) + preset_words(data)]
    check = data.get("check", {})
    if data.get(target) is None:
        out.append(f"VERDICT: NOTHING FITS: the smallest valid {letter} = {check.get('value')} needs "
                   f"{fmt(number(check['total_bytes']), 'GB')}")
        lever = data.get("lever")
        if lever:  # what would make the target reachable: the bill's first fix that solve can solve
            out.append(f"  nothing fits; `{lever['flags']}` would make {letter} = {lever[target]} reachable "
                       f"({' + '.join(lever['levers'])}: {fmt(number(lever['total_bytes']), 'GB')})")
        else:
            out.append("  none of the bill's levers makes even that fit: more GPUs (--tp, --pp, --dp) or a larger GPU")
    else:
        out.append(f"VERDICT: {letter} = {data[target]} ("
                   + verdict(number(check["total_bytes"]), data["usable_bytes"]) + ")")
        if check.get("next_value") is not None:
            out.append(f"  the next valid {letter} = {check['next_value']}: "
                       + verdict(number(check["next_total_bytes"]), data["usable_bytes"]))
        table = data.get("max_positions")
        if target == "seq" and table and data[target] > table:  # memory allows it; the model's positions do not
            out.append(f"  s = {data[target]:,} is beyond the config's max_position_embeddings ({table:,}): "
                       "positions the model was not trained for")
    if data.get("gpu"):
        out.append(gpu_line(data["gpu"], time=False))
    return [piece for line in out for piece in wrap(line, width, subsequent="    ")]


def timeline_summary(data: dict, width: int = 80) -> list[str]:
    """``timeline``'s answer: the peak of the step, where it happens, against the GPU."""
    out = [f"{data['model']}: memory over one training step",
           "layout: " + layout_words(data.get("layout", {})) + preset_words(data)
           + (f"; optimisations: {', '.join(data['optimizations'])}" if data.get("optimizations") else "")]
    peak = data["peak_bytes"]
    out.append("VERDICT: " + verdict(peak, data.get("gpu_memory_bytes"), "peak")
               + (f"; reserved {fmt(data['reserved_max_bytes'], 'GB')} at most" if data.get("reserved_max_bytes")
                  else ""))
    if data.get("gpu_memory_bytes") and data.get("fits") is False and peak <= data["gpu_memory_bytes"]:
        out.append("  the caching allocator's reserved memory exceeds the GPU: DOES NOT FIT")
    if data.get("gpu"):
        out.append(gpu_line(data["gpu"], time=False))
    out.append(f"peak {fmt_bytes(peak)} at t* = {data['t_star']}")
    by_class = data.get("peak_by_class") or {}
    if by_class:
        big = max(by_class, key=by_class.get)
        out.append(f"dominant: {big} {fmt(by_class[big], 'GB')} ({_share(by_class[big], peak)} of the peak)")
    return [piece for line in out for piece in wrap(line, width, subsequent="    ")]


def wrap_lines(text: str, width: int) -> list[str]:
    """Every line of ``text`` wrapped to ``width``, keeping its indentation
    (continuations indented four more)."""
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        indent = line[: len(line) - len(body)]
        out += wrap(body, width, indent, indent + "    ") if len(line) > width else [line.rstrip()]
    return out


class WrappingWriter:
    """A text stream that wraps each line written to it (:func:`wrap_lines`)
    before passing it on: ``contextlib.redirect_stdout(WrappingWriter(sys.stdout, 80))``
    fits a command's plain ``print`` calls to the terminal, line by line."""

    def __init__(self, stream, width: int):
        self.stream, self.width, self.pending = stream, width, ""

    def write(self, text: str) -> int:
        self.pending += text
        *complete, self.pending = self.pending.split("\n")
        for line in complete:
            self.stream.write("\n".join(wrap_lines(line, self.width)) + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write("\n".join(wrap_lines(self.pending, self.width)))
            self.pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return hasattr(self.stream, "isatty") and self.stream.isatty()
