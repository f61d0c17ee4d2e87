"""The LLaMA-Factory reader: a ``llamafactory-cli train`` YAML (its ``hparams/`` dataclasses at
:data:`LLAMAFACTORY_COMMIT`, loaded with ``OmegaConf.load`` — a key given twice is refused —
then HfArgumentParser: a boolean must be a YAML boolean).

Its defaults, read there: ``stage`` sft, ``finetuning_type`` lora, ``lora_rank`` 8, ``lora_target``
all (PEFT's every linear layer but the output, ``model_utils/misc.py find_all_linear_modules``),
``lora_dropout`` 0 (``finetuning_args.py``); ``cutoff_len`` 2048, ``packing`` only for ``stage: pt``
(``data_args.py``, ``parser.py``); ``quantization_bit`` None, ``quantization_type`` nf4,
``double_quantization`` True, ``flash_attn`` auto, ``disable_gradient_checkpointing`` False —
gradient checkpointing is on (``model_args.py``, ``model_utils/checkpointing.py``). The trainable
parameters are cast to fp32 unless ``pure_bf16`` (``model/adapter.py init_adapter``), so a full
fine-tune is fp32 weights, gradients and Adam states under bf16 autocast (``fp32-adam``) and a LoRA
run's adapters the same; the frozen base in the compute dtype (bf16) or NF4 / int8. The batch is HF
Trainer's (``per_device_train_batch_size`` 8, ``gradient_accumulation_steps`` 1, ``optim``
adamw_torch_fused: transformers 5.24.0 ``training_args.py``).
"""
from __future__ import annotations

from ...models.config import ModelConfig
from .finetune import HF_OPTIMIZERS, deepspeed_section, lora_dropout, lora_targets, resolve_model
from .reader import LaunchReading, _finish, _int, _load_mapping, _Reader

LLAMAFACTORY_COMMIT = "ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30"
_AT = f"LLaMA-Factory@{LLAMAFACTORY_COMMIT[:7]}"

_IGNORED = {
    "data, template and tokenizer (no memory or time per step)": (
        "dataset", "dataset_dir", "eval_dataset", "template", "overwrite_cache", "preprocessing_num_workers",
        "dataloader_num_workers", "max_samples", "val_size", "tokenized_path", "streaming", "buffer_size",
        "mix_strategy", "interleave_probs", "default_system", "enable_thinking", "media_dir", "image_max_pixels",
        "image_min_pixels", "video_max_pixels", "video_fps", "trust_remote_code", "train_on_prompt",
        "mask_history", "use_fast_tokenizer", "resize_vocab", "split_special_tokens", "new_special_tokens",
        "tool_format", "dataloader_pin_memory", "dataloader_persistent_workers", "disable_shuffling"),
    "run length, schedule or optimizer hyper-parameter (no memory or time per step)": (
        "learning_rate", "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_ratio", "warmup_steps",
        "weight_decay", "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "lora_alpha", "use_rslora",
        "loraplus_lr_ratio", "seed", "lr_scheduler_kwargs"),
    "logging, evaluation or checkpoints (no memory or time per step)": (
        "output_dir", "logging_steps", "save_steps", "save_strategy", "save_total_limit", "save_only_model",
        "plot_loss", "overwrite_output_dir", "report_to", "run_name", "logging_dir", "ddp_timeout",
        "resume_from_checkpoint", "per_device_eval_batch_size", "eval_strategy", "eval_steps", "do_train",
        "do_eval", "do_predict", "include_num_input_tokens_seen", "predict_with_generate", "compute_accuracy",
        "include_effective_tokens_per_second", "trackio_space_id", "hub_model_id", "push_to_hub"),
    "how a checkpointed layer is re-entered (the same saved input)": ("use_reentrant_gc",),
}
_IGNORE = {name: why for why, names in _IGNORED.items() for name in names}


def read_llamafactory(source, model: ModelConfig | None = None) -> LaunchReading:
    """A LLaMA-Factory training YAML (:data:`LLAMAFACTORY_COMMIT`)."""
    data, where = _load_mapping(source, "llamafactory")
    reader = _Reader("llamafactory", where, None, f"LLaMA-Factory hparams@{LLAMAFACTORY_COMMIT[:7]}")
    used: set[str] = set()

    def get(key, default=None):
        used.add(key)
        value = data.get(key, default)
        return default if value is None else value

    if "model_name_or_path" not in data and model is None:
        reader.refuse("model_name_or_path", "", f"missing: not a LLaMA-Factory training config ({_AT} "
                      "hparams/model_args.py)")
    resolve_model(reader, "model_name_or_path", get("model_name_or_path"), model, where)

    stage = reader.choice("stage", get("stage", "sft"), ("pt", "sft", "rm", "ppo", "dpo", "kto"),
                          f"{_AT} finetuning_args.py")
    if stage not in ("pt", "sft"):
        reader.refuse("stage", stage, "a reward model, a policy with its reference or value model, or a preference "
                      "pair per row is not modelled: the bill is one causal LM's pre-training or SFT step")
    seq = _int(reader, "cutoff_len", get("cutoff_len", 2048), field="seq")
    (reader.take if "cutoff_len" in data else reader.assume)(
        "cutoff_len", seq, f"seq = {seq}" + ("" if "cutoff_len" in data else f" ({_AT} data_args.py default)"),
        seq=seq)
    packing = reader.flag("packing", get("packing", stage == "pt"), "strict")
    reader.assume("packing", packing, "every row is cutoff_len tokens (packed): the bill's s" if packing else
                  "rows padded to the batch's longest, at most cutoff_len: the bill at s = cutoff_len is the "
                  "longest batch's")
    used.add("neat_packing")

    mb = _int(reader, "per_device_train_batch_size", get("per_device_train_batch_size", 8), field="micro_batch")
    gas = _int(reader, "gradient_accumulation_steps", get("gradient_accumulation_steps", 1))
    (reader.take if "per_device_train_batch_size" in data else reader.assume)(
        "per_device_train_batch_size", mb, f"micro_batch = {mb}" + ("" if "per_device_train_batch_size" in data else
                                                                    " (HF TrainingArguments' default)"),
        micro_batch=mb)
    if gas > 1:
        reader.take("gradient_accumulation_steps", gas, f"global_batch = micro-batch × accumulation × d = {mb * gas} "
                    "(d = 1 assumed: the launcher's world size; give --dp and --global-batch)", global_batch=mb * gas)
    reader.assume("the world size", "", "d = 1 (torchrun or accelerate launches it: give --dp)", dp=1)

    bf16, fp16, pure = (reader.flag(key, get(key, False), "strict") for key in ("bf16", "fp16", "pure_bf16"))
    if bf16 and fp16:
        reader.refuse("bf16", True, "and fp16 together (HF TrainingArguments refuses both)")
    dtype = "bf16" if bf16 or pure else "fp16" if fp16 else "fp32"
    reader.take("bf16/fp16", dtype, f"dtype = {dtype}" + ("" if bf16 or fp16 or pure else
                                                          " (HF TrainingArguments: neither bf16 nor fp16)"), dtype=dtype)

    kind = reader.choice("finetuning_type", get("finetuning_type", "lora"), ("lora", "oft", "freeze", "full"),
                         f"{_AT} finetuning_args.py")
    if kind in ("oft", "freeze"):
        reader.refuse("finetuning_type", kind, "OFT's and freeze tuning's trainable sets are not modelled: lora or "
                      "full")
    for key in ("use_dora", "use_galore", "use_apollo", "use_badam", "use_unsloth", "use_unsloth_gc", "pissa_init",
                "use_llama_pro", "shift_attn", "upcast_layernorm", "upcast_lmhead_output"):
        if get(key, False):
            reader.refuse(key, True, "not modelled")
    bits = get("quantization_bit")
    if bits is not None:
        bits = reader.choice("quantization_bit", bits, (4, 8), f"{_AT} model_args.py (bitsandbytes)")
        reader.choice("quantization_method", get("quantization_method", "bnb"), ("bnb",),
                               "the on-the-fly quantisation modelled")
        if bits == 4:
            reader.choice("quantization_type", get("quantization_type", "nf4"), ("nf4",), "NF4 is modelled")
        if kind != "lora":
            reader.refuse("quantization_bit", bits, "a quantised model trains only adapters (model/adapter.py)")
    double = reader.flag("double_quantization", get("double_quantization", True), "strict")
    if kind == "lora":
        rank = _int(reader, "lora_rank", get("lora_rank", 8), field="lora")
        base = {4: "nf4", 8: "int8"}.get(bits, "bf16")
        reader.take("lora_rank", rank, f"lora = {rank}, base_dtype = {base}", lora=rank, base_dtype=base)
        if base == "nf4":
            reader.take("double_quantization", double, "double_quant" if double else "no double quantisation",
                        double_quant=double)
        target = get("lora_target", "all")
        names = [name.strip() for name in target.split(",")] if isinstance(target, str) else target
        targets = lora_targets(reader, "lora_target", names)
        if targets:
            (reader.take if "lora_target" in data else reader.assume)("lora_target", target,
                                                                     f"lora_targets = {targets}", lora_targets=targets)
        if get("additional_target"):
            reader.refuse("additional_target", data["additional_target"], "whole modules trained beside the adapters "
                          "are not modelled")
    for key in ("lora_rank", "lora_target", "lora_dropout", "additional_target"):
        if key in data and kind != "lora":
            used.add(key)
            reader.ignore(key, data[key], "finetuning_type full")

    optimizer = get("optim", "adamw_torch_fused")
    if not isinstance(optimizer, str):
        reader.refuse("optim", repr(optimizer), "give an optimizer's name (HF Trainer's optim)")
    if pure:
        reader.unless_typed("optimizer", "pure_bf16", True, "trainable parameters kept in bf16 with no fp32 master "
                            "copy and bf16 Adam states: a recipe the engine does not have; type --optimizer")
    elif optimizer not in HF_OPTIMIZERS:
        reader.unless_typed("optimizer", "optim", optimizer, f"billed: {', '.join(HF_OPTIMIZERS)}; type --optimizer")
    else:
        recipe, impl, what = HF_OPTIMIZERS[optimizer]
        (reader.take if "optim" in data else reader.assume)(
            "optim", optimizer, f"optimizer = {recipe}, optimizer_impl = {impl} ({what}; trainable parameters cast to "
            "fp32: model/adapter.py)", optimizer=recipe, optimizer_impl=impl)

    off = reader.flag("disable_gradient_checkpointing", get("disable_gradient_checkpointing", False), "strict")
    (reader.take if "disable_gradient_checkpointing" in data else reader.assume)(
        "disable_gradient_checkpointing", off, "recompute = none" if off else
        "recompute = full (each decoder layer; LLaMA-Factory's default: model_utils/checkpointing.py)",
        recompute="none" if off else "full")
    if kind == "lora" and "lora_dropout" in data:
        lora_dropout(reader, "lora_dropout", get("lora_dropout"), reader.fields.get("lora_targets", "all-linear"), mb,
                     seq, reader.fields.get("recompute", "none"))
    attention = reader.choice("flash_attn", get("flash_attn", "auto"), ("auto", "disabled", "sdpa", "fa2", "fa3"),
                              f"{_AT} extras/constants.py AttentionFunction")
    if attention == "disabled":
        reader.refuse("flash_attn", attention, "eager attention keeps the s×s probabilities, which the LLaMA-style "
                      "inventories do not: give auto, sdpa or fa2")
    (reader.take if "flash_attn" in data else reader.assume)("flash_attn", attention, "flash_attention (SDPA or "
                                                             "FlashAttention-2: no s×s tensor)", flash_attention=True)
    if get("enable_liger_kernel", False):
        reader.refuse("enable_liger_kernel", True, "LLaMA-Factory applies Liger's RoPE, RMSNorm and SwiGLU kernels too "
                      "(model_utils/liger_kernel.py), whose saved tensors are not modelled")
    if get("deepspeed"):
        deepspeed_section(reader, "deepspeed", data["deepspeed"], where,
                          {"micro_batch": mb, "accumulation": gas, "bf16": bf16, "fp16": fp16, "optimizer": optimizer})
    for key in ("fsdp", "fsdp_config"):
        if get(key):
            reader.refuse(key, data[key], "FSDP through TrainingArguments is not read: read the accelerate config "
                          "that launches it (--from accelerate)")
    return _finish(reader, data, used, _IGNORE, model, "a built-in name or an HF config.json")
