"""Framework presets (symbolic/layout/frameworks.py): each default cited, printed, and priced."""
import json
import re

import pytest

from symbolic.cli import main
from symbolic.layout.frameworks import FRAMEWORKS, LOSS_KERNELS, MAIN_GRADS, framework
from symbolic.models.config import ConfigError


def test_every_setting_of_every_preset_names_its_source():
    assert set(FRAMEWORKS) == {"megatron-core", "nemo", "torchtitan", "fsdp", "deepspeed", "llm-foundry"}
    for preset in FRAMEWORKS.values():
        assert preset.loss in LOSS_KERNELS and preset.main_grads in MAIN_GRADS and preset.attention in ("fused", "unfused")
        settings = preset.settings()
        assert len(settings) == 8
        for name, value, source in settings:
            # a repository at a commit, the installed PyTorch/transformers, or a stated approximation
            assert re.search(r"@[0-9a-f]{8}|PyTorch 2\.13|named approximation|no tensor parallelism", source), (
                preset.name, name, source)
    # Megatron-Core's own defaults: nothing overlapped, no distributed optimizer, fp32 main grads.
    mcore = FRAMEWORKS["megatron-core"]
    assert (mcore.tp_comm_overlap, mcore.grad_reduce_overlap, mcore.param_gather_overlap, mcore.zero) == (False,) * 3 + (0,)
    assert mcore.loss == "vocab-parallel" and mcore.main_grads == "fp32"
    assert FRAMEWORKS["deepspeed"].bucket_elements == 500_000_000
    with pytest.raises(ConfigError, match="choose one of megatron-core"):
        framework("megatron")


def test_bill_with_a_preset_prices_its_defaults_and_prints_them(capsys):
    assert main(["bill", "llama-3-8b", "--dp", "8", "--hardware", "h100", "--framework", "nemo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["zero"] == 1              # NeMo's distributed optimizer
    model = data["time_model"]
    assert model["framework"] == "nemo" and "DP grad reduce" in model["overlap"]
    assert {s["setting"]: s["value"] for s in model["framework_settings"]}["loss"] == "fused"
    assert "nemo H100-SXM5-80GB runs" in data["step_error_band"]["text"]
    # An explicit --overlap wins over the preset's.
    assert main(["bill", "llama-3-8b", "--dp", "8", "--hardware", "h100", "--framework", "nemo", "--overlap", "none",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_model"]["overlap"] == "no overlap"
    assert main(["bill", "gpt-7b", "--framework", "megatron-core"]) == 0
    out = capsys.readouterr().out
    assert "framework preset megatron-core (--framework)" in out and "cross_entropy_loss_fusion: bool = False" in out
    assert main(["bill", "gpt-7b", "--framework", "nope"]) != 0
    assert "argument --framework: invalid choice: 'nope' (choose from 'megatron-core', 'nemo'" in capsys.readouterr().err


def test_plan_takes_the_presets_overlap_and_attention_kernel(capsys):
    assert main(["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--global-batch", "16",
                 "--framework", "megatron-core", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hardware"]["overlap"] == "no overlap" and data["flash_attention"] is True
