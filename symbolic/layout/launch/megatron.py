"""The Megatron-LM reader: a command line, an arguments file, or a launch script's literal
arguments (``megatron/training/arguments.py`` at :data:`~.reader.MEGATRON_COMMIT`). The NeMo /
Megatron-Bridge reader (``bridge.py``) reads its recipe's keys by these rules."""
from __future__ import annotations

import math
import re
import shlex

from ...core.inputs import clean
from ...models.config import ConfigError, ModelConfig
from ..choices import RECOMPUTE_MODULES
from ..precision import MEGATRON_RECIPES
from .reader import MEGATRON_COMMIT, LaunchReading, _int, _number, _Reader, _source_text, builtin_match


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
    "a kernel-fusion switch: the same tensors saved for backward (the fused and unfused element-wise kernels "
    "keep the inputs the bill counts; the step time prices no element-wise kernel one by one)": (
        "no-bias-gelu-fusion", "no-bias-swiglu-fusion", "no-bias-dropout-fusion", "no-rope-fusion",
        "no-persist-layer-norm", "no-gradient-accumulation-fusion"),
    "the masked-softmax kernel of the unfused attention backend (the fused/flash backend read keeps no "
    "softmax)": ("no-masked-softmax-fusion",),
    "the router's auxiliary losses and scoring hyper-parameters: scalars from the router's probabilities, "
    "which the bill counts (transformer_config.py's moe_* fields)": (
        "moe-router-load-balancing-type", "moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-router-topk-scaling-factor",
        "moe-router-pre-softmax", "moe-router-bias-update-rate", "moe-router-enable-expert-bias",
        "moe-input-jitter-eps", "moe-per-layer-logging"),
    "the CPU optimizer step's implementation, streams or pinning: its CPU step and PCIe copies are not priced": (
        "use-torch-optimizer-for-cpu-offload", "overlap-cpu-optimizer-d2h-h2d", "no-pin-cpu-grads",
        "no-pin-cpu-params"),
    "profiling, straggler detection or fault tolerance (no memory or time per step)": (
        "profile", "profile-step-start", "profile-step-end", "profile-ranks", "use-pytorch-profiler",
        "record-memory-history", "memory-snapshot-path", "nvtx-ranges", "log-straggler", "enable-ft-package",
        "log-energy", "log-loss-scale-to-tensorboard", "ckpt-fully-parallel-load", "ckpt-assume-constant-structure",
        "no-ckpt-fully-parallel-save", "ckpt-fully-parallel-save"),
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
    "one-logger-async", "lr-warmup-init", "no-position-embedding", "no-bias-gelu-fusion", "no-bias-swiglu-fusion", "no-bias-dropout-fusion",
    "no-rope-fusion", "no-persist-layer-norm", "no-gradient-accumulation-fusion", "no-masked-softmax-fusion",
    "moe-router-pre-softmax", "moe-router-enable-expert-bias", "moe-per-layer-logging", "profile",
    "use-pytorch-profiler", "record-memory-history", "log-straggler", "enable-ft-package", "log-energy",
    "log-loss-scale-to-tensorboard", "ckpt-fully-parallel-load", "ckpt-assume-constant-structure",
    "no-ckpt-fully-parallel-save", "ckpt-fully-parallel-save", "use-megatron-fsdp", "use-torch-fsdp2",
    "optimizer-cpu-offload", "torch-fsdp2-no-reshard-after-forward", "fp8-param-gather", "use-custom-fsdp",
    "use-precision-aware-optimizer", "use-torch-optimizer-for-cpu-offload", "overlap-cpu-optimizer-d2h-h2d",
    "no-pin-cpu-grads", "no-pin-cpu-params",
    "use-distributed-optimizer",
}
#: Shell words that end a command or open/close a block: never an option's value (``--flag`` then
#: ``fi`` on the next line of an ``if`` block in a launch script).
_SHELL_WORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in",
                "{", "}", "[", "]", "[[", "]]", "&&", "||", "|", ";", ";;", "&", "!"}
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
        if "=" in word and name in _MEGATRON_FLAGS:  # argparse: "ignored explicit argument"
            reader.refuse(f"--{name}={inline}", "", f"--{name} takes no value (Megatron's argparse refuses "
                          f"--{name}={inline}: 'ignored explicit argument'); give --{name} or leave it out")
        if inline or "=" in word:
            options[name] = inline
        elif name in _MEGATRON_FLAGS:
            options[name] = True
        elif name in _LIST_OPTIONS:
            values = []
            while index < len(words) and not words[index].startswith("--") and words[index] not in _SHELL_WORDS:
                values.append(words[index])
                index += 1
            options[name] = values
        elif index < len(words) and not words[index].startswith("--") and words[index] not in _SHELL_WORDS:
            options[name] = words[index]
            index += 1
        else:
            options[name] = True
    return options


def _read_torch_fsdp2(reader, get, code: str, pp: int, ep: int, megatron_fsdp) -> None:
    """``--use-torch-fsdp2``: Megatron-Core's ``TorchFullyShardedDataParallel``
    (``megatron/core/distributed/torch_fully_sharded_data_parallel.py`` at d98e8a6) calls PyTorch's
    ``fully_shard`` on every TransformerLayer, the embeddings and the output layer, then the root, over the
    data-parallel group with context parallelism (``get_data_parallel_group(with_context_parallel=True)``),
    ``reshard_after_forward`` True unless ``--torch-fsdp2-no-reshard-after-forward``, no mixed-precision
    policy: parameters, gradients and (Float16OptimizerWithFloat16Params, the distributed optimizer being
    refused) the fp32 main parameters and Adam states all sharded over d·c — ZeRO-3, gradients in the
    parameters' dtype. Megatron's own refusals (``validate_args``) are said as Megatron says them."""
    asserts = ((pp > 1, "--use-torch-fsdp2 is not supported with pipeline parallelism"),
               (ep > 1, "--use-torch-fsdp2 is not supported with expert parallelism"),
               (get("use-distributed-optimizer"), "--use-torch-fsdp2 is not supported with MCore's distributed "
                                                  "optimizer"),
               (not get("no-gradient-accumulation-fusion"), "--use-torch-fsdp2 is not supported with gradient "
                                                            "accumulation fusion (give --no-gradient-accumulation-fusion)"),
               (not get("untie-embeddings-and-output-weights"), "--use-torch-fsdp2 requires "
                                                                "--untie-embeddings-and-output-weights"),
               (get("fp16"), "--use-torch-fsdp2 not supported with fp16 yet"),
               (megatron_fsdp, "using use_megatron_fsdp and use_torch_fsdp2 at the same time is not supported"))
    for failed, why in asserts:
        if failed:
            reader.refuse("--use-torch-fsdp2", "", f"Megatron refuses it ({code} validate_args): {why}")
    if get("torch-fsdp2-no-reshard-after-forward"):
        reader.refuse("--torch-fsdp2-no-reshard-after-forward", "", "the weights kept gathered from forward to "
                      "backward (FSDP2 without resharding) are not modelled")
    grads = ("bf16 gradients (the parameters' dtype: no fp32 main-gradient buffer under FSDP2); approximation, "
             "named: at the optimizer step Float16OptimizerWithFloat16Params copies each gradient to fp32 "
             "(main_param.grad = model_param.grad.float(), the bf16 one freed), +2 B per parameter per d·c rank "
             "at that instant, not counted") if get("bf16") else "gradients in fp32, the parameters' dtype"
    reader.take("--use-torch-fsdp2", "", "zero = 3 (PyTorch FSDP2 fully_shard over the d·c ranks: parameters, "
                f"gradients, fp32 main parameters and optimizer states sharded; torch_fully_sharded_data_parallel.py); "
                + grads, zero=3)


def _read_optimizer_cpu_offload(reader, get, options, code: str) -> None:
    """``--optimizer-cpu-offload``: Megatron-Core's ``HybridDeviceOptimizer``
    (``megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py`` and ``optimizer/__init__.py`` at d98e8a6) inside
    the distributed optimizer. With ``--use-precision-aware-optimizer`` (asserted: it reuses that path) the
    distributed optimizer hands it the bf16 parameter shards, no fp32 main copy of its own; with
    ``--optimizer-offload-fraction`` 1.0 (arguments.py's default) every shard gets a pinned fp32 CPU copy (the
    master weights, ``param_update_in_fp32=True``) stepped by CPU Adam, whose m and v live in CPU memory; the
    gradients stay in the GPU's DDP buffer and are copied to pinned CPU tensors for the step. So: the optimizer
    states on the CPU, gradients and parameters on the GPU — ``offload = optimizer-states``, not ZeRO-Offload's
    ``optimizer`` (which moves the gradients too)."""
    if not get("use-precision-aware-optimizer"):
        reader.refuse("--optimizer-cpu-offload", "", f"Megatron refuses it ({code}): the optimizer cpu offload must "
                      "be used in conjunction with --use-precision-aware-optimizer")
    if not get("use-distributed-optimizer"):
        reader.refuse("--optimizer-cpu-offload", "", "Megatron refuses it (optimizer/__init__.py): "
                      "--use-precision-aware-optimizer only supported with distributed optimizer")
    fraction = _number(reader, "--optimizer-offload-fraction", get("optimizer-offload-fraction", 1.0))
    if fraction != 1:
        reader.refuse("--optimizer-offload-fraction", options.get("optimizer-offload-fraction"), "a partial offload "
                      "(part of the shards' states on the GPU) is not modelled; give 1.0")
    reader.take("--optimizer-cpu-offload", "", "offload = optimizer-states (HybridDeviceOptimizer, offload fraction "
                "1.0: fp32 master weights and Adam m, v of the shard in CPU memory; gradients and bf16 parameters "
                "on the GPU; its pinned fp32 CPU copy of the gradient shard not counted)", offload="optimizer-states")
    reader.ignore("--use-precision-aware-optimizer", "", "with --optimizer-cpu-offload the hybrid device optimizer "
                  "steps fp32 master copies on the CPU (param_update_in_fp32): its state dtypes are not read")


def read_megatron(source, model: ModelConfig | None = None) -> LaunchReading:
    """A Megatron-LM / Megatron-Core launch: ``source`` is the command line (text or a list of
    words) or a path to a file of arguments or a launch script (its literal arguments)."""
    text, where = _source_text(source, "megatron")
    reader = _Reader("megatron", where, "megatron-core", f"Megatron-LM {MEGATRON_COMMIT[:7]}")
    words = text if isinstance(text, list) else _shell_tokens(text)
    options = _megatron_options(reader, words)
    if not options:
        raise ConfigError(f"--from megatron {clean(where)!r}: not a Megatron launch file (no --option in it); give "
                          "the command line or the script that runs pretrain_*.py with its arguments")
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
            value = _int(reader, f"--{name}", get(name), low, field="tp" if field == "etp" else field)
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
    # PyTorch FSDP2 (TorchFullyShardedDataParallel): no DDP gradient buffer, so no fp32 main gradients — each
    # parameter's .grad is FSDP2's sharded gradient in the parameter's dtype (no MixedPrecisionPolicy given)
    torch_fsdp2 = bool(get("use-torch-fsdp2"))
    for name in ("main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype"):
        if name in options and get(name) != "fp32":
            reader.refuse(f"--{name}", options[name], "optimizer states below fp32 are not a recipe this engine models")
    if "use-precision-aware-optimizer" in options and not get("optimizer-cpu-offload"):
        reader.refuse("--use-precision-aware-optimizer", "", "not modelled (its states' dtypes vary)")
    optimizer = str(get("optimizer", "adam"))
    if optimizer not in ("adam", "sgd"):
        reader.refuse("--optimizer", optimizer, "Megatron's choices the engine models are adam and sgd")
    if "optimizer" in options:
        reader.take("--optimizer", optimizer, "the Adam recipes" if optimizer == "adam" else "SGD with momentum")
    if get("bf16"):
        recipe = (("bf16-adam" if grads_bf16 or torch_fsdp2 else "bf16-adam-fp32-grads") if optimizer == "adam"
                  else "bf16-sgd-momentum")
        reader.take("--bf16", "", f"dtype = bf16, optimizer = {recipe}", dtype="bf16", optimizer=recipe)
        if torch_fsdp2:
            pass  # its gradients are said with --use-torch-fsdp2 below
        elif not grads_bf16 and optimizer == "adam":
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
    if get("fp8-param-gather"):
        # Transformer Engine's fp8_model_init: FP8 weights, the distributed optimizer's fp32 main params the
        # master copy: the fp8-adam recipe (layout/recipes.py) where its gradients are bf16.
        if not (get("bf16") and "fp8-format" in options and grads_bf16 and optimizer == "adam"):
            reader.unless_typed("optimizer", "--fp8-param-gather", "", "the FP8-weight recipe modelled (fp8-adam) is "
                                "--bf16 --fp8-format with --grad-reduce-in-bf16 and Adam; type --optimizer")
        else:
            reader.take("--fp8-param-gather", "", "optimizer = fp8-adam (FP8 weights gathered; bf16 gradients, fp32 "
                        "master and Adam m/v)", optimizer="fp8-adam")
    fsdp = next((name for name in ("use-megatron-fsdp", "use-custom-fsdp") if get(name)), None)
    if fsdp:
        # Megatron-FSDP: its DistributedDataParallelConfig.data_parallel_sharding_strategy names what is
        # sharded over d — the optimizer's (fp32 main params, Adam m, v), then the gradients, then the
        # parameters: ZeRO-1, 2, 3 in this engine's kinds (the recipe and its fp32 main gradients as --bf16
        # sets them above: arguments.py's accumulate_allreduce_grads_in_fp32).
        strategy = get("data-parallel-sharding-strategy", "optim_grads_params")
        stages = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
        if strategy not in stages:
            reader.refuse("--data-parallel-sharding-strategy", strategy, f"give one of {', '.join(stages)} "
                          f"({code}: its choices)")
        reader.take(f"--{fsdp}", "", f"zero = {stages[strategy]} (Megatron-FSDP, data_parallel_sharding_strategy "
                    f"{strategy}{'' if 'data-parallel-sharding-strategy' in options else f': the default in {code}'}; "
                    "its bucketed all-gather and reduce-scatter buffers not counted: the bill's ZeRO buffers)",
                    zero=stages[strategy])
    elif "data-parallel-sharding-strategy" in options:
        reader.ignore("--data-parallel-sharding-strategy", get("data-parallel-sharding-strategy"),
                      "read by Megatron-FSDP only (--use-megatron-fsdp absent)")
    if torch_fsdp2:
        _read_torch_fsdp2(reader, get, code, pp, ep, fsdp)
    if get("optimizer-cpu-offload"):
        _read_optimizer_cpu_offload(reader, get, options, code)
    if "cpu-offloading" in options:
        reader.refuse("--cpu-offloading", options["cpu-offloading"], "Transformer Engine's activation and weight "
                      "offloading is not modelled by this reader; give the layout by hand (--activation-offload)")

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
    # The precision recipe (layout.precision): --fp8-format turns FP8 on, --fp8-recipe says which
    # (Megatron-Core's TransformerConfig @d98e8a64: fp8_recipe default "delayed"); --fp4-format e2m1 is NVFP4
    # (fp4_recipe default "nvfp4"). fp8_activations stays set beside it: plan prices the FP8 inputs and GEMMs.
    if "fp8-format" in options and "fp4-format" in options:
        reader.refuse("--fp4-format", get("fp4-format"), "Megatron-LM refuses --fp4-format with --fp8-format "
                      "(\"cannot be used simultaneously\"); give one")
    if "fp8-format" in options:
        fmt = get("fp8-format")
        if fmt not in ("e4m3", "hybrid"):
            reader.refuse("--fp8-format", fmt, "give e4m3 or hybrid")
        recipe = get("fp8-recipe", "delayed")
        if recipe not in MEGATRON_RECIPES:
            reader.refuse("--fp8-recipe", recipe, f"give {', '.join(MEGATRON_RECIPES)} (a custom quantizer factory "
                          "is not modelled)")
        default = "" if "fp8-recipe" in options else " (Megatron-Core's default --fp8-recipe)"
        gradients = ("; --fp8-format e4m3: the gradients in E4M3 too (the same bytes and GEMM peak as HYBRID's E5M2)"
                     if fmt == "e4m3" and recipe in ("delayed", "tensorwise") else "")
        reader.take("--fp8-format", fmt, f"precision = {MEGATRON_RECIPES[recipe]} (--fp8-recipe {recipe}{default}: "
                    f"FP8 GEMMs, the linear inputs saved in FP8, TE's weight copies{gradients})",
                    precision=MEGATRON_RECIPES[recipe], fp8_activations=True)
    elif "fp4-format" in options:
        fmt = get("fp4-format")
        if fmt != "e2m1":
            reader.refuse("--fp4-format", fmt, "give e2m1")
        recipe = get("fp4-recipe", "nvfp4")
        if recipe != "nvfp4":
            reader.refuse("--fp4-recipe", recipe, "give nvfp4 (a custom quantizer factory is not modelled)")
        reader.take("--fp4-format", fmt, "precision = nvfp4 (--fp4-recipe nvfp4: FP4 GEMMs, TE's NVFP4 weight copies)",
                    precision="nvfp4", fp8_activations=True)
    elif "fp8-recipe" in options:
        reader.ignore("--fp8-recipe", options["fp8-recipe"], "FP8 is off without --fp8-format")
    for name in ("fp8-amax-history-len", "fp8-amax-compute-algo"):
        if name in options:
            get(name)
            reader.ignore(f"--{name}", options[name], "FP8 scaling bookkeeping (a few floats per tensor; the bill "
                          "counts TE's default history of 1024)")
    backend = get("attention-backend", "auto")
    if backend not in ("auto", "flash", "fused", "unfused", "local"):
        reader.refuse("--attention-backend", backend, "give auto, flash, fused, unfused or local")
    fused = backend in ("auto", "flash", "fused")
    if "no-masked-softmax-fusion" in options and not fused:
        reader.refuse("--no-masked-softmax-fusion", "", f"with --attention-backend {backend} the unfused masked "
                      "softmax's saved tensors are not modelled; give --attention-backend auto or leave it out")
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
    elif get("use-torch-fsdp2"):
        # TorchFullyShardedDataParallelConfig has no overlap switch: fully_shard prefetches its all-gathers and
        # reduce-scatters on streams of its own
        reader.time["overlap"] = "default"
        reader.assume("--overlap-grad-reduce", "absent", "--overlap default (FSDP2 overlaps its own all-gathers "
                      "and reduce-scatters: fully_shard's streams; Megatron's DDP switch does not apply)")
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
    # A number is read within --gpus' range (a 21-digit --nnodes is refused, not assumed away); "1:4" (an
    # elastic range), "gpu" or an unset variable leaves the world size unknown (d = 1 assumed, said below).
    if nproc is not None and re.fullmatch(r"[0-9]+", str(nproc)) and re.fullmatch(r"[0-9]+", str(nnodes or "1")):
        world = _int(reader, "--nproc_per_node", nproc, field="gpus") * _int(reader, "--nnodes", nnodes or 1,
                                                                             field="gpus")
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
                     "encoder-seq-length", "no-position-embedding")
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
            from ...models.builtin import preset
            reader.model = preset(reader.model_name)
    if seq is not None:
        seq_value = _int(reader, "--seq-length", seq, field="seq")
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
            reader.unless_typed("recompute", "--recompute-method", f"{method} --recompute-num-layers {count}",
                                "only full recompute of every layer is modelled (uniform with 1 layer, or block with "
                                "every layer of a chunk); a partial full recompute is not: type --recompute")
            return
        reader.take("--recompute-method", method, f"every layer recomputed ({count} layer{'s' if count != '1' else ''}"
                    f" per {'checkpoint' if method == 'uniform' else 'chunk'})")


def _megatron_model_config(reader: _Reader, options: dict, tp: int) -> ModelConfig:
    def need(name):
        if name not in options:
            reader.refuse(f"--{name}", "", "missing: the model arguments need --num-layers, --hidden-size, "
                          "--num-attention-heads and --seq-length")
        return _int(reader, f"--{name}", options[name], field="seq" if name == "seq-length" else None)

    layers, hidden, heads = need("num-layers"), need("hidden-size"), need("num-attention-heads")
    seq = need("seq-length") if "seq-length" in options or "encoder-seq-length" not in options else \
        _int(reader, "--encoder-seq-length", options["encoder-seq-length"])
    if "num-experts" in options:
        reader.refuse("--num-experts", options["num-experts"], "a mixture of experts from Megatron's arguments is not "
                      "read yet: give MODEL (its HF config.json)")
    swiglu = bool(options.get("swiglu"))
    norm = str(options.get("normalization", "LayerNorm"))
    positions = str(options.get("position-embedding-type", "learned_absolute"))
    if options.get("no-position-embedding") and positions != "rope":
        reader.refuse("--no-position-embedding", "", "a GPT inventory without its learned position table is not "
                      "itemised; with --position-embedding-type rope it is what rope already means")
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

