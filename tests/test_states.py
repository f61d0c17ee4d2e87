"""Model states: recipes (ZeRO §3.1, seed 001 §3) and sharding by TP, PP and ZeRO stage."""
import pytest
from sympy import expand

from symbolic.core.dims import Psi, d, p, t
from symbolic.ledgers import states

R = states.RECIPES


@pytest.mark.parametrize("name, tally, total", [
    ("bf16-adam", "2+2+4+4+4 = 16", 16),
    ("bf16-adam-fp32-grads", "2+4+4+4+4 = 18", 18),
    ("bf16-sgd-momentum", "2+2+4+4 = 12", 12),
    ("fp32-adam", "4+4+4+4 = 16", 16),
])
def test_recipe_bytes_per_param(name, tally, total):
    assert R[name].bytes_per_param == total
    assert R[name].tally == tally


def test_zero_stages_shard_optimizer_then_gradients_then_parameters():
    adam = R["bf16-adam"]
    tp = t * p
    assert expand(states.per_gpu(adam, 0) - 16 * Psi / tp) == 0
    assert expand(states.per_gpu(adam, 1) - (4 * Psi / tp + 12 * Psi / (tp * d))) == 0
    assert expand(states.per_gpu(adam, 2) - (2 * Psi / tp + 14 * Psi / (tp * d))) == 0
    assert expand(states.per_gpu(adam, 3) - 16 * Psi / (tp * d)) == 0


def test_unknown_zero_stage_is_refused():
    with pytest.raises(ValueError, match="ZeRO stage"):
        states.per_gpu(R["bf16-adam"], 4)
