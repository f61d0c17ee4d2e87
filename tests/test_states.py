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


def test_state_terms_memo_is_the_function_and_hands_out_fresh_lists():
    """state_terms is memoised on its frozen arguments (the kinds of a loop share them): the same terms
    as the unmemoised function, and a caller that changes its list changes no other caller's."""
    import pickle

    from symbolic.bill.derive import architecture_inventories, structure
    from symbolic.models.builtin import PRESETS

    param_inv = architecture_inventories(structure(PRESETS["gpt-7b"]))[0]
    recipe = states.RECIPES["bf16-adam-fp32-grads"]
    for zero in (0, 1, 3):
        first, trainable = states.state_terms(recipe, zero, param_inv, context_parallel=2)
        assert (first, trainable) == states._state_terms(recipe, zero, param_inv, context_parallel=2)
        first.clear()
        again, _ = states.state_terms(recipe, zero, param_inv, context_parallel=2)
        assert again and again == states._state_terms(recipe, zero, param_inv, context_parallel=2)[0]
    # a plain list (unhashable) is computed directly, with the same terms
    assert states.state_terms(recipe, 1, list(param_inv))[0] == states.state_terms(recipe, 1, param_inv)[0]
    # the inventory's kept hash is its fields' hash, and a pickled copy recomputes its own
    assert hash(param_inv) == hash((param_inv.terms, param_inv.applied))
    copy = pickle.loads(pickle.dumps(param_inv))
    assert "_hash" not in copy.__dict__ and copy == param_inv and hash(copy) == hash(param_inv)
