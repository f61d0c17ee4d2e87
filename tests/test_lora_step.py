"""The step time of a LoRA run (issue 21): frozen weights skip their weight-gradient GEMMs, the
optimizer step and the data-parallel reduce cover the adapters only, a quantised base pays its
dequantisation — a memory pass per weight read."""
import json

from symbolic.cli import main


def _bill(capsys, *argv):
    assert main(["bill", "llama-3-8b", "--gpu-memory", "80GB", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _lines(data):
    return {line["name"]: line for line in data["time_model"]["compute"]}


def test_lora_steps_faster_than_full_fine_tuning_and_qlora_pays_its_dequantisation(capsys):
    from symbolic.ledgers.hardware import load

    full, lora, qlora = (_bill(capsys, *extra) for extra in ((), ("--lora", "16"),
                                                              ("--lora", "16", "--base-dtype", "nf4")))
    assert lora["step_seconds"] < qlora["step_seconds"] < full["step_seconds"]
    # the optimizer steps 16-rank adapters, not 8 billion weights
    assert lora["time_breakdown"]["optimizer"] < full["time_breakdown"]["optimizer"] / 100
    dequant = _lines(qlora)["lora/dequantise the nf4 base (a memory pass per weight read)"]
    # Llama-3-8B's layer weight matrices: 32 × (2·4096² + 2·4096·1024 + 3·4096·14336) elements, read
    # twice per micro-batch (forward, input gradient), each read 0.5 B packed + 2 B bf16 written
    elements = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    hw = load("a100-80gb")
    from symbolic.ledgers.kernels import for_hardware

    tables = for_hardware(hw.name, hw.peak_bf16_flops)  # the memory-bound kernels at their measured efficiency
    efficiency = hw.hbm_efficiency if tables is None else tables.memory_efficiency
    assert abs(dequant["seconds"] - 2 * elements * 2.5 / (hw.hbm_bandwidth * efficiency)) < 1e-12
    assert dequant["flops_on_pacing_stage"] == 0
    # the rest of the step is LoRA's: the dequantisation is the whole difference
    assert abs(qlora["step_seconds"] - lora["step_seconds"] - dequant["seconds"]) < 1e-9
    assert "lora/adapters (x·A, (A·x)·B: forward, input and weight gradients)" in _lines(lora)


def test_the_frozen_weights_skip_their_weight_gradients(capsys):
    full, lora = _lines(_bill(capsys)), _lines(_bill(capsys, "--lora", "16"))
    for name, line in full.items():
        if name.startswith("layer/mlp/"):  # a weight GEMM: forward + two backward GEMMs -> forward + one
            assert abs(lora[name]["flops_on_pacing_stage"] * 3 - line["flops_on_pacing_stage"] * 2) \
                <= 1e-9 * line["flops_on_pacing_stage"]
