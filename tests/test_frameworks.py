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
        # the eight shared settings, what a sequence-parallel linear layer keeps where the framework runs TP, and
        # the optimizer step's implementation
        tensor_parallel = preset.name in ("megatron-core", "nemo", "torchtitan", "fsdp")
        assert [name for name, _, _ in settings][8:] == (["sp_inputs"] if tensor_parallel else []) + ["optimizer_impl"]
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


def test_torchtitan_preset_bills_fsdp_mixed_precision_states_at_rest():
    # FSDP2's MixedPrecisionPolicy keeps the fp32 sharded parameter as the master and computes on bf16
    # copies gathered per group (measured per rank: symbolic/per_rank_states.py): fp32-adam's blocks at rest,
    # as the torchtitan launch reader reads a job; gathered in bf16, as before.
    from symbolic.bill.derive import make_bill
    from symbolic.layout.frameworks import apply_preset
    from symbolic.layout.layout import Layout
    from symbolic.models.builtin import preset

    titan = FRAMEWORKS["torchtitan"]
    assert titan.fp32_params and "fp32_params" in titan.sources
    assert apply_preset(Layout(dp=8), titan).layout.optimizer == "fp32-adam"
    assert apply_preset(Layout(dp=1), titan).layout.optimizer == "fp32-adam"   # one device: autocast, fp32 model
    assert apply_preset(Layout(dp=8, optimizer="bf16-adam"), titan, typed={"optimizer"}).layout.optimizer == "bf16-adam"
    assert apply_preset(Layout(dp=8), FRAMEWORKS["megatron-core"]).layout.optimizer == "bf16-adam-fp32-grads"
    model = preset("llama-3-8b")
    fsdp = make_bill(model, Layout(dp=8, zero=3, optimizer="fp32-adam"))
    mixed = make_bill(model, Layout(dp=8, zero=3, optimizer="bf16-adam"))
    states = {line.name: line.value for line in fsdp.ledger("model_states")}
    assert set(states) == {"fp32 parameters", "fp32 gradients", "Adam m (fp32)", "Adam v (fp32)"}

    def gathered(bill):
        return [line.value for line in bill.ledger("communication") if line.name.startswith("ZeRO-3 gathered")]
    assert gathered(fsdp) == gathered(mixed) != []   # the bf16 working copy, not the fp32 shard


def test_working_bytes_are_the_narrower_of_stored_and_compute():
    from symbolic.layout.recipes import LOW_PRECISION_RECIPES, RECIPES

    assert RECIPES["fp32-adam"].working_bytes("bf16") == 2 and RECIPES["fp32-adam"].working_bytes("fp32") == 4
    assert RECIPES["bf16-adam"].working_bytes("bf16") == 2
    assert {r.name: r.working_bytes("bf16") for r in LOW_PRECISION_RECIPES}["fp8-adam"] == 1
    # FP8 activations cast inside each GEMM: the gathered copy stays bf16 (or the FP8 parameters)
    assert RECIPES["bf16-adam"].working_bytes("fp8") == 2 and RECIPES["fp32-adam"].working_bytes("fp8") == 2


def _layout_line(argv, capsys) -> str:
    assert main(argv + ["--brief"]) == 0
    return re.sub(r"\s+", " ", " ".join(capsys.readouterr().out.splitlines()[1:]))  # the wrapped line, joined


def test_a_layout_only_a_distributed_framework_runs_takes_megatron_cores_defaults_and_says_so(capsys):
    """Issue 41: t, p, c or e > 1 of an HF config is not priced as a single-process transformers run; the layout
    line says which framework's defaults were assumed, and --framework none keeps the bill's own."""
    for flags, why in ((["--tp", "8"], "t=8"), (["--pp", "4"], "p=4"), (["--cp", "2", "--dp", "2"], "c=2")):
        line = _layout_line(["bill", "llama-3-8b", "--gpu", "h100", *flags], capsys)
        assert f"megatron-core's defaults, assumed ({why} runs under a distributed framework" in line, line
        assert "bf16-adam-fp32-grads" in line and "fused optimizer step" in line
    assert main(["bill", "llama-3-8b", "--gpu", "h100", "--tp", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["framework_preset"]["inferred"] == "t=8 runs under a distributed framework"
    assert data["time_model"]["framework"] == "megatron-core"
    # the assumed preset is the named one's bill, and `none` is the bill without a preset
    named = _layout_line(["bill", "llama-3-8b", "--gpu", "h100", "--tp", "8", "--framework", "megatron-core"], capsys)
    assumed = _layout_line(["bill", "llama-3-8b", "--gpu", "h100", "--tp", "8"], capsys)
    assert re.search(r"VERDICT[^%]*", named).group() == re.search(r"VERDICT[^%]*", assumed).group()
    none = _layout_line(["bill", "llama-3-8b", "--gpu", "h100", "--tp", "8", "--framework", "none"], capsys)
    assert "megatron-core" not in none and "bf16-adam," in none
    # a Transformer Engine FP8 recipe is run by Megatron-Core / NeMo too, at any layout
    line = _layout_line(["bill", "llama-3-8b", "--gpu", "h100", "--dp", "8", "--zero", "1", "--dtype", "fp8"], capsys)
    assert "megatron-core's defaults, assumed (fp8-delayed is a Transformer Engine recipe" in line, line
    # kept as they are: one GPU, data parallelism alone (HF Trainer's DeepSpeed/FSDP), the papers' GPT models
    for argv in (["llama-3-8b"], ["llama-3-8b", "--dp", "8", "--zero", "3"], ["gpt-175b", "--tp", "8", "--pp", "8"]):
        assert "assumed (" not in _layout_line(["bill", *argv, "--gpu", "h100"], capsys), argv


def test_the_api_assumes_the_framework_the_cli_does():
    import symbolic

    cli = symbolic.bill("llama-3-8b", tp=8, gpu="h100")
    assert cli.engine.preset.framework == "megatron-core" and cli.engine.preset.inferred.startswith("t=8")
    assert symbolic.bill("llama-3-8b", tp=8, gpu="h100", framework="none").engine.preset is None
    assert symbolic.bill("llama-3-8b", tp=8, gpu="h100", framework="megatron-core").total_bytes == cli.total_bytes
