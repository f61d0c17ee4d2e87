"""The torchtitan reader: a job TOML (``torchtitan/config/job_config.py`` at
:data:`~.reader.TORCHTITAN_COMMIT`)."""
from __future__ import annotations

from ...models.config import ModelConfig
from .reader import TORCHTITAN_COMMIT, LaunchReading, _finish, _int, _load_mapping, _Reader

#: torchtitan's selective AC by ``selective_ac_option`` (``_apply_ac_to_transformer_block`` in
#: ``torchtitan/distributed/activation_checkpoint.py`` at :data:`TORCHTITAN_COMMIT`): ``"op"`` is the per-op
#: policy (``_apply_op_sac``), billed as ``--recompute op-sac`` (:mod:`symbolic.layout.op_sac`); a digit n
#: is ``_apply_layer_sac``: a process-wide counter checkpoints the blocks whose count is a multiple of n
#: whole (``not ac_freq or count % ac_freq == 0``), so "0" and "1" checkpoint every block (full recompute)
#: and n ≥ 2 one block in n — a per-layer mix of full and no recompute the bill does not hold; anything
#: else is torchtitan's ValueError.
_LAYER_SAC_WHY = ("torchtitan's selective_ac_option {n} checkpoints one block in {n} whole and keeps the others' "
                  "saved tensors (activation_checkpoint.py _apply_layer_sac), a per-layer mix of full and no "
                  "recompute the bill does not model")

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
    reshard = reader.choice("parallelism.fsdp_reshard_after_forward",
                            value(par, "fsdp_reshard_after_forward", "default"), ("default", "always", "never"),
                            f"job_config.py@{TORCHTITAN_COMMIT[:7]}")
    if reshard not in ("default", "always"):
        reader.refuse("parallelism.fsdp_reshard_after_forward", reshard, "the weights kept gathered after forward "
                      "(ZeRO-2-like FSDP) are not modelled")
    reader.assume("FSDP2 fully_shard", "", "zero = 3 (parameters, gradients and optimizer states sharded over d; "
                  "reshard after forward: fsdp_reshard_after_forward default)", zero=3)
    # job_config.py's Literal choices: another value is torchtitan's error, never its default.
    where = f"job_config.py@{TORCHTITAN_COMMIT[:7]}"
    param_dtype = reader.choice("training.mixed_precision_param", value(train, "mixed_precision_param", "bfloat16"),
                                ("bfloat16", "float32"), where)
    reduce_dtype = reader.choice("training.mixed_precision_reduce", value(train, "mixed_precision_reduce", "float32"),
                                 ("float32",), where)
    train_dtype = reader.choice("training.dtype", value(train, "dtype", "float32"), ("bfloat16", "float32"), where)
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
    impl = reader.choice("optimizer.implementation", value("optimizer", "implementation", "fused"),
                         ("for-loop", "foreach", "fused"), where)
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
    if reader.flag("training.enable_cpu_offload", value(train, "enable_cpu_offload", False), "strict"):
        reader.take("training.enable_cpu_offload", True, "offload = params (FSDP CPU offload)", offload="params")
    ac = "activation_checkpoint"
    mode = reader.choice("activation_checkpoint.mode", value(ac, "mode", "selective"),
                         ("selective", "full", "memory_budget", "none"), where)
    if mode == "selective":
        given = "selective_ac_option" in section(ac)
        (reader.take if "mode" in section(ac) else reader.assume)(
            "activation_checkpoint.mode", mode, "selective AC: the policy is selective_ac_option's")
        option = value(ac, "selective_ac_option", "2")
        take = reader.take if given else reader.assume
        if not isinstance(option, str) or not (option == "op" or option.isdigit()):
            reader.refuse("activation_checkpoint.selective_ac_option", option,
                          "torchtitan takes 'op' or a non-negative whole number of layers, as text")
        elif option == "op":
            take("activation_checkpoint.selective_ac_option", option, "recompute = op-sac (torchtitan's per-op "
                 "policy: every other matmul's output, the attention kernel's and the reduce-scatters' kept)",
                 recompute="op-sac")
        elif int(option) <= 1:
            take("activation_checkpoint.selective_ac_option", option, f"recompute = full (selective_ac_option "
                 f"{option} checkpoints every block whole: _apply_layer_sac)", recompute="full")
        else:
            reader.unless_typed("recompute", "activation_checkpoint.selective_ac_option", option,
                                _LAYER_SAC_WHY.format(n=option) + "; give mode = 'full' or 'none', or type --recompute")
    elif mode == "memory_budget":
        reader.unless_typed("recompute", "activation_checkpoint.mode", mode, "the AC budget solver's choice of ops "
                            "is not modelled; give full or none, or type --recompute")
    else:
        (reader.take if "mode" in section(ac) else reader.assume)("activation_checkpoint.mode", mode,
                                                                 f"recompute = {mode}", recompute=mode)
    reader.assume("attention", "", "flash_attention (torchtitan's SDPA flash/efficient kernel)", flash_attention=True)
    family, flavor = value("model", "name", "llama3"), value("model", "flavor", "debugmodel")
    converters = value("model", "converters", [])
    if converters:
        reader.refuse("model.converters", converters, "model converters (float8, mx) are not read yet")
    if model is None and (family, str(flavor)) in _TORCHTITAN_FLAVORS:
        from ...models.builtin import preset
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
        "activation_checkpoint.selective_ac_option": "read under mode = 'selective' only (activation_checkpoint.py)",
        "parallelism.pipeline_parallel_schedule": "read with pipeline_parallel_degree > 1 only",
        "parallelism.pipeline_parallel_microbatch_size": "read with pipeline_parallel_degree > 1 only",
    }, model, "a built-in name or an HF config.json")

