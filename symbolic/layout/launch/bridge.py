"""The NeMo 2 / Megatron-Bridge reader: a recipe dump or override YAML (ConfigContainer at
:data:`~.reader.BRIDGE_COMMIT`), its ``model`` keys read by the Megatron reader's rules."""
from __future__ import annotations

import re
from dataclasses import replace

from ...models.config import ModelConfig
from .megatron import _read_megatron
from .reader import BRIDGE_COMMIT, LaunchReading, _finish, _load_mapping, _Reader

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
            if key in _BOOL_FIELDS:  # a dataclass bool: read as OmegaConf reads it (0 is False, "false" too)
                value = reader.flag(f"{section}.{key}", value, "omegaconf")
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
