"""Megatron Eq 2 (Narayanan et al. 2021 §5.1) from the parameter inventory."""
from sympy import expand

from symbolic.models.architectures import gpt
from symbolic.claims.claims import equal
from symbolic.core.dims import L, V, h, s
from symbolic.ledgers import params
from symbolic.core.numeric import exact_int

TABLE3 = {  # Korthikanti Table 3 models: (L, h) -> Eq 2 count
    (48, 6144): 22_074_261_504,
    (96, 12288): 174_615_822_336,
    (105, 20480): 529_600_778_240,
    (128, 25600): 1_008_038_707_200,
}


def test_eq2_is_layers_plus_embedding():
    eq2 = params.count(gpt.parameters(), params.eq2_scopes())
    assert equal(eq2, 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h)))


def test_layer_is_12h2_plus_13h():
    assert expand(params.count(gpt.parameters(), ["layer"])) == expand(L * (12 * h**2 + 13 * h))


def test_table3_counts_are_exact_integers():
    eq2 = params.count(gpt.parameters(), params.eq2_scopes())
    for (layers, hidden), expected in TABLE3.items():
        assert exact_int(eq2, {"L": layers, "h": hidden, "V": 51200, "s": 2048}) == expected


def test_untied_adds_Vh_and_rope_drops_sh():
    tied = params.count(gpt.parameters(tied=True))
    assert expand(params.count(gpt.parameters(tied=False)) - tied) == V * h
    assert expand(tied - params.count(gpt.parameters(positions="rope"))) == s * h


def test_full_count_adds_only_the_final_layernorm_to_eq2():
    inv = gpt.parameters()
    assert expand(params.count(inv) - params.count(inv, params.eq2_scopes())) == 2 * h


def test_kaplan_N_is_12Lh2():
    assert params.non_embedding_weights(gpt.parameters()) == 12 * L * h**2
