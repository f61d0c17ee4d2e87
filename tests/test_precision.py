"""Precision recipes: FP8 working weights, BF16/FP8 Adam moments (seed 004 §05.1, DeepSeek-V3
§3.3.3) and the linear layers' saved inputs kept in FP8 (Transformer Engine, DeepSeek-V3 §3.3.3)."""
import json
import random

import pytest
from sympy import expand

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.core.dims import a, b, h, s, t
from symbolic.core.tensors import DTYPE_BYTES
from symbolic.layout.layout import Layout
from symbolic.layout.recipes import LOW_PRECISION_RECIPES, RECIPES, STATE_DTYPE_BYTES
from symbolic.layout.strategies import FP8_GEMM_INPUTS, Strategy, fp8_gemm_inputs
from symbolic.ledgers import activations
from symbolic.models.architectures import gpt, llama, moe
from symbolic.models.builtin import preset
from symbolic.search.plan import plan

GB = 10**9


def test_state_dtype_widths_are_the_tensor_table():
    for dtype, width in STATE_DTYPE_BYTES.items():
        assert DTYPE_BYTES[dtype] == width


# Each recipe's blocks as (dtype, kind), written from the sources, not from the recipe module.
DTYPES = {
    "fp8-adam": [("fp8", "parameters"), ("bf16", "gradients"), ("fp32", "optimizer"), ("fp32", "optimizer"),
                 ("fp32", "optimizer")],
    "bf16-adam-bf16-moments": [("bf16", "parameters"), ("bf16", "gradients"), ("fp32", "optimizer"),
                               ("bf16", "optimizer"), ("bf16", "optimizer")],
    "fp8-adam-bf16-moments": [("fp8", "parameters"), ("bf16", "gradients"), ("fp32", "optimizer"),
                              ("bf16", "optimizer"), ("bf16", "optimizer")],
    "fp8-adam-fp8-moments": [("fp8", "parameters"), ("bf16", "gradients"), ("fp32", "optimizer"),
                             ("fp8", "optimizer"), ("fp8", "optimizer")],
    # DeepSeek-V3 §3.3.3: master weights and gradients in fp32, AdamW moments in bf16.
    "deepseek-v3": [("bf16", "parameters"), ("fp32", "gradients"), ("fp32", "optimizer"), ("bf16", "optimizer"),
                    ("bf16", "optimizer")],
}


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_low_precision_recipe_bytes_fall_out_of_the_dtypes(name):
    recipe = RECIPES[name]
    assert [block.kind for block in recipe.blocks] == [kind for _, kind in DTYPES[name]]
    assert recipe.bytes_per_param == sum(DTYPE_BYTES[dtype] for dtype, _ in DTYPES[name])
    for kind in ("parameters", "gradients", "optimizer"):
        assert recipe.bytes_of(kind) == sum(DTYPE_BYTES[d] for d, k in DTYPES[name] if k == kind)


def test_the_low_precision_sums():
    assert {r.name: r.bytes_per_param for r in LOW_PRECISION_RECIPES} == {
        "fp8-adam": 15, "bf16-adam-bf16-moments": 12, "fp8-adam-bf16-moments": 11, "fp8-adam-fp8-moments": 9,
        "deepseek-v3": 14}


def test_fp8_working_weights_halve_the_weights_and_keep_the_master_copy():
    # Seed 004 §05.1: "单 weights 一项再省 2×；FP32 master weight 仍保持高精度".
    assert RECIPES["bf16-adam"].bytes_of("parameters") == 2 * RECIPES["fp8-adam"].bytes_of("parameters")
    assert RECIPES["fp8-adam"].bytes_of("optimizer") == RECIPES["bf16-adam"].bytes_of("optimizer")


def test_every_low_precision_recipe_bills_on_the_expert_grid():
    model = preset("mixtral-8x7b")
    layout = Layout(seq=4096, ep=8, dp=8, zero=1)
    base = make_bill(model, layout).totals["model_states_bytes"]
    for recipe in LOW_PRECISION_RECIPES:
        bill = make_bill(model, Layout(seq=4096, ep=8, dp=8, zero=1, optimizer=recipe.name))
        assert (bill.totals["model_states_bytes"] < base) == (recipe.bytes_per_param < 16)


# --- FP8 GEMM inputs --------------------------------------------------------------------------------

def _coefficients(expr):
    return dict(expand(expr / (s * b * h)).as_coefficients_dict())


def test_gpt_layer_under_tp_with_fp8_linear_inputs():
    """Korthikanti Eq 2 is sbh(10 + 24/t + 5as/(ht)); the FP8 copies halve qkv_input and fc1_input
    (sbh each, replicated) and fc2_input (4sbh/t of 8sbh/t): sbh(8 + 20/t + 5as/(ht))."""
    per_layer = activations.per_layer(Strategy(tensor_parallel=True, fp8_gemm_inputs=True))
    assert _coefficients(per_layer) == {1: 8, 1 / t: 20, a * s / (h * t): 5}


def test_only_the_gemm_inputs_change_and_they_go_to_one_byte():
    for inventory in (gpt.saved_tensors(), llama.saved_tensors(), moe.saved_tensors(shared_experts=1)):
        converted = fp8_gemm_inputs(inventory)
        for before, after in zip(inventory, converted):
            gemm_input = before.name in ("attention/qkv_input", "mlp/fc1_input", "mlp/fc2_input",
                                         "mlp/gate_up_input", "mlp/down_input", "moe/expert/input",
                                         "moe/expert/down_input", "moe/shared/down_input")
            assert (after.dtype == "fp8") == gemm_input, before.name
            assert after.bytes == (before.elements if gemm_input else before.bytes)
    kept = {x.name: x.dtype for x in fp8_gemm_inputs(moe.saved_tensors())}
    assert kept["moe/router_input"] == "bf16" and kept["attention/projection_input"] == "bf16"
    assert FP8_GEMM_INPUTS  # the patterns are data


def test_fp8_linear_inputs_whatever_the_float_dtype():
    strategy = Strategy(tensor_parallel=True, dtype="fp32", fp8_gemm_inputs=True)
    kept = {x.name: x for x in activations.layer_inventory(strategy)}
    assert kept["mlp/fc2_input"].bytes_per_element == 1 and kept["mlp/gelu_input"].bytes_per_element == 4


def test_bill_with_fp8_activations_saves_exactly_the_linear_inputs_half():
    model = preset("mixtral-8x7b")
    plain, fp8 = (make_bill(model, Layout(seq=4096, tp=2, sp=True, ep=4, dp=4, fp8_activations=on))
                  for on in (False, True))
    before = {line.name: line.value for line in plain.lines if line.ledger == "activations"}
    after = {line.name: line.value for line in fp8.lines if line.ledger == "activations"}
    changed = {name for name in before if after[name] != before[name]}
    assert changed == {"attention/qkv_input", "moe/expert/input", "moe/expert/down_input"}
    for name in changed:
        assert 2 * after[name] == before[name]
    assert "FP8" in fp8.strategy


def test_cli_fp8_activations_and_plan_agree_with_the_bill(capsys):
    assert main(["bill", "llama-2-7b", "--seq", "4096", "--tp", "2", "--fp8-activations", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    model = preset("llama-2-7b")
    assert data["activation_bytes"] == make_bill(model, Layout(seq=4096, tp=2, fp8_activations=True)).totals[
        "activation_bytes"]
    result = plan(model, 8, 80 * GB, seq=4096, optimizer="fp8-adam-bf16-moments", fp8_activations=True)
    listed = result.ranked(0)
    for item in random.Random(3).sample(listed, 5) + listed[:2]:
        assert item.layout.fp8_activations
        assert item.totals["total_bytes"] == make_bill(model, item.layout).totals["total_bytes"]


def test_derive_fp8_activations(capsys):
    assert main(["derive", "activations", "--tp", "--fp8-activations"]) == 0
    assert "8 + 20/t" in capsys.readouterr().out


def test_a_composed_gated_mlp_input_is_kept_in_fp8():
    """Qwen3's gated MLP saves one input for its gate and up projections (``mlp/input``): under FP8
    GEMM inputs it is stored in FP8, as Llama's ``mlp/gate_up_input``."""
    from symbolic.bill.derive import inventories
    from symbolic.layout.strategies import fp8_gemm_inputs
    from symbolic.models.builtin import preset

    saved = fp8_gemm_inputs(inventories(preset("qwen3-8b"))[1])
    assert saved["mlp/input"].dtype == "fp8" and saved["mlp/down_input"].dtype == "fp8"
    assert saved["mlp/norm_input_fp32"].dtype == "fp32"


# --- precision as one recipe (issue 42): TE's recipes at d0067d0d, Megatron-Core's default at d98e8a64 ----------

from fractions import Fraction  # noqa: E402

from symbolic.layout.precision import DEFAULT_FP8, MEGATRON_RECIPES, PRECISIONS, read_precision  # noqa: E402
from symbolic.ledgers.hardware import load as load_hardware  # noqa: E402
from symbolic.models.config import ConfigError  # noqa: E402

LLAMA = dict(dp=8, zero=1)


def _llama_linear_weights(model):
    """Llama 3 8B's layers' linear weights from its config, not from the inventory: q, o h·h; k, v g·(h/a)·h;
    gate, up, down f·h — per layer, times L."""
    h, a, g, f, L = model.hidden, model.heads, model.kv_heads, model.ffn, model.layers
    return L * (2 * h * h + 2 * g * (h // a) * h + 3 * f * h), L * 7


def _states(layout, model=None):
    bill = make_bill(model or preset("llama-3-8b"), layout)
    return {line.name: Fraction(line.value) for line in bill.lines if line.ledger == "model_states"}


def test_megatrons_default_fp8_recipe_is_delayed_scaling_with_the_hybrid_format():
    # Megatron-Core TransformerConfig.fp8_recipe = "delayed"; TE DelayedScaling.fp8_format = Format.HYBRID
    assert DEFAULT_FP8 == "fp8-delayed" and MEGATRON_RECIPES["delayed"] == DEFAULT_FP8
    assert PRECISIONS[DEFAULT_FP8].passes() == {"fprop": "E4M3 × E4M3", "dgrad": "E5M2 × E4M3",
                                                "wgrad": "E5M2 × E4M3"}
    # Float8BlockScaling and MXFP8BlockScaling default to Format.E4M3 in every pass; NVFP4 to E2M1
    for name in ("fp8-blockwise", "mxfp8"):
        assert set(PRECISIONS[name].passes().values()) == {"E4M3 × E4M3"}
    assert set(PRECISIONS["nvfp4"].passes().values()) == {"E2M1 × E2M1"}
    assert {name: Layout(precision=name).gemm_dtype for name in PRECISIONS} == {
        "bf16": "bf16", "fp8-delayed": "fp8", "fp8-current": "fp8", "fp8-blockwise": "fp8", "mxfp8": "fp8",
        "nvfp4": "fp4"}
    assert all(Layout(precision=name).fp8_activations == (name != "bf16") for name in PRECISIONS)


def test_dtype_fp8_and_fp8_activations_read_as_the_default_recipe():
    assert (read_precision("fp8", None).dtype, read_precision("fp8", None).precision) == ("bf16", DEFAULT_FP8)
    assert read_precision("bf16", None, True).precision == DEFAULT_FP8
    assert read_precision("fp8", "fp8-current").precision == "fp8-current"
    assert read_precision("bf16", None).precision == "bf16" and read_precision("fp16", None).dtype == "fp16"
    with pytest.raises(ConfigError, match="--precision bf16"):
        read_precision("fp8", "bf16")
    with pytest.raises(ConfigError, match="precision must be one of"):
        read_precision("bf16", "fp9")


def test_delayed_scaling_keeps_an_fp8_copy_its_transpose_and_amax_histories():
    model = preset("llama-3-8b")
    elements, matrices = _llama_linear_weights(model)
    kept = _states(Layout(precision="fp8-delayed", **LLAMA))
    assert kept["fp8-delayed: FP8 weight copy (1 B + an fp32 scale per matrix)"] == elements + 4 * matrices
    assert kept["fp8-delayed: FP8 weight transpose cache"] == elements
    # TE: 3 forward + 2 backward quantizers per GEMM, each an fp32 scale and 1024 fp32 amaxes
    assert kept["fp8-delayed: amax histories and scales"] == matrices * 5 * 4 * (1024 + 1)
    plain = _states(Layout(**LLAMA))
    assert {name: value for name, value in kept.items() if name in plain} == plain   # master copies as before


def test_a_gpu_with_non_tn_fp8_gemms_keeps_no_transpose_cache():
    from symbolic.layout.precision import on_hardware
    layout = Layout(precision="fp8-current", **LLAMA)
    assert on_hardware(layout, load_hardware("h100")).fp8_transpose_cache           # Hopper: TN only (9.0)
    blackwell = on_hardware(layout, load_hardware("b200"))                          # 10.0: non-TN supported
    assert not blackwell.fp8_transpose_cache
    names = set(_states(blackwell))
    assert "fp8-current: FP8 weight copy (1 B + an fp32 scale per matrix)" in names
    assert not any("transpose" in name or "amax" in name for name in names)         # current scaling: no history


@pytest.mark.parametrize("name, row, per_matrix", [
    ("fp8-blockwise", 1 + Fraction(4, 128 * 128), 0),     # 1 B + an fp32 scale per 128×128 block
    ("mxfp8", 1 + Fraction(1, 32), 0),                    # 1 B + an E8M0 scale per 32
    ("nvfp4", Fraction(1, 2) + Fraction(1, 16), 4),       # ½ B + an E4M3 scale per 16, an fp32 per tensor
])
def test_block_scaled_recipes_keep_row_and_column_wise_copies(name, row, per_matrix):
    model = preset("llama-3-8b")
    elements, matrices = _llama_linear_weights(model)
    kept = {key: value for key, value in _states(Layout(precision=name, **LLAMA)).items() if key.startswith(name)}
    assert len(kept) == 2 and any("row-wise" in key for key in kept) and any("column-wise" in key for key in kept)
    assert set(kept.values()) == {row * elements + per_matrix * matrices}


def test_zero3_caches_no_weight_copy_and_fp8_parameters_are_the_row_wise_copy():
    assert not any(key.startswith("fp8-delayed") and "amax" not in key and "copy" in key
                   for key in _states(Layout(precision="fp8-delayed", dp=8, zero=3)))
    kept = _states(Layout(precision="fp8-delayed", optimizer="fp8-adam", **LLAMA))
    assert "fp8-delayed: FP8 weight transpose cache" in kept
    assert not any("FP8 weight copy" in key for key in kept)


def test_the_answers_first_lines_name_the_recipe_and_dtype_fp8_is_the_default_recipe(capsys):
    argv = ["bill", "llama-3-8b", "--gpu", "h100", "--dp", "8", "--zero", "1"]
    assert main(argv + ["--dtype", "fp8"]) == 0
    out = capsys.readouterr()
    head = out.out.splitlines()[:6]  # the layout line (with the assumed framework) then the recipe
    assert any(line.startswith("precision: fp8-delayed (TE DelayedScaling, format HYBRID)") for line in head), head
    assert "--dtype fp8 read as the FP8 training recipe fp8-delayed" in out.err
    assert "weight GEMMs in fp8 (fp8-delayed at the FP8 peak 1979 TFLOP/s" in out.out
    assert "cast/quantize kernels" in out.out                                      # named, with its traffic
    assert main(argv + ["--dtype", "fp8", "--json"]) == 0
    by_dtype = json.loads(capsys.readouterr().out)
    assert main(argv + ["--precision", "fp8-delayed", "--json"]) == 0
    by_recipe = json.loads(capsys.readouterr().out)
    assert main(argv + ["--fp8-activations", "--json"]) == 0
    by_flag = json.loads(capsys.readouterr().out)
    assert main(argv + ["--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    for key in ("total_bytes", "model_states_bytes", "activation_bytes", "step_seconds"):
        assert by_dtype[key] == by_recipe[key] == by_flag[key], key
    assert by_dtype["step_seconds"] < bf16["step_seconds"]


def test_nvfp4_and_mxfp8_are_refused_on_a_gpu_without_them_naming_it(capsys):
    argv = ["bill", "llama-3-8b", "--dp", "8", "--zero", "1"]
    assert main(argv + ["--gpu", "h100", "--precision", "nvfp4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nvfp4" in err[0] and "H100-SXM5-80GB" in err[0] and "9.0" in err[0]
    assert main(argv + ["--gpu", "rtx-5090", "--precision", "mxfp8"]) == 2       # TE: MXFP8 not on 12.0+
    assert "RTX" in capsys.readouterr().err
    assert main(argv + ["--gpu", "b200", "--precision", "nvfp4"]) == 0
    assert "weight GEMMs in fp4 (nvfp4 at the FP4 peak 10000 TFLOP/s" in capsys.readouterr().out
    import symbolic
    with pytest.raises(ConfigError, match="H100-SXM5-80GB"):
        symbolic.bill("llama-3-8b", gpu="h100", dp=8, precision="mxfp8")


@pytest.mark.parametrize("options, recipe", [
    ("--fp8-format hybrid", "fp8-delayed"), ("--fp8-format hybrid --fp8-recipe tensorwise", "fp8-current"),
    ("--fp8-format e4m3 --fp8-recipe blockwise", "fp8-blockwise"), ("--fp8-format e4m3 --fp8-recipe mxfp8", "mxfp8"),
    ("--fp4-format e2m1", "nvfp4"), ("--bf16", "bf16")])
def test_the_megatron_launch_reader_sets_the_recipe(options, recipe):
    from symbolic.layout.launch import read_launch
    fields = dict(read_launch("megatron", f"--tensor-model-parallel-size 1 --bf16 {options}",
                              preset("llama-3-8b")).layout_fields)
    assert fields.get("precision", "bf16") == recipe
    assert fields.get("fp8_activations", False) == (recipe != "bf16")


def test_the_timeline_holds_the_recipes_weight_copies_as_the_bill_does():
    import warnings

    import symbolic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for gpu, precision in (("h100", "fp8-delayed"), ("b200", "mxfp8")):
            timeline = symbolic.timeline("llama-3-8b", dp=8, zero=1, precision=precision, gpu=gpu).to_dict()
            bill = symbolic.bill("llama-3-8b", dp=8, zero=1, precision=precision, gpu=gpu)
            plain = symbolic.bill("llama-3-8b", dp=8, zero=1, gpu=gpu)
            assert timeline["peak_bytes"] == bill.total_bytes > plain.total_bytes


def test_an_expert_bank_counts_one_gemm_per_expert_for_its_scales_and_amax_histories():
    """Mixtral's banks (E·h, 2·f_e) and (E·f_e, h) are E GEMMs each (TE GroupedLinear's num_gemms): the per-matrix
    fp32 scale and the delayed-scaling history count E/e of them on a rank of the expert grid."""
    model = preset("mixtral-8x7b")
    h, a, g, L, E = model.hidden, model.heads, model.kv_heads, model.layers, model.experts
    f_e = model.values()["f_e"]
    kept = _states(Layout(seq=4096, ep=8, dp=8, zero=1, precision="fp8-delayed"), model)
    attention = L * (2 * h * h + 2 * g * (h // a) * h)
    experts = L * 3 * E * f_e * h // 8                      # a rank's E/e = 1 expert of each layer
    matrices = L * 4 + L * 2 * E // 8                       # q, k, v, o; the two banks' E/e GEMMs
    assert kept["fp8-delayed: FP8 weight transpose cache"] == attention + experts
    assert kept["fp8-delayed: FP8 weight copy (1 B + an fp32 scale per matrix)"] == attention + experts + 4 * matrices
    assert kept["fp8-delayed: amax histories and scales"] == matrices * 5 * 4 * 1025


@pytest.mark.parametrize("model_section, recipe", [
    ({"fp8": "hybrid"}, "fp8-delayed"), ({"fp8": "e4m3", "fp8_recipe": "blockwise"}, "fp8-blockwise"),
    ({"fp4": "e2m1"}, "nvfp4"), ({}, "bf16")])
def test_a_nemo_config_sets_the_recipe_from_its_transformer_config(model_section, recipe):
    from symbolic.layout.launch import read_launch
    fields = dict(read_launch("nemo", {"model": {"tensor_model_parallel_size": 1, **model_section}},
                              preset("llama-3-8b")).layout_fields)
    assert fields.get("precision", "bf16") == recipe
