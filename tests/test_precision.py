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
