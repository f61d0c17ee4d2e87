"""FLOPs from the matmul inventory: Narayanan's 72 and 96, Kaplan's 6N and 2N + 2Lsh."""
from sympy import expand

from symbolic.claims.claims import equal
from symbolic.core.dims import L, V, b, h, s
from symbolic.ledgers import flops
from symbolic.claims.quantities import evaluate

N = 12 * L * h**2


def test_layer_forward_and_logits():
    assert equal(evaluate("flops.layer_forward"), 24 * b * s * h**2 * (1 + s / (6 * h)))
    assert expand(flops.forward() - L * evaluate("flops.layer_forward")) == 2 * b * s * h * V


def test_training_is_three_forwards_72():
    assert equal(flops.model_training(), 3 * flops.forward())
    assert equal(flops.model_training(), 72 * b * s * L * h**2 * (1 + s / (6 * h) + V / (12 * h * L)))


def test_full_recompute_is_four_forwards_of_the_layers_96():
    assert equal(flops.hardware_training("full"), 96 * b * s * L * h**2 * (1 + s / (6 * h) + V / (16 * h * L)))


def test_selective_recompute_repeats_only_the_attention_core():
    assert expand(flops.recompute_extra("selective")) == 4 * b * s**2 * h * L
    assert evaluate("flops.recompute_ratio_leading") == 1 + s / (18 * h)


def test_kaplan_6N_and_forward_2N_plus_2Lsh():
    assert evaluate("flops.per_param_per_token") == 6
    assert expand(evaluate("flops.kaplan_forward_per_token") - (2 * N + 2 * L * s * h)) == 0
    assert evaluate("flops.hardware_per_param_per_token", recompute="full") == 8
