"""The NeMo 2 / Megatron-Bridge reader: a recipe dump or override YAML (ConfigContainer at
:data:`~.reader.BRIDGE_COMMIT`), its ``model`` keys read by the Megatron reader's rules."""
from __future__ import annotations

import re
from dataclasses import replace

from ...models.config import ModelConfig
from .megatron import _read_megatron
from .reader import BRIDGE_COMMIT, LaunchReading, _finish, _int, _load_mapping, _Reader

#: The ConfigContainer fields read that are dataclass booleans (TransformerConfig, OptimizerConfig,
#: DistributedDataParallelConfig at :data:`~.reader.BRIDGE_COMMIT`).
_BOOL_FIELDS = {"sequence_parallel", "moe_pad_expert_input_to_capacity", "cross_entropy_loss_fusion",
                "add_bias_linear", "gated_linear_unit", "share_embeddings_and_output_weights", "bf16", "fp16",
                "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_fp32"}


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
                  "ffn_hidden_size", "num_query_groups", "seq_length", "attention_backend", "fp8", "fp8_recipe", "fp4",
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
            if key in _BOOL_FIELDS:  # a dataclass bool: read as OmegaConf reads it (0 is False, "false" too)
                value = reader.flag(f"{section}.{key}", value, "omegaconf")
            if key == "grad_reduce_in_fp32":
                grad_fp32 = bool(value)
                continue
            name = key.replace("_", "-")
            if key in ("fp8", "fp4"):   # TransformerConfig.fp8 / fp4: Megatron's --fp8-format / --fp4-format
                if value:
                    options[f"{key}-format"] = str(value)
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
    if options.get("num-query-groups") not in (None, "None"):
        # TransformerConfig.num_query_groups (None: one group per head) is the GQA groups themselves; Megatron-LM's
        # command line needs --group-query-attention beside --num-query-groups for the same
        options["group-query-attention"] = True
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
    if data.get("peft") is not None:
        _peft(reader, data["peft"], used)
    reader.taken = [replace(note, option=_bridge_name(note.option)) for note in reader.taken]
    reader.assumed = [replace(note, option=_bridge_name(note.option)) for note in reader.assumed]
    reader.assume("the recipe's other fields", "", "not in this file: the Layout's defaults (an override file "
                  "leaves the rest to its recipe)")
    return _finish(reader, data, used, {
        "checkpoint": "checkpoints", "logger": "logging", "rng": "seed", "scheduler": "learning-rate schedule",
        "optimizer.lr": "learning rate", "optimizer.min_lr": "learning rate",
        "optimizer.finetune_lr": "learning rate", "optimizer.weight_decay":
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


#: Megatron-Bridge's LoRA target modules (``peft/lora.py`` at :data:`~.reader.BRIDGE_COMMIT`: default all four).
_BRIDGE_ALL = {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"}


def _peft(reader: _Reader, peft, used: set) -> None:
    """A recipe's ``peft`` section: Megatron-Bridge's ``LoRA`` (``src/megatron/bridge/peft/lora.py``:
    ``dim`` 32, ``target_modules`` the four linear layers, ``dropout`` 0, ``lora_dtype`` the model's)
    as ``--lora dim``. Its fused layers carry one adapter each — one A for Q|K|V, one for the SwiGLU's
    gate|up — where the engine counts PEFT's per-matrix adapters (A for q, k, v; for gate and up): the
    engine's adapters hold 3·r·h more parameters a layer (attention only: 2·r·h), named with their
    size as an approximation."""
    if not isinstance(peft, dict):
        reader.refuse("peft", repr(peft), "not a section; give a mapping of its options")
    for key in peft:
        used.add(f"peft.{key}")
    target = str(peft.get("_target_", "megatron.bridge.peft.lora.LoRA"))
    if not target.endswith(".LoRA"):
        reader.refuse("peft._target_", target, "the adapter modelled is LoRA (megatron.bridge.peft.lora.LoRA)")
    for key in ("sequence_parallel_input_regather", "normalize_moe_lora", "experts_shared_outer_loras",
                "a2a_experimental", "exclude_modules"):
        if peft.get(key):
            reader.refuse(f"peft.{key}", peft[key], "not modelled")
    rank = _int(reader, "peft.dim", peft.get("dim", 32), field="lora")
    modules = peft.get("target_modules", sorted(_BRIDGE_ALL))
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        reader.refuse("peft.target_modules", repr(modules), "give a list of module names")
    names = set(modules)
    targets = "all-linear" if names == _BRIDGE_ALL else "attention" if names == {"linear_qkv", "linear_proj"} else ""
    if not targets:
        reader.unless_typed("lora_targets", "peft.target_modules", ",".join(modules), "the engine adapts every "
                            "linear layer or attention's; type --lora-targets")
        targets = "all-linear"
    reader.take("peft.dim", rank, f"lora = {rank}, lora_targets = {targets} (the base frozen in the model's dtype)",
                lora=rank, lora_targets=targets)
    extra_a = 3 if targets == "all-linear" else 2
    model = reader.model
    size = ""
    if model is not None:
        from ..recipes import RECIPES
        per_param = RECIPES[reader.fields.get("optimizer", "bf16-adam")].bytes_per_param
        count = extra_a * rank * model.hidden * model.layers
        size = f": {count:,} parameters × {per_param} B = {count * per_param / 1e9:.3f} GB before any split"
    reader.assume("peft.target_modules", ",".join(modules), f"approximation: Megatron-Bridge's fused layers carry one "
                  f"adapter each; the bill counts PEFT's per-matrix A ({extra_a}·r·h more a layer){size}")
    dropout = peft.get("dropout", 0.0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        reader.refuse("peft.dropout", dropout, "give a number from 0 to 1")
    if dropout:
        reader.assume("peft.dropout", dropout, "approximation: the dropout before each adapter keeps its dropped "
                      "input and mask (b·s·(3h + f)·3 B a layer with all four targets), not in the bill")
    for key in ("alpha", "dropout_position", "lora_A_init_method", "lora_B_init_method", "lora_dtype",
                "share_expert_adapters"):
        if key in peft:
            reader.ignore(f"peft.{key}", peft[key], "the adapters' scale, initialisation or dropout placement (no "
                          "memory or time)" if key != "lora_dtype" else "read with the precision")
