"""``--from axolotl`` and ``--from llamafactory``: the fine-tuners' own YAML, copied unchanged from their
repositories (tests/fixtures/launch/PROVENANCE.md), billed with each fine-tuner's defaults read in its
code (symbolic/layout/launch/axolotl.py, llamafactory.py)."""
import json
from pathlib import Path

import pytest

from symbolic.cli import main
from symbolic.layout.launch import read_launch
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "launch"
AXOLOTL = FIXTURES / "axolotl"
LLAMAFACTORY = FIXTURES / "llamafactory" / "examples"


def test_axolotl_qlora_8b_reads_the_single_gpu_qlora_run():
    reading = read_launch("axolotl", str(AXOLOTL / "qlora.yml"))
    assert reading.model_name == "llama-3-8b"  # NousResearch/Meta-Llama-3-8B: the same repository name, said so
    fields = reading.fields
    assert (fields["lora"], fields["base_dtype"], fields["lora_targets"]) == (32, "nf4", "all-linear")
    assert (fields["micro_batch"], fields["global_batch"], fields["seq"], fields["recompute"]) == (2, 8, 4096, "full")
    assert (fields["optimizer"], fields["optimizer_impl"], fields["dtype"]) == ("fp32-adam", "fused", "bf16")
    dropout = next(note.what for note in reading.assumed if note.option == "lora_dropout")
    # b·s·(6h + f)·3 B for one layer during its recompute: 2·4096·(6·4096 + 14336)·3 B
    assert "approximation" in dropout and f"{2 * 4096 * (6 * 4096 + 14336) * 3 / 1e9:.2f} GB" in dropout
    assert reading.framework is None


def test_axolotl_qlora_bills_from_the_command_line(capsys):
    assert main(["bill", "--from", "axolotl", str(AXOLOTL / "qlora.yml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["lora"] == 32 and data["read_from"]["kind"] == "axolotl"


def test_axolotl_1b_with_model_given_and_8bit_adam():
    reading = read_launch("axolotl", str(AXOLOTL / "qlora-1b.yml"), preset("llama-3-8b"))
    fields = reading.fields
    assert fields["lora_targets"] == "all-linear" and fields["optimizer"] == "adam8bit"  # the module list: every linear
    assert fields["seq"] == 2048


def test_axolotl_modules_to_save_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^--from axolotl: lora_modules_to_save embed_tokens,lm_head: "):
        read_launch("axolotl", str(AXOLOTL / "lora-8b.yml"))


def test_axolotl_full_bf16_fine_tune_needs_a_typed_optimizer(capsys):
    path = str(AXOLOTL / "fft-8b.yaml")
    assert main(["bill", "llama-3-8b", "--from", "axolotl", path, "--brief"]) == 2
    assert "no fp32 master copy" in capsys.readouterr().err
    assert main(["bill", "llama-3-8b", "--from", "axolotl", path, "--optimizer", "bf16-adam", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["optimizer"] == "bf16-adam" and data["layout"]["seq"] == 8192


def test_llamafactory_lora_sft_is_hf_trainers_run_with_llamafactorys_defaults():
    reading = read_launch("llamafactory", str(LLAMAFACTORY / "train_lora" / "qwen3_lora_sft.yaml"), preset("qwen3-8b"))
    fields = reading.fields
    assert (fields["lora"], fields["lora_targets"], fields["seq"]) == (8, "all-linear", 2048)
    assert (fields["micro_batch"], fields["global_batch"]) == (1, 8)
    assert fields["recompute"] == "full"  # disable_gradient_checkpointing defaults to False
    assert (fields["optimizer"], fields["optimizer_impl"], fields["dtype"]) == ("fp32-adam", "fused", "bf16")


def test_llamafactory_qlora_on_the_fly():
    reading = read_launch("llamafactory", str(LLAMAFACTORY / "train_qlora" / "qwen3_lora_sft_otfq.yaml"),
                          preset("qwen3-8b"))
    assert reading.fields["base_dtype"] == "nf4" and reading.fields["double_quant"] is True


def test_llamafactory_deepspeed_section_fills_auto_with_its_own_values():
    reading = read_launch("llamafactory", str(LLAMAFACTORY / "train_lora" / "qwen3_lora_sft_ds3.yaml"),
                          preset("qwen3-8b"))
    fields = reading.fields
    assert reading.framework == "deepspeed" and fields["zero"] == 3
    assert fields["micro_batch"] == 1 and fields["dtype"] == "bf16"  # the YAML's, not HF's defaults (8, fp32)


def test_llamafactory_duplicate_key_is_refused_as_omegaconf_does(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen3-8B\nlora_rank: 8\nlora_rank: 16\n")
    with pytest.raises(ConfigError, match="given twice"):
        read_launch("llamafactory", str(path))


def test_llamafactory_reward_stage_is_refused():
    with pytest.raises(ConfigError, match="^--from llamafactory: stage rm: "):
        read_launch("llamafactory", {"model_name_or_path": "Qwen/Qwen3-8B", "stage": "rm"})


@pytest.mark.parametrize("kind, path", [("megatron", AXOLOTL / "qlora.yml"),
                                        ("megatron", LLAMAFACTORY / "train_lora" / "qwen3_lora_sft.yaml")])
def test_a_fine_tuners_yaml_read_as_megatron_is_refused(kind, path):
    with pytest.raises(ConfigError, match="not a Megatron launch file"):
        read_launch(kind, str(path))


def test_a_yaml_of_another_kind_is_refused_as_axolotl():
    with pytest.raises(ConfigError, match="base_model: missing: not an axolotl config"):
        read_launch("axolotl", str(FIXTURES / "accelerate_fsdp.yaml"))
