"""The launch readers keep the CLI's contract (issue 44 item 2): a value read from a file passes the
same schema as a typed flag, booleans are read as the framework reads them, invalid choices and
duplicate keys are refused as the framework refuses them, files are size-capped and parsed without
alias blow-up or recursion — each a reproduction from the issue's hostile corpus."""
import json
import time

import pytest

import symbolic
from symbolic.cli import main
from symbolic.layout.launch import read_launch
from symbolic.layout.launch.reader import LAUNCH_MAX_BYTES, SHELL_MAX_BYTES
from symbolic.layout.suggest import largest_divisor
from symbolic.models.config import ConfigError

BASE = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 --bf16"


def refused(kind, source, *words, model=None):
    with pytest.raises(ConfigError) as error:
        read_launch(kind, source, model)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"--from {kind}")
    for word in words:
        assert word in message, message
    return message


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return str(path)


# --- ranges: the schema the CLI reads ---------------------------------------------------------

def test_huge_tensor_parallel_size_is_refused_at_once():
    start = time.perf_counter()
    refused("megatron", BASE + " --tensor-model-parallel-size 999999999999", "--tensor-model-parallel-size",
            "10,000,000", "--tp")
    assert time.perf_counter() - start < 2


def test_the_refusals_suggested_divisor_is_found_without_counting_down():
    start = time.perf_counter()
    assert largest_divisor(999_999_999_999, 96, 12288) == 96
    assert largest_divisor(10, 0) == 10 and largest_divisor(0, 6) is None and largest_divisor(5, 12, floor=5) is None
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("words, option", [
    ("--micro-batch-size 100000000000", "--micro-batch-size"),
    ("--seq-length 1000000000", "--seq-length"),
])
def test_stated_ranges_apply_to_values_read(words, option):
    refused("megatron", BASE.replace("--seq-length 128 ", "") + " " + words, option, "stated range")


@pytest.mark.parametrize("nnodes", ["100000000000", "100000000000000000000"])
def test_torchrun_world_size_beyond_the_range_is_refused(nnodes):
    refused("megatron", f"torchrun --nnodes {nnodes} --nproc_per_node 8 pretrain_gpt.py " + BASE, "--nnodes")


# --- booleans as the framework reads them ------------------------------------------------------

def test_nemo_sequence_parallel_zero_is_off_as_omegaconf_reads_it():
    data = {"model": {"tensor_model_parallel_size": 2, "sequence_parallel": 0}}
    assert "sp" not in read_launch("nemo", data).fields
    assert read_launch("nemo", {"model": {"tensor_model_parallel_size": 2, "sequence_parallel": "true"}}
                       ).fields["sp"] is True
    refused("nemo", {"model": {"sequence_parallel": "maybe"}}, "model.sequence_parallel", "true or false")


def test_accelerate_false_strings_are_false():
    data = {"distributed_type": "FSDP", "num_processes": 8, "mixed_precision": "bf16",
            "fsdp_config": {"fsdp_offload_params": "false", "fsdp_activation_checkpointing": "false"}}
    fields = read_launch("accelerate", data).fields
    assert "offload" not in fields and fields.get("recompute", "none") == "none"
    data["fsdp_config"] = {"fsdp_offload_params": "true", "fsdp_activation_checkpointing": "yes"}
    fields = read_launch("accelerate", data).fields
    assert fields["offload"] == "params" and fields["recompute"] == "full"
    data["fsdp_config"] = {"fsdp_offload_params": "perhaps"}
    refused("accelerate", data, "fsdp_offload_params", "true or false")


@pytest.mark.parametrize("flag", ["--bf16=false", "--sequence-parallel=0", "--use-distributed-optimizer=no"])
def test_megatron_store_true_with_a_value_is_refused_as_argparse_does(flag):
    refused("megatron", BASE.replace(" --bf16", "") + " --tensor-model-parallel-size 2 " + flag,
            flag, "takes no value")


# --- wrong types and choices -------------------------------------------------------------------

@pytest.mark.parametrize("fsdp", [{"fsdp_version": [2]}, {"fsdp_version": 3}, {"fsdp_sharding_strategy": [1]},
                                  {"fsdp_offload_params": [True]}])
def test_accelerate_wrong_types_are_one_line(fsdp):
    refused("accelerate", {"distributed_type": "FSDP", "num_processes": 2, "fsdp_config": fsdp}, "fsdp_config.")


def test_accelerate_wrong_sections_are_one_line():
    refused("accelerate", {"distributed_type": ["FSDP"], "num_processes": 2}, "distributed_type")
    refused("accelerate", {"distributed_type": "FSDP", "num_processes": 2, "fsdp_config": [1]}, "fsdp_config")
    refused("accelerate", {"distributed_type": "DEEPSPEED", "num_processes": 2, "deepspeed_config": 5},
            "deepspeed_config")


def test_torchtitan_invalid_choice_is_refused_not_defaulted():
    refused("torchtitan", {"training": {"mixed_precision_param": "float16"}}, "mixed_precision_param", "bfloat16")
    refused("torchtitan", {"optimizer": {"implementation": "apex"}}, "optimizer.implementation")


def test_deepspeed_offload_device_must_be_deepspeeds_spelling():
    refused("deepspeed", {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {
        "stage": 3, "offload_param": {"device": "CPU"}}}, "offload_param.device", "cpu")
    refused("deepspeed", {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "false"}}, "bf16.enabled")


# --- duplicates, size, aliases, recursion ------------------------------------------------------

def test_deepspeed_duplicate_key_is_refused_as_deepspeed_does(tmp_path):
    path = write(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 1, "train_micro_batch_size_per_gpu": 4}')
    refused("deepspeed", path, "given twice")


def test_bridge_duplicate_key_is_refused_as_omegaconf_does(tmp_path):
    path = write(tmp_path, "r.yaml", "model:\n  tensor_model_parallel_size: 2\n  tensor_model_parallel_size: 4\n")
    refused("megatron-bridge", path, "given twice")


def test_accelerate_duplicate_key_is_the_last_as_yaml_safe_load_takes_it(tmp_path):
    path = write(tmp_path, "a.yaml", "distributed_type: FSDP\nnum_processes: 2\nnum_processes: 4\n")
    assert read_launch("accelerate", path).fields["dp"] == 4


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for index in range(1, 12):
        lines.append(f"{chr(97 + index)}: &{chr(97 + index)} [" + ", ".join([f"*{chr(96 + index)}"] * 9) + "]")
    path = write(tmp_path, "bomb.yaml", "debug: false\n" + "\n".join(lines) + "\n")
    start = time.perf_counter()
    refused("accelerate", path, "aliases")
    assert time.perf_counter() - start < 2


def test_a_few_aliases_that_expand_past_the_node_cap_are_refused(tmp_path):
    lines = ["a: &a [" + ", ".join(["x"] * 60) + "]"]
    for index in range(1, 5):
        lines.append(f"{chr(97 + index)}: &{chr(97 + index)} [" + ", ".join([f"*{chr(96 + index)}"] * 12) + "]")
    refused("accelerate", write(tmp_path, "wide.yaml", "\n".join(lines) + "\n"), "values")


def test_self_referencing_dict_is_refused_not_a_recursion_error():
    data = {"training": {}}
    data["training"]["self"] = data
    with pytest.raises(ConfigError, match="contains itself"):
        symbolic.from_launch("torchtitan", data)


def test_big_and_binary_files_are_refused(tmp_path):
    start = time.perf_counter()
    refused("megatron", write(tmp_path, "big.sh", b"x" * (LAUNCH_MAX_BYTES + 1)), "launch config may have")
    refused("megatron", write(tmp_path, "big2.sh", b"x" * (SHELL_MAX_BYTES + 1)), "launch config may have")
    refused("deepspeed", write(tmp_path, "big.json", b" " * (LAUNCH_MAX_BYTES + 1)), "launch config may have")
    refused("megatron", write(tmp_path, "nul.sh", b"--seq-length\0 128\n"), "NUL")
    refused("megatron", "--seq-length " + "9" * (LAUNCH_MAX_BYTES + 1), "launch config may have")
    assert time.perf_counter() - start < 2


def test_a_long_token_under_the_cap_splits_quickly():
    start = time.perf_counter()
    refused("megatron", BASE + " --data-path " + "a" * (SHELL_MAX_BYTES - 200) + " --frobnicate 1",
            "--frobnicate")
    assert time.perf_counter() - start < 5


# --- Megatron: ignored options, shell words, not a launch file ------------------------------

def test_megatron_options_that_change_neither_memory_nor_time_are_ignored():
    reading = read_launch("megatron", BASE + " --no-masked-softmax-fusion --moe-router-load-balancing-type aux_loss "
                          "--moe-aux-loss-coeff 1e-2 --no-bias-dropout-fusion --log-straggler")
    ignored = {note.option for note in reading.ignored}
    assert {"--no-masked-softmax-fusion", "--moe-router-load-balancing-type", "--moe-aux-loss-coeff",
            "--no-bias-dropout-fusion", "--log-straggler"} <= ignored


def test_masked_softmax_fusion_matters_with_the_unfused_backend():
    refused("megatron", BASE + " --attention-backend unfused --no-masked-softmax-fusion", "--no-masked-softmax-fusion")


def test_a_shell_fi_is_not_an_options_value():
    script = ("#!/bin/bash\nif [ -n \"$X\" ]; then\n  torchrun pretrain_gpt.py " + BASE + " --tensor-model-parallel-size "
              "2 --recompute-granularity selective --recompute-modules core_attn\nfi\n")
    reading = read_launch("megatron", script)
    assert reading.fields["recompute_modules"] == ("core_attn",) and reading.fields["tp"] == 2


@pytest.mark.parametrize("text", ["#!/bin/bash\necho hello world\n", "{\"hidden_size\": 64}\n"])
def test_a_file_with_no_options_is_not_a_megatron_launch_file(tmp_path, text):
    refused("megatron", write(tmp_path, "x.sh", text), "not a Megatron launch file")


def test_cli_refusal_of_a_hostile_value_is_one_line_exit_2(capsys):
    code = main(["bill", "--from", "megatron", BASE + " --tensor-model-parallel-size 999999999999"])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_json_of_a_reading_survives_a_huge_ignored_value():
    reading = read_launch("megatron", BASE + " --data-path " + "p" * 5000)
    assert all(len(note.value) <= 80 for note in reading.ignored)
    json.dumps(reading.to_dict())


# --- DeepSpeed "auto" (HF Trainer's values) and a typed flag over what a reader cannot take ---------

HF_STYLE = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
            "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "gradient_clipping": "auto",
            "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
            "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}


def test_deepspeed_auto_fields_are_hf_trainers_defaults():
    reading = read_launch("deepspeed", HF_STYLE)
    fields = reading.fields
    # transformers 5.24.0 training_args.py: per_device_train_batch_size 8, gradient_accumulation_steps 1, bf16 False
    assert fields["micro_batch"] == 8 and "global_batch" not in fields and fields["dtype"] == "fp32"
    assumed = {note.option: note.what for note in reading.assumed}
    assert "per_device_train_batch_size" in assumed["train_micro_batch_size_per_gpu"]
    assert "--micro-batch" in assumed["train_micro_batch_size_per_gpu"]


def test_deepspeed_auto_with_accumulation_sets_the_global_batch():
    reading = read_launch("deepspeed", {**HF_STYLE, "gradient_accumulation_steps": 4})
    assert reading.fields["global_batch"] == 8 * 4


def test_a_typed_micro_batch_wins_over_an_auto_field(capsys, tmp_path):
    path = write(tmp_path, "ds.json", json.dumps(HF_STYLE))
    assert main(["bill", "gpt-7b", "--from", "deepspeed", path, "--micro-batch", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["micro_batch"] == 1


def test_a_typed_recompute_gets_past_torchtitans_every_nth_layer_policy(capsys, tmp_path):
    toml = "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"2\"\n"
    path = write(tmp_path, "job.toml", toml)
    refused("torchtitan", path, "one block in 2", "--recompute")
    assert main(["bill", "llama-3-8b", "--from", "torchtitan", path, "--json"]) == 2
    capsys.readouterr()
    assert main(["bill", "llama-3-8b", "--from", "torchtitan", path, "--recompute", "full", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["recompute"] == "full"
    ignored = {row["option"]: row["what"] for row in data["read_from"]["ignored"]}
    assert "typed --recompute" in ignored["activation_checkpoint.selective_ac_option"]


def test_megatron_fp8_param_gather_is_the_fp8_adam_recipe():
    reading = read_launch("megatron", BASE + " --fp8-format hybrid --fp8-param-gather --grad-reduce-in-bf16 "
                          "--use-distributed-optimizer")
    assert reading.fields["optimizer"] == "fp8-adam"
    refused("megatron", BASE + " --fp8-format hybrid --fp8-param-gather", "--fp8-param-gather", "--optimizer")


def test_bridge_finetune_lr_is_ignored():
    reading = read_launch("megatron-bridge", {"model": {"tensor_model_parallel_size": 2},
                                              "optimizer": {"finetune_lr": 1e-5}})
    assert "optimizer.finetune_lr" in {note.option for note in reading.ignored}


def test_accelerate_parallelism_config_tp_and_shard():
    data = {"distributed_type": "FSDP", "num_processes": 8, "mixed_precision": "bf16", "fsdp_config": {
        "fsdp_version": 2}, "parallelism_config": {"parallelism_config_tp_size": 2,
                                                   "parallelism_config_dp_shard_size": 4}}
    fields = read_launch("accelerate", data).fields
    assert (fields["tp"], fields["dp"], fields.get("sp", False)) == (2, 4, False)
    data["parallelism_config"]["parallelism_config_dp_shard_size"] = 2
    refused("accelerate", data, "num_processes 8")
    data["parallelism_config"].update(parallelism_config_dp_replicate_size=2)
    refused("accelerate", data, "HSDP")


def test_bridge_peft_lora_is_the_engines_lora_with_its_adapter_count_named():
    data = {"model": {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "seq_length": 4096,
                      "ffn_hidden_size": 14336, "num_query_groups": 8, "normalization": "RMSNorm",
                      "gated_linear_unit": True, "position_embedding_type": "rope", "add_bias_linear": False,
                      "vocab_size": 128256, "attention_dropout": 0.0, "hidden_dropout": 0.0,
                      "share_embeddings_and_output_weights": False},
            "peft": {"_target_": "megatron.bridge.peft.lora.LoRA", "dim": 16, "alpha": 32}}
    reading = read_launch("megatron-bridge", data)
    assert (reading.fields["lora"], reading.fields["lora_targets"]) == (16, "all-linear")
    note = next(n.what for n in reading.assumed if n.option == "peft.target_modules")
    assert f"{3 * 16 * 4096 * 32:,} parameters" in note
    refused("megatron-bridge", {**data, "peft": {"_target_": "megatron.bridge.peft.dora.DoRA"}}, "peft._target_")


def test_bridge_num_query_groups_is_gqa():
    data = {"model": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "num_query_groups": 2,
                      "seq_length": 128, "normalization": "RMSNorm", "gated_linear_unit": True,
                      "position_embedding_type": "rope", "add_bias_linear": False, "vocab_size": 1000,
                      "attention_dropout": 0.0, "hidden_dropout": 0.0}}
    assert read_launch("megatron-bridge", data).model.kv_heads == 2


def test_megatron_no_position_embedding_with_rope_is_rope():
    llama = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --vocab-size 1000 --bf16 "
             "--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
             "--attention-dropout 0 --hidden-dropout 0 --no-position-embedding")
    assert read_launch("megatron", llama).model.positions == "rope"
    refused("megatron", BASE + " --no-position-embedding", "--no-position-embedding")


def test_deepspeed_lamb_is_adams_states_with_its_norms_named():
    reading = read_launch("deepspeed", {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Lamb"},
                                        "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}})
    note = next(n.what for n in reading.taken if n.option == "optimizer.type")
    assert reading.fields["optimizer_impl"] == "fused" and "approximation" in note
    refused("deepspeed", {"optimizer": {"type": "Adagrad"}}, "optimizer.type", "--optimizer")


def test_the_apis_typed_keywords_win_as_the_clis_typed_flags(tmp_path):
    import symbolic
    toml = "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"2\"\n[training]\nlocal_batch_size = 8\n"
    path = write(tmp_path, "job.toml", toml)
    with pytest.raises(ConfigError):
        symbolic.from_launch("torchtitan", path, model="llama-3-8b")
    reading = symbolic.from_launch("torchtitan", path, model="llama-3-8b", recompute="full", micro_batch="2")
    assert (reading.fields["recompute"], reading.fields["micro_batch"]) == ("full", 2)
    ignored = {row.option: row.what for row in reading.ignored}
    assert "typed --recompute" in ignored["activation_checkpoint.selective_ac_option"]
    taken = {row.option: row.what for row in reading.taken}
    assert taken["micro_batch= (typed)"] == "micro_batch = 2, over the config's 8"
    assert symbolic.bill(**reading.options()).layout.recompute == "full"


@pytest.mark.parametrize("keyword, value, words", [
    ("bogus", 1, "not a layout keyword"), ("tp", True, "a bool is not a count"),
    ("recompute", "sometimes", "recompute"), ("moe_capacity", "2", "not a layout keyword"),
])
def test_the_apis_typed_keywords_are_read_through_the_schema(tmp_path, keyword, value, words):
    import symbolic
    path = write(tmp_path, "job.toml", "[activation_checkpoint]\nmode = \"none\"\n")
    with pytest.raises(ConfigError) as error:
        symbolic.from_launch("torchtitan", path, model="llama-3-8b", **{keyword: value})
    assert words in str(error.value) and "\n" not in str(error.value)
