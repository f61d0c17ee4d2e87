"""Launch configs in (issue 26): each framework's own example read into the layout written by hand,
and the Korthikanti 175B command line billed exactly as the hand-written flags."""
import json
from fractions import Fraction
from pathlib import Path

import pytest

import symbolic
from symbolic.cli import main
from symbolic.layout.launch import read_launch
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "launch"

#: Korthikanti et al. 2022's GPT-3 175B run (Table 3: t = 8, p = 8, SP, selective recompute; fp16, GPT-2's
#: vocabulary, no fused attention in 2022) as today's Megatron-LM arguments, with 8 micro-batches per iteration.
KORTHIKANTI_175B = ("pretrain_gpt.py --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
                    "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 "
                    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --sequence-parallel "
                    "--recompute-activations --fp16 --attention-backend unfused --vocab-file gpt2-vocab.json "
                    "--merge-file gpt2-merges.txt --lr 6.0e-5 --seed 1234 --log-interval 100")
#: The same run in this tool's flags (the README's quick start, and what Megatron does by default:
#: FusedAdam, no DP overlap without --overlap-grad-reduce, fp16 as the command line says).
HAND_175B = ["gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--recompute", "selective", "--global-batch", "8",
             "--dtype", "fp16", "--optimizer-impl", "fused", "--overlap", "none"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def without_reading(text: str) -> str:
    """The bill with the 'read from' block (after its first lines) taken out."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("read from "))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return "\n".join(lines[:start] + lines[end:])


def test_korthikanti_command_line_bills_as_the_hand_written_flags(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    code, read, _ = run(capsys, "bill", "--from", "megatron", KORTHIKANTI_175B, "--gpu-memory", "80GB")
    assert code == 0
    code, hand, _ = run(capsys, "bill", *HAND_175B, "--gpu-memory", "80GB")
    assert code == 0
    # every line before the step time is the hand-written flags'; the TIME section also names the reading's
    # framework preset and its error band (on that framework's published runs), which the JSON test holds
    assert without_reading(read).split("\nTIME")[0] == hand.split("\nTIME")[0]
    assert "framework preset megatron-core" in read and "megatron-core" in read.split("\nTIME")[1]
    assert "read from megatron (command line), framework preset megatron-core" in read
    assert "--lr, --seed" not in read and "--lr (" in read  # ignored, each with its reason


def test_korthikanti_json_is_the_hand_written_bill_plus_what_was_read(capsys):
    _, read, _ = run(capsys, "bill", "--from", "megatron", KORTHIKANTI_175B, "--json")
    _, hand, _ = run(capsys, "bill", *HAND_175B, "--json")
    read, hand = json.loads(read), json.loads(hand)
    reading = read.pop("read_from")
    # the reading also names its framework preset: the TIME section's preset and its error band (on that
    # framework's published runs); every number of the bill and the step is the hand-written flags'
    assert read["time_model"]["framework"] == "megatron-core" and read["time_model"]["framework_settings"]
    for key in ("framework", "framework_settings"):
        read["time_model"][key] = hand["time_model"][key]
    assert "megatron-core" in read.pop("step_error_band")["text"]
    hand.pop("step_error_band")
    assert read == hand
    assert reading["model"] == "gpt-175b" and reading["framework"] == "megatron-core"
    taken = {row["option"]: row["what"] for row in reading["taken"]}
    assert taken["--tensor-model-parallel-size"] == "tp = 8"
    assert taken["--recompute-activations"].startswith("recompute = selective")
    ignored = {row["option"]: row["what"] for row in reading["ignored"]}
    assert set(ignored) == {"--vocab-file", "--merge-file", "--lr", "--seed", "--log-interval"}
    assumed = {row["option"]: row["what"] for row in reading["assumed"]}
    assert "V = 51,200" in assumed["vocabulary padding"]  # GPT-2's 50,257 padded to 128 × 8
    assert assumed["--overlap-grad-reduce"].startswith("--overlap none")


def test_megatron_gpt3_example_script():
    reading = read_launch("megatron", str(FIXTURES / "megatron_train_gpt3_175b_distributed.sh"))
    assert reading.model_name == "gpt-175b" and reading.model == preset("gpt-175b")
    # torchrun's 1 node × 8 GPUs cannot hold t·p = 128: d = 1 is assumed, and said
    assert reading.layout() == Layout(tp=8, pp=16, dp=1, micro_batch=1, global_batch=1536, dtype="fp16",
                                      optimizer="bf16-adam", optimizer_impl="fused", flash_attention=True)
    assert any(note.option == "dp" and "not a multiple of t·p·c = 128" in note.what for note in reading.assumed)
    assert dict(reading.time_options) == {"overlap": "none"}
    ignored = {note.option for note in reading.ignored}
    assert {"--step-batch-size-schedule", "--data-path", "--nnodes", "--tensorboard-dir"} <= ignored


def test_torchtitan_llama3_70b_toml():
    reading = read_launch("torchtitan", str(FIXTURES / "torchtitan_llama3_70b.toml"))
    assert reading.model_name == "llama-3.1-70b" and reading.framework == "torchtitan"
    # torchtitan's SP is DTensor's: its linear layers keep the all-gathered input (tests/test_per_rank.py)
    assert reading.layout() == Layout(tp=8, sp=True, dp=1, zero=3, micro_batch=8, seq=8192, recompute="full",
                                      dtype="bf16", optimizer="fp32-adam", optimizer_impl="fused",
                                      flash_attention=True, sp_inputs="gathered")


def test_deepspeed_bing_bert_zero2():
    reading = read_launch("deepspeed", str(FIXTURES / "deepspeed_bsz24_fp16_zero2_config.json"))
    assert reading.model is None and reading.framework == "deepspeed"
    # train_batch_size 24 = micro-batch 3 × accumulation 1 × d: d = 8 (DeepSpeed's batch rule)
    assert reading.layout() == Layout(micro_batch=3, global_batch=24, dp=8, zero=2, dtype="fp16",
                                      optimizer="bf16-adam", optimizer_impl="fused")


def test_accelerate_fsdp_template():
    reading = read_launch("accelerate", str(FIXTURES / "accelerate_fsdp.yaml"))
    assert reading.framework == "fsdp" and reading.gpus == 2
    assert reading.layout() == Layout(dp=2, zero=3, dtype="bf16", optimizer="fp32-adam")


def test_megatron_bridge_override_yaml():
    reading = read_launch("megatron-bridge", str(FIXTURES / "bridge_llama32_1b_pretrain.yaml"))
    assert reading.framework == "nemo" and reading.model is None
    assert reading.layout() == Layout(seq=4096, micro_batch=1, global_batch=8, dtype="bf16",
                                      optimizer="bf16-adam-fp32-grads", optimizer_impl="fused", flash_attention=True)
    assert {note.option for note in reading.taken} >= {"tensor_model_parallel_size", "global_batch_size"}


def test_llama_style_megatron_arguments_become_a_model():
    reading = read_launch("megatron", "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
                          "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 8192 "
                          "--position-embedding-type rope --swiglu --normalization RMSNorm --disable-bias-linear "
                          "--untie-embeddings-and-output-weights --attention-dropout 0.0 --hidden-dropout 0.0 "
                          "--vocab-size 128256 --tensor-model-parallel-size 8 --bf16 --grad-reduce-in-bf16 "
                          "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
                          "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                          "--cross-entropy-loss-fusion")
    model = reading.model
    # Llama 3 8B's dimensions, the vocabulary padded to 128 × t = 1024: 128,256 -> 129,024
    assert (model.arch, model.layers, model.hidden, model.kv_heads, model.ffn, model.vocab, model.tied) == \
        ("llama", 32, 4096, 8, 14336, 129024, False)
    assert reading.model_name == ""  # not llama-3-8b: the padded vocabulary differs
    assert reading.layout() == Layout(tp=8, micro_batch=1, dp=1, recompute="full", zero=1, dtype="bf16",
                                      optimizer="bf16-adam", optimizer_impl="fused", flash_attention=True)
    assert dict(reading.time_options) == {"overlap": "default"} and dict(reading.notes) == {"loss": "fused"}


@pytest.mark.parametrize("kind, source, words", [
    ("megatron", "--tensor-model-parallel-size 2 --moe-frobnicate 3", "--moe-frobnicate 3: not an option"),
    ("megatron", "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --vocab-size 100 "
                 "--recompute-granularity full --recompute-method block --recompute-num-layers 1",
     "a partial full recompute is not"),
    ("megatron", "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32", "--vocab-size: missing"),
    ("megatron", "--tensor-model-parallel-size $TP", "a shell variable"),
    ("torchtitan", {"activation_checkpoint": {"mode": "selective"}}, "selective_ac_option 2"),
    ("torchtitan", {"training": {"local_batch_size": 2, "frobnicate": 1}, "activation_checkpoint": {"mode": "none"}}, "training.frobnicate 1: not a key"),
    ("deepspeed", {"zero_optimization": {"stage": "auto"}}, "HF Trainer fills no 'auto' here"),
    ("deepspeed", {"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}, "NVMe offload"),
    ("accelerate", {"distributed_type": "FSDP", "fsdp_config": {"fsdp_sharding_strategy": "HYBRID_SHARD"}},
     "HYBRID_SHARD is not modelled"),
    ("nemo", {"model": {"tensor_model_parallel_size": 2}, "frobnicate": {"x": 1}}, "frobnicate.x 1: not a key"),
    ("caffe", "x", "give one of megatron"),
])
def test_what_is_not_understood_is_refused_in_one_line(kind, source, words):
    with pytest.raises(ConfigError) as error:
        read_launch(kind, source)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_cli_refusal_is_one_line_and_exit_2(capsys):
    code, out, err = run(capsys, "bill", "--from", "megatron", "--tensor-model-parallel-size 2 --frobnicate")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--frobnicate" in err
    code, _, err = run(capsys, "bill", "--from", "deepspeed", str(FIXTURES / "deepspeed_bsz24_fp16_zero2_config.json"))
    assert code == 2 and "give MODEL" in err


def test_a_typed_flag_wins_and_is_listed(capsys):
    code, out, _ = run(capsys, "bill", "--from", "megatron", KORTHIKANTI_175B, "--tp", "4", "--json")
    data = json.loads(out)
    assert code == 0 and data["layout"]["tp"] == 4
    assert data["read_from"]["overrides"] == ["--tp 4 (typed) wins over the config's 8"]


def test_plan_solve_timeline_take_from(capsys):
    code, out, _ = run(capsys, "plan", "--from", "torchtitan", str(FIXTURES / "torchtitan_llama3_70b.toml"),
                       "--gpus", "64", "--gpu-memory", "80GB", "--json")
    data = json.loads(out)
    assert code == 0 and data["read_from"]["model"] == "llama-3.1-70b"
    assert "--tp 8" in data["read_from"]["overrides"][0]
    code, out, _ = run(capsys, "solve", "gpt-7b", "--from", "deepspeed",
                       str(FIXTURES / "deepspeed_bsz24_fp16_zero2_config.json"), "--max", "seq",
                       "--gpu-memory", "80GB", "--json")
    assert json.loads(out)["read_from"]["layout"]["zero"] == 2
    code, out, _ = run(capsys, "timeline", "llama-3-8b", "--from", "accelerate", str(FIXTURES / "accelerate_fsdp.yaml"),
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["layout"]["zero"] == 3 and data["layout"]["dp"] == 2


def test_api_from_launch_bills_as_the_cli():
    reading = symbolic.from_launch("megatron", KORTHIKANTI_175B)
    assert reading.options()["model"] == preset("gpt-175b")
    via_api = symbolic.bill(**reading.options())
    # the reading names its preset (framework=), which fills only what the config did not set
    by_hand = symbolic.bill("gpt-175b", tp=8, pp=8, sp=True, recompute="selective", global_batch=8, dtype="fp16",
                            optimizer_impl="fused", overlap="none", flash_attention=False, framework="megatron-core")
    assert via_api.to_dict() == by_hand.to_dict()
    assert "megatron-core" in via_api.to_dict()["step_error_band"]["text"]
    with pytest.raises(ConfigError):
        symbolic.from_launch("deepspeed", {"fp16": {"enabled": "yes"}}, model="gpt-7b")
    assert reading.layout(tp=4).tp == 4 and isinstance(reading.layout().moe_capacity, Fraction)


@pytest.mark.parametrize("config, recipe", [
    ({"bf16": {"enabled": True}}, "bf16-adam-fp32-grads"),  # no ZeRO: BF16_Optimizer's fp32 gradient buffer
    ({"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}, "bf16-adam"),
    ({"bf16": {"enabled": True}, "zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp32"}},
     "bf16-adam-fp32-grads"),
    ({"fp16": {"enabled": True}, "zero_optimization": {"stage": 3}}, "bf16-adam"),
    ({}, "fp32-adam"),
])
def test_deepspeed_gradient_dtype_follows_its_engine(config, recipe):
    """deepspeed/runtime/engine.py get_data_types: bf16 without ZeRO accumulates in fp32, else the model dtype."""
    assert read_launch("deepspeed", config).fields["optimizer"] == recipe


def test_deepspeed_accumulation_without_a_total_batch():
    reading = read_launch("deepspeed", {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})
    assert reading.layout() == Layout(micro_batch=2, global_batch=8, dtype="fp32", optimizer="fp32-adam")


def test_megatron_sequence_parallel_is_off_at_t_1():
    reading = read_launch("megatron", "--sequence-parallel --micro-batch-size 2")
    assert "sp" not in reading.fields
    assert [note.what for note in reading.ignored] == ["arguments.py turns it off when t = 1"]


def test_accelerate_deepspeed_template_reads_the_ds_config_it_names():
    reading = read_launch("accelerate", str(FIXTURES / "accelerate" / "config_yaml_templates" / "deepspeed.yaml"))
    assert reading.framework == "deepspeed"
    # torch_adam: true is torch.optim's AdamW (foreach), not FusedAdam; "auto" batches are HF Trainer's
    # (per_device_train_batch_size 8, gradient_accumulation_steps 1)
    assert reading.layout() == Layout(dp=2, micro_batch=8, zero=1, dtype="fp16", optimizer="bf16-adam",
                                      optimizer_impl="foreach")
    assumed = {note.option for note in reading.assumed}
    assert {"train_micro_batch_size_per_gpu", "train_batch_size"} <= assumed
    assert "zero_stage1_config.json: optimizer.params.lr" in {note.option for note in reading.ignored}


def test_the_launch_reader_and_the_preset_read_megatron_alike(capsys):
    """Issue 41: the same flags through ``--framework megatron-core`` billed the foreach optimizer's fp32
    temporaries (10.9 GB more) where the launch reader takes Megatron's FusedAdam; the preset now sets the
    fused step too, and the two readings give one verdict."""
    # today's Megatron attention (the default backend, a fused kernel) on both sides
    _, read, _ = run(capsys, "bill", "--from", "megatron", KORTHIKANTI_175B.replace(" --attention-backend unfused", ""),
                     "--json")
    flags = [x for x in HAND_175B if x not in ("--optimizer-impl", "fused")]
    _, preset, _ = run(capsys, "bill", *flags, "--framework", "megatron-core", "--json")
    read, preset = json.loads(read), json.loads(preset)
    assert read["total_bytes"] == preset["total_bytes"]


def test_timeline_reads_what_a_launch_config_sets_of_the_optimizer_step(capsys):
    """timeline had no --optimizer-impl, so every reader that sets it (torchtitan's fused step, Megatron's
    FusedAdam) was refused by `timeline --from`: it now takes it, as the bill does."""
    assert main(["timeline", "--from", "torchtitan", str(FIXTURES / "torchtitan_llama3_70b.toml"), "--brief"]) == 0
    assert main(["timeline", "--from", "megatron", KORTHIKANTI_175B, "--brief"]) == 0
    assert "does not model it" not in capsys.readouterr().err


@pytest.mark.parametrize("strategy, zero", [(None, 3), ("optim_grads_params", 3), ("optim_grads", 2), ("optim", 1),
                                            ("no_shard", 0)])
def test_megatron_fsdp_shards_what_its_strategy_names(strategy, zero):
    """--use-megatron-fsdp (issue 44): data_parallel_sharding_strategy (default optim_grads_params,
    arguments.py @d98e8a6) -> the ZeRO stage of the same kinds; a wrong strategy is one line."""
    line = "--use-megatron-fsdp --bf16 --micro-batch-size 1" + (
        f" --data-parallel-sharding-strategy {strategy}" if strategy else "")
    reading = read_launch("megatron", line)
    assert reading.fields["zero"] == zero and reading.fields["optimizer"] == "bf16-adam-fp32-grads"
    assert any(note.option == "--use-megatron-fsdp" and "Megatron-FSDP" in note.what for note in reading.taken)
    with pytest.raises(ConfigError, match="data-parallel-sharding-strategy optim_everything: give one of"):
        read_launch("megatron", "--use-megatron-fsdp --data-parallel-sharding-strategy optim_everything")


def test_megatron_fsdp_strategy_alone_is_ignored_aloud():
    reading = read_launch("megatron", "--data-parallel-sharding-strategy optim --micro-batch-size 1")
    assert "zero" not in reading.fields
    assert any(note.option == "--data-parallel-sharding-strategy" for note in reading.ignored)


#: Megatron-LM's own FSDP2 test (tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp2_pp1_fsdp2_resume_torch_dist/
#: model_config.yaml at d98e8a64): its model, batch, parallel and precision arguments, with the vocabulary given
#: (its vocab file is not here) and 8 GPUs.
FSDP2 = ("--num-layers 12 --hidden-size 512 --num-attention-heads 8 --micro-batch-size 4 --global-batch-size 32 "
         "--seq-length 1024 --max-position-embeddings 1024 --vocab-size 50304 --tensor-model-parallel-size 2 "
         "--pipeline-model-parallel-size 1 --use-torch-fsdp2 --untie-embeddings-and-output-weights "
         "--no-gradient-accumulation-fusion --ckpt-format torch_dist --bf16 --nproc_per_node 8")


def test_megatron_torch_fsdp2_is_zero3_with_bf16_gradients():
    reading = read_launch("megatron", FSDP2)
    layout = reading.layout()
    assert (layout.zero, layout.optimizer, layout.dp, layout.tp) == (3, "bf16-adam", 4, 2)
    assert dict(reading.time_options)["overlap"] == "default"
    taken = {row.option: row.what for row in reading.taken}
    assert "+2 B per parameter per d·c rank" in taken["--use-torch-fsdp2"]


@pytest.mark.parametrize("change, words", [
    (("--no-gradient-accumulation-fusion", ""), "gradient accumulation fusion"),
    (("--untie-embeddings-and-output-weights", ""), "requires --untie-embeddings-and-output-weights"),
    (("--bf16", "--fp16"), "not supported with fp16"),
    (("--pipeline-model-parallel-size 1", "--pipeline-model-parallel-size 2"), "pipeline parallelism"),
    (("--bf16", "--bf16 --use-distributed-optimizer"), "distributed optimizer"),
    (("--bf16", "--bf16 --torch-fsdp2-no-reshard-after-forward"), "without resharding"),
])
def test_megatron_torch_fsdp2_refuses_what_megatron_refuses(change, words):
    with pytest.raises(ConfigError) as error:
        read_launch("megatron", FSDP2.replace(*change))
    assert words in str(error.value) and "\n" not in str(error.value)


#: Megatron-LM's optimizer CPU offload as its README (megatron/core/optimizer/cpu_offloading/README.md at d98e8a64)
#: says to enable it, on the distributed optimizer it needs.
CPU_OFFLOAD = ("--num-layers 12 --hidden-size 512 --num-attention-heads 8 --micro-batch-size 4 --global-batch-size 32 "
               "--seq-length 1024 --max-position-embeddings 1024 --vocab-size 50304 --bf16 --nproc_per_node 8 "
               "--use-distributed-optimizer --optimizer-cpu-offload --optimizer-offload-fraction 1.0 "
               "--use-precision-aware-optimizer --overlap-cpu-optimizer-d2h-h2d")


def test_megatron_optimizer_cpu_offload_keeps_the_gradients_on_the_gpu(capsys):
    reading = read_launch("megatron", CPU_OFFLOAD)
    layout = reading.layout()
    assert (layout.offload, layout.zero, layout.optimizer) == ("optimizer-states", 1, "bf16-adam-fp32-grads")
    assert main(["bill", "--from", "megatron", CPU_OFFLOAD, "--json"]) == 0
    lines = {line["name"]: line for line in json.loads(capsys.readouterr().out)["lines"]
             if line["ledger"] == "model_states"}
    # HybridDeviceOptimizer: the DDP buffer's fp32 gradients and the bf16 weights stay; master, m, v go to the CPU
    assert {"bf16 parameters", "fp32 gradients"} <= set(lines)
    assert not {"fp32 master parameters", "Adam m (fp32)", "Adam v (fp32)"} & set(lines)


@pytest.mark.parametrize("change, words", [
    (("--use-precision-aware-optimizer", ""), "in conjunction with --use-precision-aware-optimizer"),
    (("--use-distributed-optimizer", ""), "only supported with distributed optimizer"),
    (("--optimizer-offload-fraction 1.0", "--optimizer-offload-fraction 0.5"), "a partial offload"),
])
def test_megatron_optimizer_cpu_offload_refuses_what_megatron_refuses(change, words):
    with pytest.raises(ConfigError) as error:
        read_launch("megatron", CPU_OFFLOAD.replace(*change))
    assert words in str(error.value) and "\n" not in str(error.value)
