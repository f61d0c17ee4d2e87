"""The axolotl reader: an axolotl training YAML (its pydantic schema, ``src/axolotl/utils/schemas/``
at :data:`AXOLOTL_COMMIT`, loaded with ``yaml.safe_load``: a key given twice is the last one).

Its defaults, read there: ``sequence_len`` 512 (``config.py``), ``micro_batch_size`` 1 and
``gradient_accumulation_steps`` 1 and ``optimizer`` ``adamw_torch_fused`` (``training.py``),
``gradient_checkpointing`` False, ``bf16: auto`` — bf16 on a GPU that has it
(``utils/config/__init__.py``: ``is_torch_bf16_gpu_available``), the model then loaded in bf16
(``cfg.torch_dtype``); ``adapter: qlora`` loads the base through bitsandbytes NF4 with double
quantisation (``loaders/model.py``: ``bnb_4bit_quant_type`` nf4, ``bnb_4bit_use_double_quant`` True),
``load_in_8bit`` through LLM.int8; the norms and embeddings go back to bf16 after PEFT's
``prepare_model_for_kbit_training`` (``loaders/model.py`` ``_configure_embedding_dtypes``). The
adapters are fp32 (PEFT's ``autocast_adapter_dtype``; :mod:`.finetune`).

A full fine-tune in bf16 keeps no fp32 master copy (the model is loaded in bf16 and torch's AdamW
keeps m and v in the parameters' dtype: 8 B a parameter), a recipe the engine does not have: refused
unless ``--optimizer`` is typed. The world size is the launcher's (accelerate / torchrun), not the
YAML's: d = 1 is assumed (give ``--dp``).
"""
from __future__ import annotations

from ...models.config import ModelConfig
from .finetune import HF_OPTIMIZERS, deepspeed_section, lora_dropout, lora_targets, resolve_model
from .reader import LaunchReading, _finish, _int, _load_mapping, _Reader

AXOLOTL_COMMIT = "067b021c8b87a9e5e380b9173c704cf7340e30f5"
_AT = f"axolotl@{AXOLOTL_COMMIT[:7]}"

#: axolotl keys that change neither memory nor time per step, by the reason.
_IGNORED = {
    "data, prompts and tokenizer (no memory or time per step)": (
        "datasets", "test_datasets", "dataset_prepared_path", "val_set_size", "shuffle_merged_datasets",
        "dataset_processes", "dataset_num_proc", "chat_template", "chat_template_jinja", "default_system_message",
        "special_tokens", "tokens", "train_on_inputs", "tokenizer_type", "tokenizer_config", "tokenizer_use_fast",
        "tokenizer_legacy", "model_type", "trust_remote_code", "eot_tokens", "pretraining_dataset",
        "dataloader_pin_memory", "dataloader_num_workers", "dataloader_prefetch_factor", "dataloader_drop_last",
        "eval_sample_packing", "eval_sequence_len", "eval_batch_size", "group_by_length", "remove_unused_columns",
        "shuffle_before_merging_datasets", "dataset_shard_num", "dataset_shard_idx", "skip_prepare_dataset"),
    "run length, schedule or optimizer hyper-parameter (no memory or time per step)": (
        "num_epochs", "max_steps", "learning_rate", "lr_scheduler", "lr_scheduler_kwargs", "warmup_steps",
        "warmup_ratio", "weight_decay", "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon",
        "cosine_min_lr_ratio", "lr_quadratic_warmup", "lora_alpha", "peft_use_rslora", "loraplus_lr_ratio",
        "neftune_noise_alpha", "seed"),
    "logging, evaluation or checkpoints (no memory or time per step)": (
        "output_dir", "logging_steps", "evals_per_epoch", "eval_steps", "eval_strategy", "saves_per_epoch",
        "save_steps", "save_strategy", "save_total_limit", "save_first_step", "save_safetensors",
        "early_stopping_patience", "load_best_model_at_end", "resume_from_checkpoint",
        "auto_resume_from_checkpoints", "hub_model_id", "hub_strategy", "use_tensorboard", "wandb_project",
        "wandb_entity", "wandb_watch", "wandb_name", "wandb_log_model", "wandb_run_id", "mlflow_tracking_uri",
        "mlflow_experiment_name", "loss_watchdog_threshold", "loss_watchdog_patience", "strict", "debug",
        "include_tokens_per_second", "lora_model_dir", "local_rank", "ddp_timeout", "flash_optimum",
        "sample_packing_eff_est", "total_num_tokens", "total_supervised_tokens", "is_llama_derived_model",
        "is_mistral_derived_model", "is_qwen_derived_model", "is_falcon_derived_model", "hf_use_auth_token"),
    "TF32 matmul precision for fp32 GEMMs (the bill's GEMMs are bf16)": ("tf32",),
    "how a checkpointed layer is re-entered (the same saved input)": ("gradient_checkpointing_kwargs",),
    "the plugin list (its options are read one by one)": ("plugins",),
}
_IGNORE = {name: why for why, names in _IGNORED.items() for name in names}


def read_axolotl(source, model: ModelConfig | None = None) -> LaunchReading:
    """An axolotl YAML (the fine-tuner's own defaults, :data:`AXOLOTL_COMMIT`)."""
    data, where = _load_mapping(source, "axolotl")
    reader = _Reader("axolotl", where, None, f"axolotl utils/schemas@{AXOLOTL_COMMIT[:7]}")
    used: set[str] = set()

    def get(key, default=None):
        used.add(key)
        value = data.get(key, default)
        return default if value is None else value

    if "base_model" not in data and model is None:
        reader.refuse("base_model", "", f"missing: not an axolotl config (axolotl requires base_model, {_AT} "
                      "utils/schemas/model.py)")
    resolve_model(reader, "base_model", get("base_model"), model, where)
    used.add("base_model_config")

    seq = _int(reader, "sequence_len", get("sequence_len", 512), field="seq")
    (reader.take if "sequence_len" in data else reader.assume)(
        "sequence_len", seq, f"seq = {seq}" + ("" if "sequence_len" in data else f" ({_AT} config.py default)"),
        seq=seq)
    packing = reader.flag("sample_packing", get("sample_packing", False), "strict")
    pad = reader.flag("pad_to_sequence_len", get("pad_to_sequence_len", False), "strict")
    if packing or pad:
        reader.take("sample_packing" if packing else "pad_to_sequence_len", True, "every row is sequence_len tokens "
                    "(packed or padded): the bill's s")
    else:
        reader.assume("sample_packing", False, "rows padded to the batch's longest, at most sequence_len: the bill "
                      "at s = sequence_len is the longest batch's")

    mb = _int(reader, "micro_batch_size", get("micro_batch_size", 1), field="micro_batch")
    gas = _int(reader, "gradient_accumulation_steps", get("gradient_accumulation_steps", 1))
    if "batch_size" in data:
        used.add("batch_size")
        reader.unless_typed("global_batch", "batch_size", data["batch_size"], "axolotl derives the accumulation from "
                            "batch_size over micro_batch_size and the world size, which the YAML does not give: type "
                            "--global-batch")
    reader.take("micro_batch_size", mb, f"micro_batch = {mb}", micro_batch=mb)
    if gas > 1:
        reader.take("gradient_accumulation_steps", gas, f"global_batch = micro-batch × accumulation × d = {mb * gas} "
                    "(d = 1 assumed: the launcher's world size; give --dp and --global-batch)", global_batch=mb * gas)
    reader.assume("the world size", "", "d = 1 (accelerate or torchrun launches axolotl: give --dp)", dp=1)

    # Precision (utils/config/__init__.py): bf16 "auto" is bf16 on a GPU that has it.
    bf16 = get("bf16", "auto")
    fp16 = reader.flag("fp16", get("fp16", False), "strict")
    if bf16 == "auto":
        bf16 = not fp16
        reader.assume("bf16", "auto", f"{'bf16' if bf16 else 'fp16'} (bf16 on a GPU that has it — A100, H100: "
                      f"{_AT} utils/config/__init__.py)")
    else:
        bf16 = reader.flag("bf16", bf16, "strict")
    if bf16 and fp16:
        reader.refuse("bf16", True, "and fp16 together (axolotl's validation refuses both)")
    dtype = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    reader.fields["dtype"] = dtype
    reader.origin["dtype"] = "bf16/fp16"

    # Adapter and quantisation (utils/schemas/peft.py, loaders/model.py).
    adapter = get("adapter")
    four, eight = (reader.flag(key, get(key, False), "strict") for key in ("load_in_4bit", "load_in_8bit"))
    if adapter not in (None, "", "lora", "qlora"):
        reader.refuse("adapter", adapter, "the adapters modelled are lora and qlora")
    if get("peft_use_dora", False):
        reader.refuse("peft_use_dora", True, "DoRA's magnitude vector and its norm's saved tensors are not modelled")
    if adapter == "qlora" and not four:
        reader.refuse("adapter", "qlora", "needs load_in_4bit: true (axolotl's validation)")
    if adapter in ("lora", "qlora"):
        rank = _int(reader, "lora_r", get("lora_r"), field="lora") if data.get("lora_r") is not None else \
            reader.refuse("lora_r", "", f"missing: give the adapters' rank ({_AT} utils/schemas/peft.py has no default)")
        base = "nf4" if four else "int8" if eight else "bf16"
        reader.take("adapter", adapter, f"lora = {rank}, base_dtype = {base}"
                    + (" (bitsandbytes NF4, double-quantised: loaders/model.py)" if four else ""),
                    lora=rank, base_dtype=base)
        if get("lora_target_linear", False) is True:
            targets = "all-linear"
            reader.take("lora_target_linear", True, "lora_targets = all-linear", lora_targets=targets)
        elif "lora_target_modules" in data:
            targets = lora_targets(reader, "lora_target_modules", get("lora_target_modules"))
            if targets:
                reader.take("lora_target_modules", ",".join(get("lora_target_modules")), f"lora_targets = {targets}",
                            lora_targets=targets)
        else:
            reader.refuse("lora_target_modules", "", "missing: give lora_target_modules or lora_target_linear: true")
        modules_to_save = get("lora_modules_to_save")
        if modules_to_save:
            reader.refuse("lora_modules_to_save", ",".join(map(str, modules_to_save)), "whole modules trained beside "
                          "the adapters (their fp32 copies, gradients and states) are not modelled")
    elif four or eight:
        reader.refuse("load_in_4bit" if four else "load_in_8bit", True, "a quantised base needs an adapter "
                      "(adapter: lora or qlora)")
    for key in ("lora_r", "lora_target_linear", "lora_target_modules", "lora_dropout", "lora_modules_to_save"):
        if key in data and adapter not in ("lora", "qlora"):
            used.add(key)
            reader.ignore(key, data[key], "no adapter")

    # Optimizer (training.py: adamw_torch_fused).
    optimizer = get("optimizer", "adamw_torch_fused")
    if not isinstance(optimizer, str):
        reader.refuse("optimizer", repr(optimizer), "give an optimizer's name (HF Trainer's optim)")
    if adapter in ("lora", "qlora"):
        if optimizer not in HF_OPTIMIZERS:
            reader.unless_typed("optimizer", "optimizer", optimizer, f"billed: {', '.join(HF_OPTIMIZERS)}; type "
                                "--optimizer")
        else:
            recipe, impl, what = HF_OPTIMIZERS[optimizer]
            note = ("; the same bytes per adapter parameter as fp32 adapters and gradients with int8 states, split "
                    "differently between the kinds" if recipe == "adam8bit" else "")
            (reader.take if "optimizer" in data else reader.assume)(
                "optimizer", optimizer, f"optimizer = {recipe}, optimizer_impl = {impl} ({what} on the fp32 adapters"
                f"{note})", optimizer=recipe, optimizer_impl=impl)
    elif dtype != "fp32":
        reader.unless_typed("optimizer", "optimizer", f"{optimizer} (full fine-tune in {dtype})",
                            f"axolotl loads the model in {dtype} and the optimizer keeps its states in that dtype, with "
                            "no fp32 master copy: a recipe the engine does not have; type --optimizer")
    else:
        recipe, impl, what = HF_OPTIMIZERS.get(optimizer, ("fp32-adam", "", ""))
        if not impl:
            reader.unless_typed("optimizer", "optimizer", optimizer, "type --optimizer")
        else:
            reader.take("optimizer", optimizer, f"optimizer = {recipe}, optimizer_impl = {impl}", optimizer=recipe,
                        optimizer_impl=impl)

    # Activation checkpointing and attention.
    checkpointing = get("gradient_checkpointing", False)
    if checkpointing in ("offload", "offload_disk"):
        reader.unless_typed("recompute", "gradient_checkpointing", checkpointing, "checkpoints offloaded to CPU or "
                            "disk are not modelled; type --recompute")
    else:
        on = reader.flag("gradient_checkpointing", checkpointing, "strict")
        (reader.take if "gradient_checkpointing" in data else reader.assume)(
            "gradient_checkpointing", on, f"recompute = {'full (each decoder layer)' if on else 'none'}",
            recompute="full" if on else "none")
    if adapter in ("lora", "qlora") and "lora_dropout" in data:
        lora_dropout(reader, "lora_dropout", get("lora_dropout"), reader.fields.get("lora_targets", "all-linear"), mb,
                     seq, reader.fields.get("recompute", "none"))
    for key in ("activation_offloading", "layer_offloading", "selective_checkpointing"):
        if get(key):
            reader.refuse(key, data[key], "not modelled")
    attention = get("attn_implementation")
    for flag_key, kernel in (("flash_attention", "flash_attention_2"), ("sdp_attention", "sdpa"),
                             ("xformers_attention", "xformers"), ("eager_attention", "eager")):
        if get(flag_key):
            attention = attention or kernel
    attention = attention or "sdpa"
    if attention == "eager":
        reader.refuse("attn_implementation", attention, "eager attention keeps the s×s probabilities, which the "
                      "LLaMA-style inventories do not: give flash_attention_2 or sdpa")
    (reader.take if "attn_implementation" in data else reader.assume)(
        "attn_implementation", attention, "flash_attention (a fused kernel: no s×s tensor)", flash_attention=True)

    # Liger (integrations/liger/args.py): the fused linear cross-entropy is the bill's liger loss.
    if get("liger_fused_linear_cross_entropy", False):
        reader.take("liger_fused_linear_cross_entropy", True, "loss = liger", loss="liger")
    for key in ("liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_swiglu", "liger_layer_norm",
                "liger_cross_entropy", "liger_rms_norm_gated"):
        if get(key, False):
            reader.refuse(key, True, "Liger's kernel keeps other tensors than the layer it replaces, not modelled: "
                          "leave it out to bill the model's own (liger_fused_linear_cross_entropy is read)")
    if get("chunked_cross_entropy", False):
        reader.unless_typed("loss", "chunked_cross_entropy", True, "axolotl's chunked loss is not the bill's; type "
                            "--loss")

    # Sharding: a deepspeed: section, or fsdp: with fsdp_config.
    if get("deepspeed"):
        deepspeed_section(reader, "deepspeed", data["deepspeed"], where,
                          {"micro_batch": mb, "accumulation": gas, "bf16": dtype == "bf16", "fp16": dtype == "fp16",
                           "optimizer": optimizer})
    if get("fsdp") or get("fsdp_config"):
        _read_fsdp(reader, data, used)
    for key in ("tensor_parallel_size", "context_parallel_size", "sequence_parallel_degree", "dp_shard_size",
                "dp_replicate_size"):
        if key in data and data[key] not in (None, 1):
            used.add(key)
            reader.refuse(key, data[key], "axolotl's N-D parallelism is not read yet; give the layout by hand")
    for key in ("torch_compile", "torch_compile_backend", "torch_compile_mode"):
        if key in data:
            used.add(key)
            reader.ignore(key, data[key], "torch.compile: the same saved tensors (fusions change element-wise time only)")
    return _finish(reader, data, used, _IGNORE, model, "a built-in name or an HF config.json")


def _read_fsdp(reader: _Reader, data: dict, used: set) -> None:
    """axolotl's ``fsdp:`` list (``full_shard``, ``shard_grad_op``, ``offload``, ``auto_wrap``) and
    ``fsdp_config`` (``utils/schemas/fsdp.py``): the ZeRO stage and the offload."""
    listed = data.get("fsdp") or []
    config = data.get("fsdp_config") or {}
    used.update(("fsdp", "fsdp_version"))
    if not isinstance(listed, list) or not isinstance(config, dict):
        reader.refuse("fsdp", repr(listed), "give a list of options and an fsdp_config mapping")
    version = data.get("fsdp_version", config.get("fsdp_version", config.get("version", 1)))
    version = reader.choice("fsdp_version", version, (1, 2), "axolotl's FSDP versions")
    zero = 3
    if version == 2:
        reshard = reader.flag("fsdp_config.reshard_after_forward",
                              config.get("reshard_after_forward", config.get("fsdp_reshard_after_forward", True)),
                              "accelerate")
        zero = 3 if reshard else 2
    else:
        strategy = str(config.get("fsdp_sharding_strategy", config.get("sharding_strategy", ""))).upper()
        if "shard_grad_op" in listed or strategy == "SHARD_GRAD_OP":
            zero = 2
        elif strategy and strategy != "FULL_SHARD":
            reader.refuse("fsdp_config.sharding_strategy", strategy, "give FULL_SHARD or SHARD_GRAD_OP")
    offload = "offload" in listed or reader.flag(
        "fsdp_config.offload_params", config.get("offload_params", config.get("fsdp_offload_params", False)),
        "accelerate")
    reader.framework = "fsdp"
    reader.take("fsdp", ",".join(map(str, listed)) or f"fsdp_version {version}", f"zero = {zero}"
                + (", offload = params" if offload else ""), zero=zero, **({"offload": "params"} if offload else {}))
    for key, value in config.items():
        used.add(f"fsdp_config.{key}")
        if key in ("reshard_after_forward", "fsdp_reshard_after_forward", "offload_params", "fsdp_offload_params",
                   "fsdp_sharding_strategy", "sharding_strategy", "fsdp_version", "version"):
            continue
        if key in ("activation_checkpointing", "fsdp_activation_checkpointing"):
            if reader.flag(f"fsdp_config.{key}", value, "accelerate"):
                reader.take(f"fsdp_config.{key}", True, "recompute = full (each wrapped layer)", recompute="full")
            continue
        reader.ignore(f"fsdp_config.{key}", value, "the wrap unit, state-dict format, prefetch or loading")
