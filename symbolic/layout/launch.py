"""Readers of the launch configs people already have: a Megatron-LM command line, a NeMo /
Megatron-Bridge recipe dump, a torchtitan job TOML, a DeepSpeed ``ds_config.json``, an accelerate
config. Each returns a :class:`LaunchReading` — the Layout fields it sets, the model it names (if
any), the framework preset's name, and every option taken (and what it became), ignored (and why) or
assumed (a framework default, with where in the framework's code it is).

Rules: each reader uses the framework's own option names and defaults, read at these commits
(``fetch`` the repository, ``git show COMMIT:PATH``):

- Megatron-LM ``d98e8a64ddf34856e74b24714e3bedb2f5a39553``: ``megatron/training/arguments.py``
  (``--recompute-activations`` → selective, the global batch = micro-batch × d when not given,
  ``--ffn-hidden-size`` 4h or SwiGLU's ``int(8h/3 / 64)·64``, bf16's fp32 main gradients unless
  ``--grad-reduce-in-bf16``), ``megatron/core/model_parallel_config.py`` (t = p = c = e = 1, no SP),
  ``megatron/core/transformer/transformer_config.py`` (dropout 0.1, LayerNorm, biases on,
  ``attention_backend`` auto), ``megatron/training/vocab_utils.py`` (the vocabulary padded to a
  multiple of ``make_vocab_size_divisible_by`` (128) × t), ``megatron/core/optimizer/__init__.py``
  (Adam is TE's or apex's FusedAdam).
- torchtitan ``238fa9953e4aec2a62582121564273d7cbb1e9f1`` (the last commit with job TOMLs):
  ``torchtitan/config/job_config.py``.
- DeepSpeed ``38327e07f6cd39b63418f60cedd1651b0be3e7c3``: ``deepspeed/runtime/config.py``,
  ``deepspeed/runtime/zero/config.py``, ``deepspeed/runtime/zero/offload_config.py``.
- accelerate ``16cb6eb80dd9aa8b4df1a63ef57863e455d53b83``: ``src/accelerate/commands/config/``
  (the YAML keys), ``src/accelerate/utils/dataclasses.py`` (FSDP sharding strategies).
- Megatron-Bridge ``067f987df03b8355b03192d88d70f1709fedf51a``: ``src/megatron/bridge/training/config.py``
  (ConfigContainer: ``model`` holds Megatron-Core's TransformerConfig / ModelParallelConfig names,
  ``train`` the batch, ``dataset`` the sequence, ``optimizer`` / ``ddp`` the optimizer).

An option a reader does not know is refused with one line naming it — it might change memory or
time — unless it is in the reader's table of options that change neither (logging, paths, seeds,
learning-rate schedule), which are listed as ignored with the reason. No value is ``eval``-ed: a
command line is split with :mod:`shlex`, numbers are read by a regular expression.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..core.inputs import clean
from ..models.config import ConfigError, ModelConfig
from .choices import LAUNCH_KINDS, RECOMPUTE_MODULES
from .layout import Layout

#: The kinds of launch config read, and the framework preset each names (``layout/frameworks.py``).
KINDS = LAUNCH_KINDS
MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
TORCHTITAN_COMMIT = "238fa9953e4aec2a62582121564273d7cbb1e9f1"
DEEPSPEED_COMMIT = "38327e07f6cd39b63418f60cedd1651b0be3e7c3"
ACCELERATE_COMMIT = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
BRIDGE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"


@dataclass(frozen=True)
class ReadNote:
    """One line of what a reader did: ``option`` (as the framework spells it), its ``value`` as
    written, and ``what`` — for a taken option what it became (``tp = 8``), for an ignored one why,
    for an assumed default the value and where in the framework's code it is."""

    option: str
    value: str
    what: str

    def line(self) -> str:
        value = f" {self.value}" if self.value not in ("", "True") else ""
        return f"{self.option}{value} → {self.what}"


@dataclass(frozen=True)
class LaunchReading:
    """What a launch config says, as far as this engine models it.

    kind: the reader (:data:`KINDS`). source: what was read (a path, or ``command line``).
    layout_fields: the :class:`Layout` fields set, as (name, value) pairs (the others keep the
    Layout's defaults). model: the ModelConfig the config describes (Megatron's
    ``--num-layers``/``--hidden-size``/...), or None. model_name: the built-in model it names or
    matches exactly (then ``model`` is that built-in), else "". framework: the name of the
    framework preset (``megatron-core``, ``nemo``, ``torchtitan``, ``fsdp``, ``deepspeed``).
    time_options: the step-time options the config implies (``overlap``). gpus: the world size the
    config states (torchrun's ``--nnodes`` × ``--nproc_per_node``, accelerate's ``num_processes``), 0
    if none. taken, ignored, assumed: :class:`ReadNote` lines. notes: what a later field may take
    (Megatron's ``--cross-entropy-loss-fusion`` for the loss kernel).
    """

    kind: str
    source: str
    layout_fields: tuple[tuple[str, object], ...]
    model: ModelConfig | None
    model_name: str
    framework: str
    time_options: tuple[tuple[str, str], ...]
    gpus: int
    taken: tuple[ReadNote, ...]
    ignored: tuple[ReadNote, ...]
    assumed: tuple[ReadNote, ...]
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def fields(self) -> dict:
        return dict(self.layout_fields)

    def layout(self, **overrides) -> Layout:
        """The Layout read (``overrides`` win)."""
        return Layout(**{**self.fields, **overrides})

    def options(self) -> dict:
        """Keyword arguments for ``symbolic.bill`` / ``timeline`` (``symbolic.bill(**reading.options())``):
        the model (when the config names one), the layout fields, the step-time options and the framework
        preset (``framework=``: it fills only what the reading did not set, as ``--from`` does).
        ``symbolic.bill(**reading.options())`` is ``bill --from KIND SOURCE --json`` without its
        ``read_from``; a keyword of your own goes in the dict (``{**reading.options(), "tp": 4}``)."""
        out = {"model": self.model} if self.model is not None else {}
        for name, value in self.layout_fields:
            if name == "recompute_modules":
                out[name] = ",".join(value)
            elif name == "moe_capacity":
                out["moe_capacity_factor"] = str(value)
            else:
                out[name] = value
        return {**out, **dict(self.time_options), "framework": self.framework}

    def to_dict(self) -> dict:
        """Plain data for ``--json`` (``read_from``)."""
        def rows(notes):
            return [{"option": n.option, "value": n.value, "what": n.what} for n in notes]
        return {"kind": self.kind, "source": self.source, "framework": self.framework,
                "model": self.model_name or (self.model.name if self.model else None),
                "layout": {name: (str(value) if not isinstance(value, (int, bool, str, list)) else value)
                           for name, value in self.layout_fields},
                "time_options": dict(self.time_options), "gpus": self.gpus or None,
                "taken": rows(self.taken), "ignored": rows(self.ignored), "assumed": rows(self.assumed),
                "notes": dict(self.notes)}

    def lines(self) -> list[str]:
        """The short block the bill prints after its first lines."""
        out = [f"read from {self.kind} ({self.source}), framework preset {self.framework}: "
               f"{len(self.taken)} options taken, {len(self.ignored)} ignored, {len(self.assumed)} defaults assumed"]
        out += ["  taken: " + "; ".join(n.line() for n in self.taken)] if self.taken else []
        out += ["  assumed: " + "; ".join(n.line() for n in self.assumed)] if self.assumed else []
        by_reason: dict[str, list[str]] = {}
        for note in self.ignored:  # grouped by the reason: "--lr, --min-lr (learning-rate schedule)"
            by_reason.setdefault(note.what, []).append(note.option)
        out += ["  ignored: " + "; ".join(f"{', '.join(options)} ({why})" for why, options in by_reason.items())
                ] if self.ignored else []
        return out


class _Reader:
    """Accumulates what one reader took, ignored and assumed; refuses with one line."""

    def __init__(self, kind: str, source: str, framework: str, code: str):
        self.kind, self.source, self.framework, self.code = kind, source, framework, code
        self.fields: dict = {}
        self.taken: list[ReadNote] = []
        self.ignored: list[ReadNote] = []
        self.assumed: list[ReadNote] = []
        self.model: ModelConfig | None = None
        self.model_name = ""
        self.time: dict = {}
        self.gpus = 0
        self.notes: dict = {}

    def take(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.taken.append(ReadNote(option, clean(str(value)), what))

    def ignore(self, option, value, why) -> None:
        self.ignored.append(ReadNote(option, clean(str(value)), why))

    def assume(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.assumed.append(ReadNote(option, clean(str(value)), what))

    def refuse(self, option, value, why):
        shown = "" if value is True or value is None or value == "" else f" {clean(str(value))}"
        raise ConfigError(f"--from {self.kind}: {option}{shown}: {why}")

    def reading(self) -> LaunchReading:
        return LaunchReading(self.kind, clean(self.source), tuple(self.fields.items()), self.model, self.model_name,
                             self.framework, tuple(self.time.items()), self.gpus, tuple(self.taken),
                             tuple(self.ignored), tuple(self.assumed), tuple(self.notes.items()))


def _int(reader: _Reader, option: str, value, low: int = 1) -> int:
    """A whole number of at least ``low`` from a config value (text or int), else one line."""
    if isinstance(value, bool) or not (isinstance(value, int) or re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", str(value))):
        reader.refuse(option, value, f"give a whole number (at least {low}, at most 12 digits)")
    number = int(value)
    if number < low:
        reader.refuse(option, value, f"must be at least {low}")
    return number


def _number(reader: _Reader, option: str, value) -> float:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]{1,3})?", text):
        reader.refuse(option, value, "give a number")
    return float(text)


def builtin_match(model: ModelConfig) -> str:
    """The built-in model whose every dimension ``model`` has, or "" (the bill then names it)."""
    from ..models.builtin import presets

    for name, builtin in presets().items():
        if replace(model, name=builtin.name, source=builtin.source) == builtin:
            return name
    return ""


# ----------------------------------------------------------------------------------------------
# Megatron-LM: a command line, an arguments file, or a launch script's literal arguments
# ----------------------------------------------------------------------------------------------

#: Megatron-LM options that change no memory and no time the engine models, by the reason.
_MEGATRON_IGNORED = {
    "learning-rate schedule or optimizer hyper-parameter (no memory or time)": (
        "lr", "min-lr", "lr-decay-style", "lr-warmup-fraction", "lr-warmup-iters", "lr-warmup-samples",
        "lr-decay-iters", "lr-decay-samples", "lr-warmup-init", "weight-decay", "start-weight-decay",
        "end-weight-decay", "weight-decay-incr-style", "adam-beta1", "adam-beta2", "adam-eps", "sgd-momentum",
        "clip-grad", "init-method-std", "decoupled-lr", "decoupled-min-lr", "lr-wsd-decay-style",
        "lr-wsd-decay-iters", "lr-wsd-decay-samples", "override-opt_param-scheduler",
        "use-checkpoint-opt_param-scheduler"),
    "run length (no memory or time per step)": ("train-iters", "train-samples", "exit-duration-in-mins",
                                                 "exit-interval", "exit-signal-handler"),
    "a batch ramp: the bill accounts a step at --global-batch-size": ("step-batch-size-schedule", "rampup-batch-size"),
    "data, tokenizer or checkpoint path (no memory or time)": (
        "data-path", "vocab-file", "merge-file", "tokenizer-model", "data-cache-path", "split", "mock-data",
        "num-workers", "no-mmap-bin-files", "tiktoken-pattern", "no-create-attention-mask-in-dataloader",
        "train-data-path", "valid-data-path", "test-data-path", "save", "load", "save-interval", "ckpt-format",
        "no-load-optim", "no-load-rng", "no-save-optim", "no-save-rng", "finetune", "pretrained-checkpoint",
        "async-save", "dist-ckpt-strictness", "use-dist-ckpt", "auto-detect-ckpt-format", "data-impl",
        "dataloader-type", "reset-position-ids", "reset-attention-mask", "eod-mask-loss"),
    "logging or evaluation (no memory or time per step)": (
        "log-interval", "eval-interval", "eval-iters", "tensorboard-dir", "tensorboard-queue-size",
        "tensorboard-log-interval", "wandb-project", "wandb-exp-name", "wandb-save-dir", "log-throughput",
        "log-timers-to-tensorboard", "log-validation-ppl-to-tensorboard", "log-memory-to-tensorboard",
        "log-params-norm", "log-num-zeros-in-grad", "log-world-size-to-tensorboard", "timing-log-level",
        "timing-log-option", "log-progress", "logging-level", "one-logger-async", "skip-train"),
    "seed or loss scaling (no memory or time)": ("seed", "loss-scale", "initial-loss-scale", "min-loss-scale",
                                                 "loss-scale-window", "hysteresis", "calculate-per-token-loss"),
    "launch environment (no memory or time)": ("use-mcore-models", "distributed-backend",
                                               "distributed-timeout-minutes", "local-rank", "tokenizer-type",
                                               "rotary-base", "rotary-seq-len-interpolation-factor", "manual-gc",
                                               "manual-gc-interval", "no-check-for-nan-in-loss-and-grad",
                                               "check-for-nan-in-loss-and-grad"),
    "RoPE's base or the LayerNorm's zero-centred weight: the same parameters and saved tensors": (
        "apply-layernorm-1p", "rotary-percent"),
    "frees the allocator's cache between phases: reserved memory, not the allocated peak accounted": (
        "empty-unused-memory-level",),
}
_MEGATRON_IGNORE = {name: why for why, names in _MEGATRON_IGNORED.items() for name in names}
#: torchrun's own options (before the script): they launch this node; the world size is taken from them.
_TORCHRUN = ("nproc_per_node", "nproc-per-node", "nnodes", "node_rank", "node-rank", "master_addr", "master-addr",
             "master_port", "master-port", "rdzv_backend", "rdzv-backend", "rdzv_endpoint", "rdzv-endpoint",
             "rdzv_id", "rdzv-id", "standalone", "max_restarts", "max-restarts")
#: Options without a value (argparse ``store_true`` / ``store_false`` in arguments.py).
_MEGATRON_FLAGS = {
    "sequence-parallel", "use-distributed-optimizer", "bf16", "fp16", "swiglu", "group-query-attention",
    "untie-embeddings-and-output-weights", "disable-bias-linear", "add-qkv-bias", "recompute-activations",
    "overlap-grad-reduce", "overlap-param-gather", "grad-reduce-in-bf16", "accumulate-allreduce-grads-in-fp32",
    "cross-entropy-loss-fusion", "moe-pad-expert-input-to-capacity", "moe-grouped-gemm", "standalone",
    "mock-data", "no-mmap-bin-files", "no-create-attention-mask-in-dataloader", "use-mcore-models",
    "apply-layernorm-1p", "calculate-per-token-loss", "manual-gc", "log-throughput", "log-timers-to-tensorboard",
    "log-validation-ppl-to-tensorboard", "log-memory-to-tensorboard", "log-params-norm", "log-num-zeros-in-grad",
    "no-load-optim", "no-load-rng", "no-save-optim", "no-save-rng", "finetune", "async-save", "use-dist-ckpt",
    "auto-detect-ckpt-format", "reset-position-ids", "reset-attention-mask", "eod-mask-loss", "exit-signal-handler",
    "log-world-size-to-tensorboard", "log-progress", "skip-train", "no-check-for-nan-in-loss-and-grad",
    "check-for-nan-in-loss-and-grad", "override-opt_param-scheduler", "use-checkpoint-opt_param-scheduler",
    "one-logger-async", "lr-warmup-init",
}
_LIST_OPTIONS = {"recompute-modules", "split"}
#: Tokenizers whose vocabulary is known without reading a file: GPT-2's BPE (50,257 tokens).
_KNOWN_VOCAB = {"GPT2BPETokenizer": 50257}


def _shell_tokens(text: str) -> list[str]:
    """A command line, an arguments file or a launch script -> its words, with ``NAME=value``
    assignments of literal values substituted into later ``$NAME`` / ``${NAME}`` / ``${NAME:-x}``
    (nothing is executed; what stays a variable is refused where it matters)."""
    text = re.sub(r"\\\r?\n", " ", text)
    try:
        words = shlex.split(text, comments=True, posix=True)
    except ValueError as error:
        raise ConfigError(f"--from megatron: cannot split the command line ({error}): check its quotes") from None
    known: dict[str, str] = {}
    out: list[str] = []

    def substitute(word: str) -> str:
        word = re.sub(r"\$\{([A-Za-z_0-9]+):-([^}]*)\}", lambda m: known.get(m.group(1), m.group(2).strip("\"'")), word)
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z_0-9]*)\}?", lambda m: known.get(m.group(1), m.group(0)), word)

    for word in words:
        assignment = re.fullmatch(r"([A-Za-z_][A-Za-z_0-9]*)=(.*)", word)
        if assignment and not word.startswith("-"):
            value = substitute(assignment.group(2))
            if not value.startswith("(") and "$(" not in value:
                known[assignment.group(1)] = value
            continue
        if re.fullmatch(r"\$\{[A-Za-z_0-9]+\[@\]\}|[()]|\)", word):
            continue
        word = substitute(word)
        if word.startswith("--") and " " in word:  # a quoted "--option value" inside a bash array
            out.extend(word.split())
        else:
            out.append(word)
    return out


def _megatron_options(reader: _Reader, words: list[str]) -> dict[str, object]:
    """Words -> {option name without dashes: value}, argparse's last-one-wins."""
    options: dict[str, object] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("--") or word == "--":
            continue  # the program (torchrun, python, pretrain_gpt.py) or a shell word
        name, _, inline = word[2:].partition("=")
        if inline or "=" in word:
            options[name] = inline
        elif name in _MEGATRON_FLAGS:
            options[name] = True
        elif name in _LIST_OPTIONS:
            values = []
            while index < len(words) and not words[index].startswith("--"):
                values.append(words[index])
                index += 1
            options[name] = values
        elif index < len(words) and not words[index].startswith("--"):
            options[name] = words[index]
            index += 1
        else:
            options[name] = True
    return options


def read_megatron(source, model: ModelConfig | None = None) -> LaunchReading:
    """A Megatron-LM / Megatron-Core launch: ``source`` is the command line (text or a list of
    words) or a path to a file of arguments or a launch script (its literal arguments)."""
    text, where = _source_text(source, "megatron")
    reader = _Reader("megatron", where, "megatron-core", f"Megatron-LM {MEGATRON_COMMIT[:7]}")
    words = text if isinstance(text, list) else _shell_tokens(text)
    options = _megatron_options(reader, words)
    _read_megatron(reader, options, model)
    return reader.reading()


def _read_megatron(reader: _Reader, options: dict, model: ModelConfig | None) -> None:
    used: set[str] = set()
    code = f"arguments.py@{MEGATRON_COMMIT[:7]}"

    def get(name, default=None):
        used.add(name)
        return options.get(name, default)

    def unresolved(name):
        value = options.get(name)
        if isinstance(value, str) and "$" in value:
            reader.refuse(f"--{name}", value, "a shell variable this file does not set; give its value")

    for name in options:  # a path may stay a variable (it is ignored); a size may not
        if name not in _MEGATRON_IGNORE and name not in _TORCHRUN:
            unresolved(name)

    def size(name, field, default=1, low=1):
        if name in options:
            value = _int(reader, f"--{name}", get(name), low)
            reader.take(f"--{name}", value, f"{field} = {value}")
            return value
        used.add(name)
        return default

    tp = size("tensor-model-parallel-size", "tp")
    pp = size("pipeline-model-parallel-size", "pp")
    cp = size("context-parallel-size", "cp")
    ep = size("expert-model-parallel-size", "ep")
    etp = size("expert-tensor-parallel-size", "etp", default=0)
    mb = size("micro-batch-size", "micro_batch")
    gb = size("global-batch-size", "global_batch", default=0)
    reader.fields.update(tp=tp, pp=pp, micro_batch=mb)
    for name, value in (("cp", cp), ("ep", ep), ("etp", etp), ("global_batch", gb)):
        if value not in (0, 1) or name == "global_batch" and value:
            reader.fields[name] = value
    if gb == 0:
        reader.assume("--global-batch-size", "", "micro-batch × d (arguments.py: one micro-batch per data-parallel "
                      "rank)")
    if get("sequence-parallel") and tp == 1:
        reader.ignore("--sequence-parallel", "", "arguments.py turns it off when t = 1")
    elif get("sequence-parallel"):
        reader.take("--sequence-parallel", "", "sp", sp=True)

    # Precision and the optimizer's state recipe.
    if get("bf16") and get("fp16"):
        reader.refuse("--bf16", "", "and --fp16 together (arguments.py asserts one)")
    grads_bf16 = get("grad-reduce-in-bf16") or get("main-grads-dtype") == "bf16"
    for name in ("main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype"):
        if name in options and get(name) != "fp32":
            reader.refuse(f"--{name}", options[name], "optimizer states below fp32 are not a recipe this engine models")
    if "use-precision-aware-optimizer" in options:
        reader.refuse("--use-precision-aware-optimizer", "", "not modelled (its states' dtypes vary)")
    optimizer = str(get("optimizer", "adam"))
    if optimizer not in ("adam", "sgd"):
        reader.refuse("--optimizer", optimizer, "Megatron's choices the engine models are adam and sgd")
    if "optimizer" in options:
        reader.take("--optimizer", optimizer, "the Adam recipes" if optimizer == "adam" else "SGD with momentum")
    if get("bf16"):
        recipe = ("bf16-adam" if grads_bf16 else "bf16-adam-fp32-grads") if optimizer == "adam" else "bf16-sgd-momentum"
        reader.take("--bf16", "", f"dtype = bf16, optimizer = {recipe}", dtype="bf16", optimizer=recipe)
        if not grads_bf16 and optimizer == "adam":
            reader.assume("--main-grads-dtype", "fp32", f"fp32 main gradients for bf16 ({code}: "
                          "accumulate and all-reduce gradients in fp32)")
        elif grads_bf16:
            reader.take("--grad-reduce-in-bf16", "", "bf16 gradients")
    elif get("fp16"):
        fp32_grads = get("accumulate-allreduce-grads-in-fp32")
        recipe = ("bf16-adam-fp32-grads" if fp32_grads else "bf16-adam") if optimizer == "adam" else "bf16-sgd-momentum"
        reader.take("--fp16", "", f"dtype = fp16, optimizer = {recipe} (fp16 weights and gradients are 2 B "
                    "like bf16's; fp32 master and states)", dtype="fp16", optimizer=recipe)
    else:
        recipe = "fp32-adam" if optimizer == "adam" else "sgd-momentum"
        reader.assume("--bf16/--fp16", "absent", f"fp32 training (params_dtype fp32), optimizer = {recipe}",
                      dtype="fp32", optimizer=recipe)
    reader.assume("--optimizer-impl", "", "fused (Megatron's Adam is TE's or apex's FusedAdam: "
                  "megatron/core/optimizer/__init__.py)", optimizer_impl="fused")
    if get("use-distributed-optimizer"):
        reader.take("--use-distributed-optimizer", "", "zero = 1 (master weights and optimizer states sharded over d)",
                    zero=1)
    for name in ("use-megatron-fsdp", "use-torch-fsdp2", "optimizer-cpu-offload", "cpu-offloading",
                 "fp8-param-gather", "use-custom-fsdp"):
        if name in options:
            reader.refuse(f"--{name}", options[name], "not modelled by this reader yet; give the layout by hand")

    # Recompute.
    granularity = get("recompute-granularity")
    if get("recompute-activations"):
        granularity = "selective"
        reader.take("--recompute-activations", "", "recompute = selective (arguments.py sets the granularity)")
    if granularity == "selective":
        modules = get("recompute-modules") or []
        bad = [m for m in modules if m not in RECOMPUTE_MODULES]
        if bad:
            reader.refuse("--recompute-modules", " ".join(bad), f"modelled: {', '.join(RECOMPUTE_MODULES)}")
        reader.fields.update(recompute="selective", recompute_modules=tuple(modules))
        if "recompute-granularity" in options:
            reader.take("--recompute-granularity", "selective", "recompute = selective"
                        + (f", modules {', '.join(modules)}" if modules else " (core_attn, Megatron-Core's default)"))
    elif granularity == "full":
        method, count = get("recompute-method"), get("recompute-num-layers")
        reader.fields["recompute"] = "full"
        reader.take("--recompute-granularity", "full", "recompute = full")
        reader.notes["recompute_full"] = f"{method}:{count}"  # checked against the layers below
    elif granularity is not None:
        reader.refuse("--recompute-granularity", granularity, "give full or selective")
    used.update(("recompute-method", "recompute-num-layers"))

    # Pipeline schedule.
    if "virtual-pipeline-model-parallel-size" in options:
        v = _int(reader, "--virtual-pipeline-model-parallel-size", get("virtual-pipeline-model-parallel-size"))
        reader.take("--virtual-pipeline-model-parallel-size", v, f"interleave = {v}", interleave=v)
    for name, field in (("decoder-first-pipeline-num-layers", "first_stage_layers"),
                        ("decoder-last-pipeline-num-layers", "last_stage_layers")):
        if name in options:
            value = _int(reader, f"--{name}", get(name))
            reader.take(f"--{name}", value, f"{field} = {value}", **{field: value})
    if "pipeline-model-parallel-layout" in options:
        reader.take("--pipeline-model-parallel-layout", options["pipeline-model-parallel-layout"], "pipeline_layout",
                    pipeline_layout=str(get("pipeline-model-parallel-layout")))

    # FP8 and the attention kernel.
    if "fp8-format" in options:
        fmt = get("fp8-format")
        if fmt not in ("e4m3", "hybrid"):
            reader.refuse("--fp8-format", fmt, "give e4m3 or hybrid")
        reader.take("--fp8-format", fmt, "fp8_activations (Transformer Engine keeps the linear layers' inputs in FP8)",
                    fp8_activations=True)
    for name in ("fp8-amax-history-len", "fp8-amax-compute-algo", "fp8-recipe"):
        if name in options:
            get(name)
            reader.ignore(f"--{name}", options[name], "FP8 scaling bookkeeping (a few floats per tensor)")
    backend = get("attention-backend", "auto")
    if backend not in ("auto", "flash", "fused", "unfused", "local"):
        reader.refuse("--attention-backend", backend, "give auto, flash, fused, unfused or local")
    fused = backend in ("auto", "flash", "fused")
    note = (f"flash_attention = {fused} ("
            + ("Transformer Engine's fused/flash kernel: no s×s tensor saved" if fused else "the s×s scores kept") + ")")
    if "attention-backend" in options:
        reader.take("--attention-backend", backend, note, flash_attention=fused)
    else:
        reader.assume("--attention-backend", "auto", note + " (transformer_config.py's default)",
                      flash_attention=fused)

    # Mixture of experts (the layout's side; the model comes from MODEL).
    if "moe-token-dispatcher-type" in options:
        dispatcher = get("moe-token-dispatcher-type")
        if dispatcher != "alltoall":
            reader.refuse("--moe-token-dispatcher-type", dispatcher, "the dispatcher modelled is alltoall")
        reader.take("--moe-token-dispatcher-type", dispatcher, "moe_dispatcher = alltoall", moe_dispatcher="alltoall")
    if "moe-expert-capacity-factor" in options:
        from fractions import Fraction
        factor = Fraction(str(_number(reader, "--moe-expert-capacity-factor", get("moe-expert-capacity-factor"))))
        reader.take("--moe-expert-capacity-factor", options["moe-expert-capacity-factor"], f"moe_capacity = {factor}",
                    moe_capacity=factor)
    if get("moe-pad-expert-input-to-capacity"):
        reader.take("--moe-pad-expert-input-to-capacity", "", "moe_pad_to_capacity", moe_pad_to_capacity=True)
    if get("moe-grouped-gemm"):
        reader.ignore("--moe-grouped-gemm", "", "the alltoall dispatcher's experts are grouped already")

    # Time: what the DP collectives overlap.
    grad, param = get("overlap-grad-reduce"), get("overlap-param-gather")
    if grad:
        reader.time["overlap"] = "default"
        reader.take("--overlap-grad-reduce", "", "--overlap default (DP gradient reduce hidden but its last bucket)")
        if param:
            reader.take("--overlap-param-gather", "", "the parameter all-gather hidden (--overlap default)")
        elif get("use-distributed-optimizer"):
            reader.assume("--overlap-param-gather", "absent", "approximation: the time model's --overlap default "
                          "hides the parameter all-gather, Megatron exposes it (its time is in the TIME section)")
    else:
        reader.time["overlap"] = "none"
        reader.assume("--overlap-grad-reduce", "absent", "--overlap none (DistributedDataParallelConfig: "
                      "overlap_grad_reduce False)")
    if get("cross-entropy-loss-fusion"):
        reader.notes["loss"] = "fused"
        reader.take("--cross-entropy-loss-fusion", "", "loss = fused (Megatron's fused cross-entropy kernel)")

    # The world size (torchrun's options), then d = world / (t·p·c).
    world = 0
    nproc, nnodes = options.get("nproc_per_node", options.get("nproc-per-node")), options.get("nnodes")
    for name in _TORCHRUN:
        if name in options:
            used.add(name)
    if nproc is not None and re.fullmatch(r"[0-9]+", str(nproc)) and re.fullmatch(r"[0-9]+", str(nnodes or "1")):
        world = int(nproc) * int(nnodes or 1)
    if world and world % (tp * pp * cp) == 0:
        d = world // (tp * pp * cp)
        reader.gpus = world
        reader.take("torchrun --nnodes × --nproc_per_node", world, f"dp = {world} / (t·p·c) = {d}", dp=d)
    else:
        why = (f"torchrun's {world} GPUs are not a multiple of t·p·c = {tp * pp * cp}" if world
               else "the arguments do not say the world size")
        reader.assume("dp", 1, f"{why}: d = 1 assumed; give --dp (or --gpus on plan)", dp=1)
    for name in _TORCHRUN:
        if name in options:
            reader.ignore(f"--{name}", options[name], "torchrun's launch of this node (the world size is read above)")

    _megatron_model(reader, options, used, model, tp, pp)
    for name, value in options.items():
        if name in used:
            continue
        if name in _MEGATRON_IGNORE:
            reader.ignore(f"--{name}", "" if value is True else (" ".join(value) if isinstance(value, list) else value),
                          _MEGATRON_IGNORE[name])
        else:
            reader.refuse(f"--{name}", "" if value is True else value,
                          f"not an option this reader knows ({code}); it may change memory or time, so it is "
                          "not dropped — remove it from the command line if it changes neither")


def _megatron_model(reader: _Reader, options: dict, used: set, model: ModelConfig | None, tp: int, pp: int) -> None:
    """Megatron's model arguments -> a ModelConfig (the gpt or llama inventory), or MODEL's."""
    model_options = ("num-layers", "hidden-size", "num-attention-heads", "ffn-hidden-size", "group-query-attention",
                     "num-query-groups", "kv-channels", "swiglu", "normalization", "position-embedding-type",
                     "untie-embeddings-and-output-weights", "disable-bias-linear", "add-qkv-bias", "vocab-size",
                     "padded-vocab-size", "make-vocab-size-divisible-by", "max-position-embeddings", "seq-length",
                     "attention-dropout", "hidden-dropout", "num-experts", "moe-router-topk", "moe-ffn-hidden-size",
                     "encoder-seq-length")
    given = [name for name in model_options if name in options]
    used.update(model_options)
    seq = options.get("seq-length", options.get("encoder-seq-length"))
    if model is not None:
        reader.model, reader.model_name = model, ""
        for name in given:
            if name in ("seq-length", "encoder-seq-length"):
                continue
            value = options[name]
            reader.ignore(f"--{name}", "" if value is True else value, f"the model given, {model.name}, is used")
    elif not any(name in options for name in ("num-layers", "hidden-size", "num-attention-heads")):
        reader.assume("model", "", "not in the arguments: give MODEL (a built-in name or an HF config.json)")
    else:
        reader.model = _megatron_model_config(reader, options, tp)
        reader.model_name = builtin_match(reader.model)
        if reader.model_name:
            from ..models.builtin import preset
            reader.model = preset(reader.model_name)
    if seq is not None:
        seq_value = _int(reader, "--seq-length", seq)
        if reader.model is None or seq_value != reader.model.seq:
            reader.take("--seq-length", seq_value, f"seq = {seq_value}", seq=seq_value)
        else:
            reader.take("--seq-length", seq_value, f"seq = {seq_value} (the model's)")
    elif reader.model is None or model is not None:
        reader.assume("--seq-length", "absent", "the model's sequence length")
    # Interleaving given as layers per virtual stage, and full recompute's method, need L.
    layers = reader.model.layers if reader.model is not None else None
    if "num-layers-per-virtual-pipeline-stage" in options:
        used.add("num-layers-per-virtual-pipeline-stage")
        n = _int(reader, "--num-layers-per-virtual-pipeline-stage", options["num-layers-per-virtual-pipeline-stage"])
        if layers is None or layers % pp or (layers // pp) % n:
            reader.refuse("--num-layers-per-virtual-pipeline-stage", n, "needs the model's layers, divisible by p and "
                          "then by this count (arguments.py: v = L/p/n)")
        v = layers // pp // n
        reader.take("--num-layers-per-virtual-pipeline-stage", n, f"interleave = L/p/n = {v}", interleave=v)
    if "recompute_full" in reader.notes:
        method, count = reader.notes.pop("recompute_full").split(":")
        if method not in ("uniform", "block"):
            reader.refuse("--recompute-granularity", "full", "needs --recompute-method uniform or block "
                          "(transformer_config.py asserts one)")
        chunk = layers // pp // reader.fields.get("interleave", 1) if layers else None
        whole = (method == "uniform" and count == "1") or (method == "block" and chunk and count.isdigit()
                                                           and int(count) >= chunk)
        if not whole:
            reader.refuse("--recompute-method", f"{method} --recompute-num-layers {count}",
                          "only full recompute of every layer is modelled (uniform with 1 layer, or block with every "
                          "layer of a chunk); a partial full recompute is not")
        reader.take("--recompute-method", method, f"every layer recomputed ({count} layer{'s' if count != '1' else ''}"
                    f" per {'checkpoint' if method == 'uniform' else 'chunk'})")


def _megatron_model_config(reader: _Reader, options: dict, tp: int) -> ModelConfig:
    def need(name):
        if name not in options:
            reader.refuse(f"--{name}", "", "missing: the model arguments need --num-layers, --hidden-size, "
                          "--num-attention-heads and --seq-length")
        return _int(reader, f"--{name}", options[name])

    layers, hidden, heads = need("num-layers"), need("hidden-size"), need("num-attention-heads")
    seq = need("seq-length") if "seq-length" in options or "encoder-seq-length" not in options else \
        _int(reader, "--encoder-seq-length", options["encoder-seq-length"])
    if "num-experts" in options:
        reader.refuse("--num-experts", options["num-experts"], "a mixture of experts from Megatron's arguments is not "
                      "read yet: give MODEL (its HF config.json)")
    swiglu = bool(options.get("swiglu"))
    norm = str(options.get("normalization", "LayerNorm"))
    positions = str(options.get("position-embedding-type", "learned_absolute"))
    bias = not options.get("disable-bias-linear")
    llama = (swiglu, norm, positions, bias) == (True, "RMSNorm", "rope", False)
    gpt = (swiglu, norm, positions, bias) == (False, "LayerNorm", "learned_absolute", True)
    if not (llama or gpt):
        reader.refuse("--normalization/--swiglu/--position-embedding-type/--disable-bias-linear",
                      f"{norm}, {'SwiGLU' if swiglu else 'GeLU'}, {positions}, {'biases' if bias else 'no biases'}",
                      "the inventories itemised are GPT (LayerNorm, GeLU, learned positions, biases: Megatron's "
                      "defaults) and LLaMA (RMSNorm, --swiglu, rope, --disable-bias-linear); give MODEL otherwise")
    if options.get("add-qkv-bias"):
        reader.refuse("--add-qkv-bias", "", "Q/K/V biases on the LLaMA inventory: give MODEL (an HF config.json)")
    arch_words = "LLaMA inventory (RMSNorm, SwiGLU, RoPE, no biases)" if llama else \
        "GPT inventory (LayerNorm, GeLU, learned positions, biases)"
    for name, default in (("attention-dropout", "0.1"), ("hidden-dropout", "0.1")):
        value = _number(reader, f"--{name}", options.get(name, default))
        if gpt and value == 0:
            reader.refuse(f"--{name}", options[name], "the GPT inventory keeps dropout masks; p = 0 saves none")
        if llama and value != 0:
            reader.refuse(f"--{name}", options.get(name, f"{default} (Megatron's default)"),
                          "the LLaMA inventory has no dropout: give --attention-dropout 0 --hidden-dropout 0")
        note = f"p = {value:g}" + (" (dropout masks kept)" if value else "")
        (reader.take if name in options else reader.assume)(f"--{name}", options.get(name, default),
                                                             note + ("" if name in options else " (Megatron's default)"))
    if "ffn-hidden-size" in options:
        ffn = _int(reader, "--ffn-hidden-size", options["ffn-hidden-size"])
    else:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
        reader.assume("--ffn-hidden-size", "absent", f"{ffn} ({'int(8h/3 / 64)·64 for SwiGLU' if swiglu else '4h'}, "
                      "arguments.py)")
    kv_heads = 0
    if options.get("group-query-attention"):
        kv_heads = _int(reader, "--num-query-groups", options.get("num-query-groups", 1))
    if "kv-channels" in options and _int(reader, "--kv-channels", options["kv-channels"]) * heads != hidden:
        reader.refuse("--kv-channels", options["kv-channels"], f"a head width other than h/a = {hidden // heads} "
                      "is not read from Megatron's arguments: give MODEL (an HF config.json)")
    if "padded-vocab-size" in options:
        vocab = _int(reader, "--padded-vocab-size", options["padded-vocab-size"])
    else:
        if "vocab-size" in options:
            raw = _int(reader, "--vocab-size", options["vocab-size"])
            raw_from = "--vocab-size"
        elif options.get("tokenizer-type", "GPT2BPETokenizer") in _KNOWN_VOCAB and "vocab-file" in options:
            raw = _KNOWN_VOCAB[options.get("tokenizer-type", "GPT2BPETokenizer")]
            raw_from = "GPT-2 BPE's vocabulary (--vocab-file)"
        else:
            reader.refuse("--vocab-size", "", "missing: the vocabulary cannot be read from a tokenizer file; give "
                          "--vocab-size (or --padded-vocab-size)")
        divisible = _int(reader, "--make-vocab-size-divisible-by", options.get("make-vocab-size-divisible-by", 128))
        multiple = divisible * tp
        vocab = math.ceil(raw / multiple) * multiple
        reader.assume("vocabulary padding", raw, f"V = {vocab:,}: {raw_from} {raw:,} padded to a multiple of "
                      f"make_vocab_size_divisible_by {divisible} × t {tp} (megatron/training/vocab_utils.py)")
    table = 0
    if gpt and "max-position-embeddings" in options:
        rows = _int(reader, "--max-position-embeddings", options["max-position-embeddings"])
        table = 0 if rows == seq else rows
    model = ModelConfig(name="megatron-arguments", layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=seq,
                        ffn=0 if (gpt and ffn == 4 * hidden) else ffn,
                        tied=not options.get("untie-embeddings-and-output-weights"),
                        positions="rope" if llama else "learned", arch="llama" if llama else "gpt",
                        kv_heads=kv_heads if kv_heads != heads else 0, mlp="swiglu" if llama else "gelu",
                        norm="rmsnorm" if llama else "layernorm", position_table=table,
                        source=f"Megatron-LM arguments ({reader.source})")
    reader.take("model arguments", f"L={layers} h={hidden} a={heads}", f"the {arch_words}: "
                f"L = {layers}, h = {hidden}, a = {heads}" + (f", g = {kv_heads}" if kv_heads else "")
                + f", f = {ffn}, V = {vocab:,}, s = {seq}, {'tied' if model.tied else 'untied'} embeddings")
    return model


def _source_text(source, kind: str):
    """(text or word list, where) from a path, a command line or a word list."""
    if isinstance(source, (list, tuple)):
        return [str(word) for word in source], "command line"
    text = str(source)
    if kind == "megatron" and ("\n" in text or re.search(r"(^|\s)--[a-z]", text)):
        return text, "command line"
    path = Path(text).expanduser()
    try:
        if path.is_file():
            return path.read_text(encoding="utf-8"), str(path)
        if path.exists():  # a folder, a FIFO, a device: reading it could block or mean nothing
            raise ConfigError(f"--from {kind} {clean(text)!r}: not a regular file; give the config file's path")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"--from {kind} {clean(text)!r}: cannot read ({clean(str(error))})") from None
    raise ConfigError(f"--from {kind} {clean(text)!r}: no such file"
                      + (" (or give the command line, its options starting with --)" if kind == "megatron" else ""))
    return text, "command line"


# ----------------------------------------------------------------------------------------------
# Structured configs: TOML (torchtitan), JSON (DeepSpeed), YAML (accelerate, NeMo / Megatron-Bridge)
# ----------------------------------------------------------------------------------------------

def _load_mapping(source, kind: str) -> tuple[dict, str]:
    if isinstance(source, dict):
        return source, "a mapping"
    text, where = _source_text(source, kind)
    suffix = Path(where).suffix.lower()
    try:
        if suffix == ".toml" or kind == "torchtitan":
            import tomllib
            data = tomllib.loads(text)
        elif suffix == ".json" or kind == "deepspeed":
            data = json.loads(text)
        else:
            try:
                import yaml
            except ImportError:
                raise ConfigError(f"--from {kind}: reading YAML needs PyYAML (pip install 'symbolic-ledgers[launch]')"
                                  ) from None
            data = yaml.safe_load(text)
    except ConfigError:
        raise
    except Exception as error:  # a parser's own message: the file is not what its name says
        raise ConfigError(f"--from {kind} {clean(where)!r}: not readable ({clean(str(error).splitlines()[0])})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--from {kind} {clean(where)!r}: expected a mapping of sections at the top")
    return data, where


def _walk(data: dict, prefix: str = ""):
    """Every leaf of a nested mapping as (dotted.key, value)."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _walk(value, name + ".")
        else:
            yield name, value


def _finish(reader: _Reader, data: dict, used: set, ignore: dict[str, str], model: ModelConfig | None,
            what_model: str) -> LaunchReading:
    """Unused keys: ignored with the reason when their section (or key) is in ``ignore``, else refused."""
    for key, value in _walk(data):
        if key in used:
            continue
        section = next((why for prefix, why in ignore.items() if key == prefix or key.startswith(prefix + ".")), None)
        if section is None:
            reader.refuse(key, value, f"not a key this reader knows ({reader.code}); it may change memory or time, "
                          "so it is not dropped — remove it if it changes neither")
        reader.ignore(key, value, section)
    if model is not None:
        reader.model, reader.model_name = model, ""
    elif reader.model is None and not any(note.option == "model" for note in reader.assumed):
        reader.assume("model", "", f"not in the config: give MODEL ({what_model})")
    return reader.reading()


_TORCHTITAN_FLAVORS = {("llama3", "8B"): "llama-3-8b", ("llama3", "70B"): "llama-3.1-70b",
                       ("llama3", "405B"): "llama-3.1-405b"}


def read_torchtitan(source, model: ModelConfig | None = None) -> LaunchReading:
    """A torchtitan job TOML (``torchtitan/config/job_config.py`` at :data:`TORCHTITAN_COMMIT`)."""
    data, where = _load_mapping(source, "torchtitan")
    reader = _Reader("torchtitan", where, "torchtitan", f"torchtitan job_config.py@{TORCHTITAN_COMMIT[:7]}")
    used: set[str] = set()
    def section(name):
        block = data.get(name, {})
        if not isinstance(block, dict):  # [parallelism] given as a value: not read as absent
            reader.refuse(name, repr(block), "not a section; give a table of its options")
        return block

    def value(sec, key, default):
        used.add(f"{sec}.{key}")
        return section(sec).get(key, default)

    par, train = "parallelism", "training"
    replicate = _int(reader, "parallelism.data_parallel_replicate_degree", value(par, "data_parallel_replicate_degree", 1))
    shard = value(par, "data_parallel_shard_degree", -1)
    tp = _int(reader, "parallelism.tensor_parallel_degree", value(par, "tensor_parallel_degree", 1))
    pp = _int(reader, "parallelism.pipeline_parallel_degree", value(par, "pipeline_parallel_degree", 1))
    cp = _int(reader, "parallelism.context_parallel_degree", value(par, "context_parallel_degree", 1))
    ep = _int(reader, "parallelism.expert_parallel_degree", value(par, "expert_parallel_degree", 1))
    for key, field, number in (("tensor_parallel_degree", "tp", tp), ("pipeline_parallel_degree", "pp", pp),
                               ("context_parallel_degree", "cp", cp), ("expert_parallel_degree", "ep", ep)):
        (reader.take if key in section(par) else reader.assume)(f"parallelism.{key}", number, f"{field} = {number}",
                                                               **{field: number})
    if tp > 1:
        reader.assume("sequence parallelism", "", "sp (torchtitan's TP plan shards the norms' activations along the "
                      "sequence: SequenceParallel, parallelize.py), its linear layers keeping the all-gathered input "
                      "(DTensor: sp_inputs = gathered)", sp=True, sp_inputs="gathered")
    if replicate > 1:
        reader.refuse("parallelism.data_parallel_replicate_degree", replicate, "HSDP (replicas of FSDP groups) is not "
                      "modelled: ZeRO shards over all d ranks")
    if shard == -1 or shard == "-1":
        reader.assume("parallelism.data_parallel_shard_degree", -1, "the world size over t·p·c, which the TOML does "
                      "not give: d = 1 assumed; give --dp (or --gpus on plan)", dp=1)
        dp = 1
    else:
        dp = _int(reader, "parallelism.data_parallel_shard_degree", shard)
        reader.take("parallelism.data_parallel_shard_degree", dp, f"dp = {dp}", dp=dp)
    reshard = value(par, "fsdp_reshard_after_forward", "default")
    if reshard not in ("default", "always"):
        reader.refuse("parallelism.fsdp_reshard_after_forward", reshard, "the weights kept gathered after forward "
                      "(ZeRO-2-like FSDP) are not modelled")
    reader.assume("FSDP2 fully_shard", "", "zero = 3 (parameters, gradients and optimizer states sharded over d; "
                  "reshard after forward: fsdp_reshard_after_forward default)", zero=3)
    param_dtype = value(train, "mixed_precision_param", "bfloat16")
    reduce_dtype = value(train, "mixed_precision_reduce", "float32")
    train_dtype = value(train, "dtype", "float32")
    if train_dtype != "float32" or reduce_dtype != "float32":
        reader.refuse("training.dtype", train_dtype, "only float32 sharded parameters with bf16 compute are read")
    if param_dtype == "bfloat16":
        reader.assume("training.mixed_precision_param", param_dtype, "dtype = bf16, optimizer = fp32-adam (FSDP2 "
                      "MixedPrecisionPolicy: fp32 sharded parameters and gradients, bf16 compute)",
                      dtype="bf16", optimizer="fp32-adam")
    else:
        reader.take("training.mixed_precision_param", param_dtype, "dtype = fp32, optimizer = fp32-adam",
                    dtype="fp32", optimizer="fp32-adam")
    name = value("optimizer", "name", "AdamW")
    if name not in ("AdamW", "Adam"):
        reader.refuse("optimizer.name", name, "the Adam recipes are modelled")
    impl = value("optimizer", "implementation", "fused")
    impl = "fused" if impl == "fused" else "foreach"
    reader.assume("optimizer.implementation", impl, f"optimizer_impl = {impl} (job_config.py default fused)",
                  optimizer_impl=impl)
    local = _int(reader, "training.local_batch_size", value(train, "local_batch_size", 8))
    micro = local
    if pp > 1:
        micro = _int(reader, "parallelism.pipeline_parallel_microbatch_size",
                     value(par, "pipeline_parallel_microbatch_size", 1))
        schedule = value(par, "pipeline_parallel_schedule", "1F1B")
        # the V schedules: two stages per rank (torchtitan b5bcd76c torchtitan/distributed/pipeline_parallel.py
        # places them style="v" for ScheduleZBVZeroBubble and ScheduleDualPipeV; symbolic.layout.schedules)
        v_shaped = {"ZBVZeroBubble": "zb-v", "DualPipeV": "dualpipev"}
        if schedule in v_shaped:
            reader.take("parallelism.pipeline_parallel_schedule", schedule,
                        f"schedule = {v_shaped[schedule]} (two stages per rank in a V)", schedule=v_shaped[schedule])
        elif schedule not in ("1F1B", "Interleaved1F1B"):
            reader.refuse("parallelism.pipeline_parallel_schedule", schedule,
                          "modelled: 1F1B, Interleaved1F1B, ZBVZeroBubble, DualPipeV")
    reader.take("training.local_batch_size", local, f"micro_batch = {micro}", micro_batch=micro)
    global_batch = value(train, "global_batch_size", -1)
    if global_batch not in (-1, "-1"):
        gb = _int(reader, "training.global_batch_size", global_batch)
        reader.take("training.global_batch_size", gb, f"global_batch = {gb}", global_batch=gb)
    else:
        reader.assume("training.global_batch_size", -1, "local batch × d (no gradient accumulation)")
    seq = _int(reader, "training.seq_len", value(train, "seq_len", 2048))
    if value(train, "enable_cpu_offload", False):
        reader.take("training.enable_cpu_offload", True, "offload = params (FSDP CPU offload)", offload="params")
    ac = "activation_checkpoint"
    mode = value(ac, "mode", "selective")
    if mode == "selective":
        option = str(value(ac, "selective_ac_option", "2"))
        reader.refuse("activation_checkpoint.mode", f"selective (selective_ac_option {option})",
                      "torchtitan's selective policies (every n-th layer, or its per-op policy) are not policies "
                      "this engine models; give mode = 'full' or 'none'")
    if mode not in ("full", "none"):
        reader.refuse("activation_checkpoint.mode", mode, "give full or none")
    (reader.take if "mode" in section(ac) else reader.assume)("activation_checkpoint.mode", mode, f"recompute = {mode}",
                                                             recompute=mode)
    reader.assume("attention", "", "flash_attention (torchtitan's SDPA flash/efficient kernel)", flash_attention=True)
    family, flavor = value("model", "name", "llama3"), value("model", "flavor", "debugmodel")
    converters = value("model", "converters", [])
    if converters:
        reader.refuse("model.converters", converters, "model converters (float8, mx) are not read yet")
    if model is None and (family, str(flavor)) in _TORCHTITAN_FLAVORS:
        from ..models.builtin import preset
        reader.model_name = _TORCHTITAN_FLAVORS[(family, str(flavor))]
        reader.model = preset(reader.model_name)
        reader.take("model.name/flavor", f"{family} {flavor}", f"model = {reader.model_name}")
    elif model is None:
        reader.assume("model.name/flavor", f"{family} {flavor}", "not a built-in model: give MODEL")
    target = reader.model or model
    if target is None or seq != target.seq:
        reader.take("training.seq_len", seq, f"seq = {seq}", seq=seq)
    else:
        reader.take("training.seq_len", seq, f"seq = {seq} (the model's)")
    return _finish(reader, data, used, {
        "job": "names and folders", "profiling": "profiling (no memory or time per step)",
        "metrics": "logging", "checkpoint": "checkpoints (no memory or time per step)",
        "validation": "evaluation (no memory or time per step)", "lr_scheduler": "learning-rate schedule",
        "optimizer.lr": "learning rate", "optimizer.eps": "optimizer hyper-parameter",
        "optimizer.weight_decay": "optimizer hyper-parameter", "training.max_norm": "gradient clipping",
        "training.steps": "run length", "training.dataset": "data", "training.dataset_path": "data",
        "model.hf_assets_path": "a path", "model.tokenizer_path": "a path",
        "compile": "torch.compile: the same saved tensors (fusions change element-wise time only)",
        "quantize.linear.float8.enable_fsdp_float8_all_gather": "float8 options without a float8 converter",
        "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp": "float8 options without a float8 converter",
        "quantize.linear.float8.filter_fqns": "float8 options without a float8 converter",
        "parallelism.enable_async_tensor_parallel": "async TP overlaps TP's collectives (the time model's --overlap)",
        "parallelism.disable_loss_parallel": "the loss's parallel plan", "comm": "timeouts",
        "float8": "float8 options without a float8 converter", "experimental": "custom imports",
    }, model, "a built-in name or an HF config.json")


def read_deepspeed(source, model: ModelConfig | None = None) -> LaunchReading:
    """A DeepSpeed ``ds_config.json`` (``deepspeed/runtime/zero/config.py`` at :data:`DEEPSPEED_COMMIT`);
    the model comes from MODEL (an HF config.json), as DeepSpeed's own config has none."""
    data, where = _load_mapping(source, "deepspeed")
    reader = _Reader("deepspeed", where, "deepspeed", f"DeepSpeed runtime/config.py@{DEEPSPEED_COMMIT[:7]}")
    used: set[str] = set()
    _read_deepspeed(reader, data, used)
    return _finish(reader, data, used, _DEEPSPEED_IGNORE, model, "the HF config.json it trains")


_DEEPSPEED_IGNORE = {
    "steps_per_print": "logging", "wall_clock_breakdown": "logging", "tensorboard": "logging", "wandb": "logging",
    "csv_monitor": "logging", "gradient_clipping": "gradient clipping", "optimizer.params": "optimizer "
    "hyper-parameters (no memory or time)", "scheduler": "learning-rate schedule", "fp16.loss_scale": "loss scaling",
    "fp16.loss_scale_window": "loss scaling", "fp16.hysteresis": "loss scaling", "fp16.min_loss_scale": "loss scaling",
    "fp16.initial_scale_power": "loss scaling", "fp16.auto_cast": "loss scaling", "fp16.consecutive_hysteresis":
    "loss scaling", "zero_optimization.contiguous_gradients": "buffer layout (the same bytes)",
    "zero_optimization.overlap_comm": "the time model's --overlap", "zero_optimization.reduce_scatter":
    "the collective used (the same bytes)", "zero_optimization.reduce_bucket_size": "bucket sizes (buffers the "
    "timeline's --bucket models)", "zero_optimization.allgather_bucket_size": "bucket sizes",
    "zero_optimization.allgather_partitions": "the collective used", "zero_optimization.round_robin_gradients":
    "gradient placement (the same bytes)", "zero_optimization.stage3_prefetch_bucket_size": "bucket sizes",
    "zero_optimization.stage3_param_persistence_threshold": "small parameters kept whole (below the threshold)",
    "zero_optimization.stage3_max_live_parameters": "a cap on gathered parameters",
    "zero_optimization.stage3_max_reuse_distance": "a cap on gathered parameters",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": "checkpoint saving",
    "zero_optimization.sub_group_size": "the optimizer step's grouping",
    "data_types.grad_accum_dtype": "read with the precision",
    "zero_optimization.offload_optimizer.pin_memory": "pinned CPU memory", "zero_optimization.offload_param.pin_memory":
    "pinned CPU memory", "zero_allow_untested_optimizer": "a check", "prescale_gradients": "gradient scaling",
    "gradient_predivide_factor": "gradient scaling", "communication_data_type": "the wire dtype",
    "flops_profiler": "profiling", "comms_logger": "logging", "checkpoint": "checkpoints",
}


def _read_deepspeed(reader: _Reader, data: dict, used: set, auto_ok: bool = False) -> None:
    """``auto_ok``: under accelerate, HF Trainer fills ``"auto"`` values from the training script (then
    they are assumed, and the flags say them); a bare ds_config with ``"auto"`` is refused."""
    def get(path, default=None):
        used.add(path)
        node, parts = data, path.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, dict):  # a section given as a value ("zero_optimization": 5): not read as absent
                reader.refuse(".".join(parts[:depth]), repr(node), "not a section; give a mapping of its options")
            if part not in node:
                return default
            node = node[part]
        return node

    def auto(path, value):
        if value == "auto" and auto_ok:
            reader.assume(path, "auto", "filled from the training script's arguments by HF Trainer: give the flag "
                          "(--micro-batch, --global-batch, --dtype) where the default is not it")
            return None
        if value == "auto":
            reader.refuse(path, value, "'auto' is filled by HF Trainer from its training arguments; give the number")
        return value

    world = reader.gpus
    raw = {path: get(path) for path in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                        "train_batch_size")}
    by_script = [path for path, value in raw.items() if value == "auto"]
    mb, gas, total = (_int(reader, path, auto(path, value)) if value is not None and auto(path, value) is not None
                      else None for path, value in raw.items())
    # DeepSpeed's rule (runtime/config.py _batch_assertion): train_batch = micro × accumulation × d.
    if mb is None and total is not None:
        mb = total // ((gas or 1) * (world or 1)) if world else (total // (gas or 1))
        reader.assume("train_micro_batch_size_per_gpu", "absent", f"train_batch_size / (accumulation × d) = {mb}")
    elif mb is None and "train_micro_batch_size_per_gpu" not in by_script:
        mb = 1
        reader.assume("train_micro_batch_size_per_gpu", "absent", "1 (runtime/config.py's default)")
    if mb is not None:
        reader.take("train_micro_batch_size_per_gpu", mb, f"micro_batch = {mb}", micro_batch=mb)
    if total is not None and mb is not None:
        dp = world or max(1, total // (mb * (gas or 1)))
        reader.fields.update(global_batch=total)
        reader.take("train_batch_size", total, f"global_batch = {total}")
        if not world:
            reader.assume("the world size", "", f"d = train_batch_size / (micro-batch × accumulation) = {dp} "
                          "(DeepSpeed's rule); give --dp to change it", dp=dp)
    elif gas is not None and mb is not None:
        d = world or 1
        reader.fields.update(global_batch=mb * gas * d)
        reader.take("gradient_accumulation_steps", gas, f"global_batch = micro-batch × accumulation × d = {mb * gas * d}"
                    + ("" if world else " (d = 1 assumed: the config does not say the world size; give --dp)"))
    elif gas is not None:
        reader.ignore("gradient_accumulation_steps", gas, "the micro-batch is the training script's: give --global-batch")
    if world:
        reader.fields.update(dp=world)
    bf16, fp16 = get("bf16.enabled", False), get("fp16.enabled", False)
    bf16 = bf16 or get("bfloat16.enabled", False)
    bf16, fp16 = (bool(auto(path, value)) for path, value in (("bf16.enabled", bf16), ("fp16.enabled", fp16)))
    if bf16 and fp16:
        reader.refuse("bf16.enabled", True, "and fp16.enabled together")
    stage_given = get("zero_optimization.stage", 0)
    accumulate = get("data_types.grad_accum_dtype")
    if bf16 or fp16:
        dtype = "bf16" if bf16 else "fp16"
        # engine.py get_data_types: bf16 without ZeRO accumulates gradients in fp32 (BF16_Optimizer's fp32
        # gradient buffer, runtime/bf16_optimizer.py); otherwise in the model's dtype unless data_types says.
        if accumulate is None:
            fp32_grads = bool(bf16) and stage_given in (0, "0")
            why = "bf16 without ZeRO: fp32 gradient accumulation (engine.py get_data_types)" if fp32_grads else \
                f"gradients accumulated in {dtype} (engine.py get_data_types)"
            reader.assume("data_types.grad_accum_dtype", "absent", why)
        else:
            fp32_grads = str(accumulate) in ("fp32", "float32", "float", "torch.float32")
            reader.take("data_types.grad_accum_dtype", accumulate, "fp32 gradients" if fp32_grads else f"{dtype} gradients")
        recipe = "bf16-adam-fp32-grads" if fp32_grads else "bf16-adam"
        reader.take(f"{dtype}.enabled", True, f"dtype = {dtype}, optimizer = {recipe} ({'4' if fp32_grads else '2'} B "
                    "gradients, fp32 master and Adam states)", dtype=dtype, optimizer=recipe)
    else:
        reader.assume("bf16/fp16.enabled", False, "fp32 training, optimizer = fp32-adam", dtype="fp32",
                      optimizer="fp32-adam")
    kind = get("optimizer.type", "Adam")
    if str(kind).lower() not in ("adam", "adamw", "fusedadam", "cpuadam"):
        reader.refuse("optimizer.type", kind, "the Adam recipes are modelled")
    if get("optimizer") is None:
        reader.assume("optimizer", "absent", "the client's optimizer: Adam, torch's foreach step",
                      optimizer_impl="foreach")
    elif get("optimizer.params.torch_adam", False) is True:
        reader.take("optimizer.type", f"{kind} with torch_adam", "optimizer_impl = foreach (torch.optim's Adam/AdamW, "
                    "not DeepSpeed's FusedAdam: runtime/engine.py)", optimizer_impl="foreach")
    else:
        reader.take("optimizer.type", kind, "optimizer_impl = fused (DeepSpeed's FusedAdam: ops/adam)",
                    optimizer_impl="fused")
    stage = get("zero_optimization.stage", 0)
    stage = _int(reader, "zero_optimization.stage", auto("zero_optimization.stage", stage), 0)
    if stage > 3:
        reader.refuse("zero_optimization.stage", stage, "give 0 to 3")
    (reader.take if get("zero_optimization") is not None else reader.assume)(
        "zero_optimization.stage", stage, f"zero = {stage}", zero=stage)
    opt_device = get("zero_optimization.offload_optimizer.device", "none")
    param_device = get("zero_optimization.offload_param.device", "none")
    if "nvme" in (opt_device, param_device):
        reader.refuse("zero_optimization.offload_*.device", "nvme", "NVMe offload is not modelled")
    if param_device == "cpu":
        reader.take("zero_optimization.offload_param.device", "cpu", "offload = params", offload="params")
    elif opt_device == "cpu":
        reader.take("zero_optimization.offload_optimizer.device", "cpu", "offload = optimizer", offload="optimizer")
    ac = get("activation_checkpointing")
    if isinstance(ac, dict) and ac:
        for key in ac:
            used.add(f"activation_checkpointing.{key}")
        reader.ignore("activation_checkpointing", "", "DeepSpeed's checkpointing API settings: whether layers are "
                      "recomputed is the model code's choice; give --recompute")


def read_accelerate(source, model: ModelConfig | None = None) -> LaunchReading:
    """An accelerate config YAML (``accelerate config``'s keys at :data:`ACCELERATE_COMMIT`): FSDP or
    DeepSpeed (its ``deepspeed_config_file`` read by :func:`read_deepspeed`'s rules). The batch and
    sequence are the training script's: give --micro-batch and --seq."""
    data, where = _load_mapping(source, "accelerate")
    used: set[str] = set()
    kind = data.get("distributed_type", "NO")
    used.add("distributed_type")
    framework = {"FSDP": "fsdp", "DEEPSPEED": "deepspeed"}.get(kind, "fsdp")
    reader = _Reader("accelerate", where, framework, f"accelerate {ACCELERATE_COMMIT[:7]}")
    processes = data.get("num_processes", 1)
    used.add("num_processes")
    machines = data.get("num_machines", 1)
    used.add("num_machines")
    world = _int(reader, "num_processes", processes)  # accelerate: the total over all machines
    reader.gpus = world
    reader.take("num_processes", world, f"dp = {world} (each process one data-parallel rank)", dp=world)
    if kind == "FSDP":
        fsdp = data.get("fsdp_config") or {}
        strategy = str(fsdp.get("fsdp_sharding_strategy", "FULL_SHARD"))
        used.add("fsdp_config.fsdp_sharding_strategy")
        version = int(fsdp.get("fsdp_version", 1))
        used.add("fsdp_config.fsdp_version")
        if version == 2:
            strategy = "FULL_SHARD" if fsdp.get("fsdp_reshard_after_forward", True) else "SHARD_GRAD_OP"
            used.add("fsdp_config.fsdp_reshard_after_forward")
        stages = {"FULL_SHARD": 3, "1": 3, "SHARD_GRAD_OP": 2, "2": 2, "NO_SHARD": 0, "3": 0}
        if strategy not in stages:
            reader.refuse("fsdp_config.fsdp_sharding_strategy", strategy, "HYBRID_SHARD is not modelled; give "
                          "FULL_SHARD, SHARD_GRAD_OP or NO_SHARD")
        reader.take("fsdp_config.fsdp_sharding_strategy", strategy, f"zero = {stages[strategy]}", zero=stages[strategy])
        if fsdp.get("fsdp_offload_params"):
            reader.take("fsdp_config.fsdp_offload_params", True, "offload = params", offload="params")
        else:
            reader.take("fsdp_config.fsdp_offload_params", False, "no offload")
        used.add("fsdp_config.fsdp_offload_params")
        if fsdp.get("fsdp_activation_checkpointing"):
            reader.take("fsdp_config.fsdp_activation_checkpointing", True, "recompute = full (each wrapped layer)",
                        recompute="full")
        else:
            reader.take("fsdp_config.fsdp_activation_checkpointing", False, "recompute = none")
        used.add("fsdp_config.fsdp_activation_checkpointing")
        precision = data.get("mixed_precision", "no")
        used.add("mixed_precision")
        if precision in ("bf16", "fp16"):
            reader.take("mixed_precision", precision, f"dtype = {precision}, optimizer = fp32-adam (FSDP's "
                        "MixedPrecision: fp32 sharded parameters and gradients, low-precision compute)",
                        dtype=precision, optimizer="fp32-adam")
        elif precision == "no":
            reader.take("mixed_precision", precision, "dtype = fp32, optimizer = fp32-adam", dtype="fp32",
                        optimizer="fp32-adam")
        else:
            reader.refuse("mixed_precision", precision, "give no, bf16 or fp16")
        reader.assume("optimizer", "", "torch's AdamW (the training script's): optimizer_impl foreach",
                      optimizer_impl="foreach")
        ignore = {f"fsdp_config.{key}": why for key, why in (
            ("fsdp_auto_wrap_policy", "the wrap unit (a layer, as the bill assumes)"),
            ("fsdp_transformer_layer_cls_to_wrap", "the wrap unit"),
            ("fsdp_backward_prefetch", "prefetch order (the time model's --overlap)"),
            ("fsdp_forward_prefetch", "prefetch order (the time model's --overlap)"),
            ("fsdp_cpu_ram_efficient_loading", "loading (before training)"),
            ("fsdp_state_dict_type", "checkpoint format"), ("fsdp_sync_module_states", "loading (before training)"),
            ("fsdp_use_orig_params", "parameter views (the same bytes)"))}
    elif kind == "DEEPSPEED":
        ds = data.get("deepspeed_config") or {}
        path = ds.get("deepspeed_config_file")
        used.add("deepspeed_config.deepspeed_config_file")
        if not path:
            reader.refuse("deepspeed_config.deepspeed_config_file", "", "give the ds_config.json it names")
        file = Path(path) if Path(path).is_absolute() else Path(where).parent / path
        ds_data, _ = _load_mapping(str(file), "deepspeed")
        reader.take("deepspeed_config.deepspeed_config_file", path, f"read by the deepspeed reader ({file.name})")
        ds_used: set[str] = set()
        _read_deepspeed(reader, ds_data, ds_used, auto_ok=True)
        for key, value in _walk(ds_data):
            if key not in ds_used:
                why = next((w for p, w in _DEEPSPEED_IGNORE.items() if key == p or key.startswith(p + ".")), None)
                if why is None:
                    reader.refuse(f"{file.name}: {key}", value, "not a key the deepspeed reader knows")
                reader.ignore(f"{file.name}: {key}", value, why)
        if data.get("mixed_precision") in (None, "no"):  # else accelerate's mixed_precision: refused below
            used.add("mixed_precision")
        ignore = {"deepspeed_config.zero3_init_flag": "loading (before training)"}
    else:
        reader.refuse("distributed_type", kind, "give FSDP or DEEPSPEED (the ones read)")
    reader.assume("micro-batch and seq", "", "the training script's: give --micro-batch and --seq")
    ignore.update({"compute_environment": "where it runs", "machine_rank": "this machine's rank",
                   "main_training_function": "a name", "rdzv_backend": "rendezvous", "same_network": "rendezvous",
                   "tpu_env": "TPU", "tpu_use_cluster": "TPU", "tpu_use_sudo": "TPU", "use_cpu": "CPU training",
                   "downcast_bf16": "TPU", "debug": "checks", "enable_cpu_affinity": "CPU affinity",
                   "main_process_ip": "rendezvous", "main_process_port": "rendezvous",
                   "gpu_ids": "device choice", "num_machines": "the machines (num_processes counts every GPU)"})
    return _finish(reader, data, used, ignore, model, "the HF config.json it trains")


def read_bridge(source, model: ModelConfig | None = None, kind: str = "megatron-bridge") -> LaunchReading:
    """A NeMo 2 / Megatron-Bridge recipe dump or override YAML (ConfigContainer, :data:`BRIDGE_COMMIT`):
    ``model`` holds Megatron-Core's TransformerConfig names, which Megatron-LM's command line spells
    with dashes, so each key is read by the Megatron reader's rules."""
    data, where = _load_mapping(source, kind)
    reader = _Reader(kind, where, "nemo", f"Megatron-Bridge training/config.py@{BRIDGE_COMMIT[:7]}")
    used: set[str] = set()
    options: dict = {}
    section_options = {
        "model": {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                  "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
                  "virtual_pipeline_model_parallel_size", "recompute_granularity", "recompute_method",
                  "recompute_num_layers", "recompute_modules", "num_layers", "hidden_size", "num_attention_heads",
                  "ffn_hidden_size", "num_query_groups", "seq_length", "attention_backend", "fp8",
                  "moe_token_dispatcher_type", "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
                  "cross_entropy_loss_fusion", "attention_dropout", "hidden_dropout", "normalization",
                  "position_embedding_type", "add_bias_linear", "gated_linear_unit", "vocab_size",
                  "share_embeddings_and_output_weights", "make_vocab_size_divisible_by", "bf16", "fp16"},
        "train": {"micro_batch_size", "global_batch_size"},
        "dataset": {"seq_length"},
        "optimizer": {"use_distributed_optimizer", "bf16", "fp16", "optimizer", "main_grads_dtype"},
        "ddp": {"use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_fp32"},
    }
    grad_fp32 = None
    for section, keys in section_options.items():
        block = data.get(section, {})
        if not isinstance(block, dict):  # a section given as a value: not read as absent
            reader.refuse(section, repr(block), "not a section; give a mapping of its options")
        for key in keys:
            if key not in block:
                continue
            used.add(f"{section}.{key}")
            value = block[key]
            if key == "grad_reduce_in_fp32":
                grad_fp32 = bool(value)
                continue
            name = key.replace("_", "-")
            if key == "fp8":
                if value:
                    options["fp8-format"] = str(value)
                continue
            if key == "gated_linear_unit":
                options["swiglu"] = bool(value)
            elif key == "add_bias_linear":
                options["disable-bias-linear"] = not value
            elif key == "share_embeddings_and_output_weights":
                options["untie-embeddings-and-output-weights"] = not value
            elif key == "recompute_modules":
                options[name] = list(value or [])
            elif isinstance(value, bool):
                if value:
                    options[name] = True
            elif value is not None:
                options[name] = str(value)
    if grad_fp32 is False and "bf16" in options:
        options["grad-reduce-in-bf16"] = True
    precision = data.get("mixed_precision")
    if isinstance(precision, str):
        used.add("mixed_precision")
        if precision.startswith("bf16"):
            options["bf16"] = True
        elif precision.startswith("fp16"):
            options["fp16"] = True
        else:
            reader.refuse("mixed_precision", precision, "read: bf16_mixed, fp16_mixed")
    elif "bf16" not in options and "fp16" not in options:
        options["bf16"] = True
        reader.assume("mixed_precision", "absent", "bf16_mixed (the recipes' common base: "
                      f"src/megatron/bridge/recipes/common.py@{BRIDGE_COMMIT[:7]})")
    options.setdefault("attention-backend", "auto")
    _read_megatron(reader, options, model)
    reader.taken = [replace(note, option=_bridge_name(note.option)) for note in reader.taken]
    reader.assumed = [replace(note, option=_bridge_name(note.option)) for note in reader.assumed]
    reader.assume("the recipe's other fields", "", "not in this file: the Layout's defaults (an override file "
                  "leaves the rest to its recipe)")
    return _finish(reader, data, used, {
        "checkpoint": "checkpoints", "logger": "logging", "rng": "seed", "scheduler": "learning-rate schedule",
        "optimizer.lr": "learning rate", "optimizer.min_lr": "learning rate", "optimizer.weight_decay":
        "optimizer hyper-parameter", "optimizer.adam_beta1": "optimizer hyper-parameter", "optimizer.adam_beta2":
        "optimizer hyper-parameter", "optimizer.adam_eps": "optimizer hyper-parameter", "optimizer.clip_grad":
        "gradient clipping", "train.train_iters": "run length", "train.eval_iters": "evaluation",
        "train.eval_interval": "evaluation", "dataset.data_path": "a path", "dataset.blend": "data",
        "dataset.split": "data", "tokenizer": "the tokenizer (the vocabulary is the model's)",
        "profiling": "profiling", "model.gradient_accumulation_fusion": "a fused weight-gradient kernel (the same "
        "bytes)", "model.seq_length": "the sequence (dataset.seq_length)",
    }, model, "a built-in name or an HF config.json")


def _bridge_name(option: str) -> str:
    """Megatron-LM's ``--seq-length`` is Megatron-Core's (and the recipe's) ``seq_length``."""
    return re.sub(r"--([a-z0-9-]+)", lambda m: m.group(1).replace("-", "_"), option)


READERS = {"megatron": read_megatron, "nemo": lambda s, m=None: read_bridge(s, m, "nemo"),
           "megatron-bridge": read_bridge, "torchtitan": read_torchtitan, "deepspeed": read_deepspeed,
           "accelerate": read_accelerate}


def read_launch(kind: str, source, model: ModelConfig | None = None) -> LaunchReading:
    """Read ``source`` as a launch config of ``kind`` (:data:`KINDS`); ``model`` (a ModelConfig), when
    given, is the model trained (the config's own model arguments are then listed as ignored)."""
    if kind not in READERS:
        raise ConfigError(f"--from {clean(str(kind))!r}: give one of {', '.join(KINDS)}")
    return READERS[kind](source, model)


LAYOUT_FIELDS = tuple(f.name for f in fields(Layout))
