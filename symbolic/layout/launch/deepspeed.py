"""The DeepSpeed reader: a ``ds_config.json`` (``deepspeed/runtime/config.py`` and
``deepspeed/runtime/zero/`` at :data:`~.reader.DEEPSPEED_COMMIT`); accelerate's DeepSpeed plugin reads
the file it names by the same rules."""
from __future__ import annotations

from ...models.config import ModelConfig
from .reader import DEEPSPEED_COMMIT, LaunchReading, _finish, _int, _load_mapping, _Reader, _walk

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


#: transformers' version read for HF Trainer's ``"auto"`` fills (the one installed beside this engine).
TRANSFORMERS_VERSION = "5.24.0"
#: ``"auto"`` fields HF Trainer fills (``integrations/deepspeed.py`` ``trainer_config_process`` at
#: transformers 5.24.0) -> (TrainingArguments' default, its argument, the flag giving the script's own):
#: ``per_device_train_batch_size`` 8, ``gradient_accumulation_steps`` 1, ``bf16``/``fp16`` False
#: (``training_args.py``); ``train_batch_size`` is world size × micro-batch × accumulation.
HF_TRAINER_AUTO = {
    "train_micro_batch_size_per_gpu": (8, "per_device_train_batch_size", "--micro-batch"),
    "gradient_accumulation_steps": (1, "gradient_accumulation_steps", "--global-batch"),
    "bf16.enabled": (False, "bf16", "--dtype bf16 with --optimizer"),
    "fp16.enabled": (False, "fp16", "--dtype fp16 with --optimizer"),
}


def _read_deepspeed(reader: _Reader, data: dict, used: set) -> None:
    """A ds_config's keys; an ``"auto"`` value is HF Trainer's (:data:`HF_TRAINER_AUTO`), assumed and
    named, a typed flag giving the script's own."""
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

    hf = f"transformers {TRANSFORMERS_VERSION} integrations/deepspeed.py trainer_config_process"

    def auto(path, value):
        """``"auto"``: HF Trainer's fill (:data:`HF_TRAINER_AUTO`) with TrainingArguments' default, assumed
        and named with the flag that gives the script's own value; ``None`` where HF Trainer computes it
        from the others (train_batch_size); refused where HF Trainer fills nothing."""
        if value != "auto":
            return value
        if path == "train_batch_size":
            reader.assume(path, "auto", f"world size × micro-batch × accumulation (HF Trainer's, {hf})")
            return None
        if path not in HF_TRAINER_AUTO:
            reader.refuse(path, value, f"HF Trainer fills no 'auto' here ({hf}); give the value")
        default, argument, flag = HF_TRAINER_AUTO[path]
        reader.assume(path, "auto", f"{default}: HF Trainer fills it from TrainingArguments.{argument} "
                      f"(default {default}: training_args.py; {hf}); {flag} gives the script's own")
        return default

    world = reader.gpus
    raw = {path: get(path) for path in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                        "train_batch_size")}
    by_script = "train_micro_batch_size_per_gpu" if raw["train_micro_batch_size_per_gpu"] == "auto" else None
    values = {path: auto(path, value) for path, value in raw.items()}
    mb, gas, total = (_int(reader, path, value, field=field) if value is not None else None
                      for (path, value), field in zip(values.items(), ("micro_batch", None, "global_batch")))
    # DeepSpeed's rule (runtime/config.py _batch_assertion): train_batch = micro × accumulation × d.
    if mb is None and total is not None:
        mb = total // ((gas or 1) * (world or 1)) if world else (total // (gas or 1))
        reader.assume("train_micro_batch_size_per_gpu", "absent", f"train_batch_size / (accumulation × d) = {mb}")
    elif mb is None:
        mb = 1
        reader.assume("train_micro_batch_size_per_gpu", "absent", "1 (runtime/config.py's default)")
    reader.take("train_micro_batch_size_per_gpu", mb, f"micro_batch = {mb}", micro_batch=mb)
    if total is not None:
        dp = world or max(1, total // (mb * (gas or 1)))
        reader.fields.update(global_batch=total)
        reader.take("train_batch_size", total, f"global_batch = {total}")
        if not world:
            reader.assume("the world size", "", f"d = train_batch_size / (micro-batch × accumulation) = {dp} "
                          "(DeepSpeed's rule); give --dp to change it", dp=dp)
    elif by_script and (gas or 1) == 1:
        pass  # one micro-batch per step: the engine's default global batch (micro-batch × d) follows a typed one
    elif by_script:
        d = world or 1
        reader.fields.update(global_batch=mb * gas * d)
        reader.take("gradient_accumulation_steps", gas, f"global_batch = micro-batch × accumulation × d = "
                    f"{mb * gas * d} (type --micro-batch and --global-batch together for the script's)")
    elif gas is not None and mb is not None:
        d = world or 1
        reader.fields.update(global_batch=mb * gas * d)
        reader.take("gradient_accumulation_steps", gas, f"global_batch = micro-batch × accumulation × d = {mb * gas * d}"
                    + ("" if world else " (d = 1 assumed: the config does not say the world size; give --dp)"))
    if world:
        reader.fields.update(dp=world)
    bf16, fp16 = get("bf16.enabled", False), get("fp16.enabled", False)
    bf16 = bf16 or get("bfloat16.enabled", False)
    bf16, fp16 = (reader.flag(path, auto(path, value), "strict")
                  for path, value in (("bf16.enabled", bf16), ("fp16.enabled", fp16)))
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
    if str(kind).lower() not in ("adam", "adamw", "fusedadam", "cpuadam", "lamb"):
        reader.unless_typed("optimizer", "optimizer.type", kind, "the Adam recipes (and Lamb's, the same states) are "
                            "modelled; type --optimizer")
    if str(kind).lower() == "lamb":
        # runtime/engine.py: "Lamb" is FusedLamb (ops/lamb/fused_lamb.py): Adam's m and v, fp32, and a trust
        # ratio from two norms per tensor
        reader.take("optimizer.type", kind, "optimizer_impl = fused; approximation: FusedLamb keeps Adam's m and v "
                    "(the same state bytes), its step's weight and update norms (one more read of each, 8 B a "
                    "parameter at the step) not in the step time", optimizer_impl="fused")
    elif get("optimizer") is None:
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
    # zero/offload_config.py: OffloadDeviceEnum's values (pydantic refuses "CPU" or "gpu": never no offload).
    devices, where = ("none", "cpu", "nvme"), f"zero/offload_config.py@{DEEPSPEED_COMMIT[:7]}"
    opt_device = reader.choice("zero_optimization.offload_optimizer.device",
                               get("zero_optimization.offload_optimizer.device", "none"), devices, where)
    param_device = reader.choice("zero_optimization.offload_param.device",
                                 get("zero_optimization.offload_param.device", "none"), devices, where)
    if "nvme" in (opt_device, param_device):
        reader.unless_typed("offload", "zero_optimization.offload_*.device", "nvme", "NVMe offload is not modelled; "
                            "type --offload")
    elif param_device == "cpu":
        reader.take("zero_optimization.offload_param.device", "cpu", "offload = params", offload="params")
    elif opt_device == "cpu":
        reader.take("zero_optimization.offload_optimizer.device", "cpu", "offload = optimizer", offload="optimizer")
    ac = get("activation_checkpointing")
    if isinstance(ac, dict) and ac:
        for key in ac:
            used.add(f"activation_checkpointing.{key}")
        reader.ignore("activation_checkpointing", "", "DeepSpeed's checkpointing API settings: whether layers are "
                      "recomputed is the model code's choice; give --recompute")


def read_nested_deepspeed(reader: _Reader, data: dict, label: str) -> None:
    """A ds_config another launch file names (accelerate's ``deepspeed_config_file``, a fine-tuner's
    ``deepspeed:``): read by :func:`_read_deepspeed`, its other keys ignored with the reason or refused,
    each listed as ``label: key``."""
    used: set[str] = set()
    _read_deepspeed(reader, data, used)
    for key, value in _walk(data):
        if key not in used:
            why = next((w for p, w in _DEEPSPEED_IGNORE.items() if key == p or key.startswith(p + ".")), None)
            if why is None:
                reader.refuse(f"{label}: {key}", value, "not a key the deepspeed reader knows")
            reader.ignore(f"{label}: {key}", value, why)
