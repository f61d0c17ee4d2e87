"""The accelerate reader: an ``accelerate config`` YAML (FSDP, or DeepSpeed naming its
ds_config.json) at :data:`~.reader.ACCELERATE_COMMIT`."""
from __future__ import annotations

from pathlib import Path

from ...models.config import ModelConfig
from .deepspeed import read_nested_deepspeed
from .reader import ACCELERATE_COMMIT, LaunchReading, _finish, _int, _load_mapping, _Reader

def read_accelerate(source, model: ModelConfig | None = None) -> LaunchReading:
    """An accelerate config YAML (``accelerate config``'s keys at :data:`ACCELERATE_COMMIT`): FSDP or
    DeepSpeed (its ``deepspeed_config_file`` read by :func:`read_deepspeed`'s rules). The batch and
    sequence are the training script's: give --micro-batch and --seq."""
    data, where = _load_mapping(source, "accelerate")
    used: set[str] = set()
    kind = data.get("distributed_type", "NO")
    used.add("distributed_type")
    framework = {"FSDP": "fsdp", "DEEPSPEED": "deepspeed"}.get(kind, "fsdp") if isinstance(kind, str) else "fsdp"
    reader = _Reader("accelerate", where, framework, f"accelerate {ACCELERATE_COMMIT[:7]}")
    reader.choice("distributed_type", kind, ("FSDP", "DEEPSPEED"), "the ones read")
    processes = data.get("num_processes", 1)
    used.add("num_processes")
    used.add("num_machines")
    world = _int(reader, "num_processes", processes)  # accelerate: the total over all machines
    reader.gpus = world
    reader.take("num_processes", world, f"dp = {world} (each process one data-parallel rank)", dp=world)
    if kind == "FSDP":
        fsdp = data.get("fsdp_config") or {}
        if not isinstance(fsdp, dict):
            reader.refuse("fsdp_config", repr(fsdp), "not a section; give a mapping of its options")
        strategy = fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")
        if isinstance(strategy, bool) or not isinstance(strategy, (str, int)):
            reader.refuse("fsdp_config.fsdp_sharding_strategy", repr(strategy), "give FULL_SHARD, SHARD_GRAD_OP or "
                          "NO_SHARD")
        strategy = str(strategy).upper()  # dataclasses.py: ShardingStrategy[name.upper()] or its number
        used.add("fsdp_config.fsdp_sharding_strategy")
        version = reader.choice("fsdp_config.fsdp_version", fsdp.get("fsdp_version", 1), (1, 2),
                                "accelerate's FSDP versions")
        used.add("fsdp_config.fsdp_version")
        if version == 2:  # dataclasses.py: str_to_bool(reshard_after_forward) under FSDP2
            reshard = reader.flag("fsdp_config.fsdp_reshard_after_forward", fsdp.get("fsdp_reshard_after_forward",
                                                                                     True), "accelerate")
            strategy = "FULL_SHARD" if reshard else "SHARD_GRAD_OP"
            used.add("fsdp_config.fsdp_reshard_after_forward")
        stages = {"FULL_SHARD": 3, "1": 3, "SHARD_GRAD_OP": 2, "2": 2, "NO_SHARD": 0, "3": 0}
        if strategy not in stages:
            reader.refuse("fsdp_config.fsdp_sharding_strategy", strategy, "HYBRID_SHARD is not modelled; give "
                          "FULL_SHARD, SHARD_GRAD_OP or NO_SHARD")
        reader.take("fsdp_config.fsdp_sharding_strategy", strategy, f"zero = {stages[strategy]}", zero=stages[strategy])
        if reader.flag("fsdp_config.fsdp_offload_params", fsdp.get("fsdp_offload_params", False), "accelerate"):
            reader.take("fsdp_config.fsdp_offload_params", True, "offload = params", offload="params")
        else:
            reader.take("fsdp_config.fsdp_offload_params", False, "no offload")
        used.add("fsdp_config.fsdp_offload_params")
        if reader.flag("fsdp_config.fsdp_activation_checkpointing", fsdp.get("fsdp_activation_checkpointing", False),
                       "accelerate"):
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
        if not isinstance(ds, dict):
            reader.refuse("deepspeed_config", repr(ds), "not a section; give a mapping of its options")
        path = ds.get("deepspeed_config_file")
        used.add("deepspeed_config.deepspeed_config_file")
        if not path or not isinstance(path, str):
            reader.refuse("deepspeed_config.deepspeed_config_file", path or "", "give the ds_config.json it names")
        file = Path(path) if Path(path).is_absolute() else Path(where).parent / path
        ds_data, _ = _load_mapping(str(file), "deepspeed")
        reader.take("deepspeed_config.deepspeed_config_file", path, f"read by the deepspeed reader ({file.name})")
        read_nested_deepspeed(reader, ds_data, file.name)
        if data.get("mixed_precision") in (None, "no"):  # else accelerate's mixed_precision: refused below
            used.add("mixed_precision")
        ignore = {"deepspeed_config.zero3_init_flag": "loading (before training)"}
    else:
        reader.refuse("distributed_type", kind, "give FSDP or DEEPSPEED (the ones read)")
    if data.get("parallelism_config"):
        _parallelism(reader, data["parallelism_config"], world, used)
    reader.assume("micro-batch and seq", "", "the training script's: give --micro-batch and --seq")
    ignore.update({"compute_environment": "where it runs", "machine_rank": "this machine's rank",
                   "main_training_function": "a name", "rdzv_backend": "rendezvous", "same_network": "rendezvous",
                   "tpu_env": "TPU", "tpu_use_cluster": "TPU", "tpu_use_sudo": "TPU", "use_cpu": "CPU training",
                   "downcast_bf16": "TPU", "debug": "checks", "enable_cpu_affinity": "CPU affinity",
                   "main_process_ip": "rendezvous", "main_process_port": "rendezvous",
                   "gpu_ids": "device choice", "num_machines": "the machines (num_processes counts every GPU)"})
    return _finish(reader, data, used, ignore, model, "the HF config.json it trains")


def _parallelism(reader: _Reader, config, world: int, used: set) -> None:
    """accelerate's ``parallelism_config`` (``parallelism_config_{dp_replicate,dp_shard,tp,cp,sp}_size``:
    ``utils/launch.py`` passes each to ``ParallelismConfig``, ``parallelism_config.py``): TP over
    transformers' ``tp_plan`` (DTensor: the linear layers' inputs all-gathered, the norms replicated —
    no sequence parallelism), d = the shard size. HSDP, context and sequence parallelism are refused
    unless the matching flag is typed."""
    if not isinstance(config, dict):
        reader.refuse("parallelism_config", repr(config), "not a section; give a mapping of its sizes")
    sizes = {}
    for key in ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size"):
        name = f"parallelism_config_{key}"
        used.add(f"parallelism_config.{name}")
        value = config.get(name)
        sizes[key] = 1 if value is None else _int(reader, f"parallelism_config.{name}", value,
                                                   field="tp" if key == "tp_size" else "dp")
    for key, value in config.items():
        if f"parallelism_config.{key}" not in used:
            used.add(f"parallelism_config.{key}")
            reader.ignore(f"parallelism_config.{key}", value, "a backend choice of a parallelism of size 1"
                          if key.startswith(("parallelism_config_cp_", "parallelism_config_sp_")) else
                          "not a size")
    if sizes["dp_replicate_size"] > 1:
        reader.refuse("parallelism_config.parallelism_config_dp_replicate_size", sizes["dp_replicate_size"],
                      "HSDP (replicas of FSDP groups) is not modelled: ZeRO shards over all d ranks")
    for key, field in (("cp_size", "cp"), ("sp_size", "cp")):
        if sizes[key] > 1:
            reader.unless_typed(field, f"parallelism_config.parallelism_config_{key}", sizes[key],
                                "accelerate's context / sequence parallelism (torch's ring attention, DeepSpeed's "
                                "Ulysses) is not read: type --cp")
    product = sizes["dp_replicate_size"] * sizes["dp_shard_size"] * sizes["tp_size"] * sizes["cp_size"]
    if product != world:
        reader.refuse("parallelism_config", f"{product} ranks", f"the sizes' product is not num_processes {world} "
                      "(accelerate's ParallelismConfig asserts it)")
    tp = sizes["tp_size"]
    if tp > 1:
        reader.take("parallelism_config.parallelism_config_tp_size", tp, f"tp = {tp}, sp off, sp_inputs gathered "
                    "(transformers' tp_plan: colwise/rowwise DTensor linears, the norms replicated)", tp=tp,
                    sp_inputs="gathered")
    dp = sizes["dp_shard_size"]
    reader.take("parallelism_config.parallelism_config_dp_shard_size", dp, f"dp = {dp}", dp=dp)
