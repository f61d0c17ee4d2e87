"""The MoE inventory: N_total vs N_active, routing as a symbol, and HF's Mixtral layer."""
import pytest
from sympy import Add, expand

from _tracing import at, declared, require, traced
from symbolic.models.architectures import ARCHITECTURES, moe
from symbolic.core.dims import E, E_s, L, T_e, b, e, f_e, h, k, s
from symbolic.ledgers import activations, params
from symbolic.claims.quantities import evaluate

MIXTRAL_8X7B = dict(L=32, h=4096, a=32, g=8, f_e=14336, E=8, k=2, V=32000)


def test_moe_is_registered_and_callable_without_arguments():
    assert ARCHITECTURES["moe"] is moe
    assert evaluate("activations.per_layer", arch="moe") == activations.total_bytes(moe.saved_tensors())
    assert evaluate("params", arch="moe") == params.count(moe.parameters())


def test_mixtral_8x7b_total_and_active_parameters():
    """N_total sizes the model states, N_active the FLOPs (seed 001 §07)."""
    total = at(params.count(moe.parameters(shared_experts=0)), **MIXTRAL_8X7B)
    active = at(params.count(moe.parameters(shared_experts=0, active=True)), **MIXTRAL_8X7B)
    assert total == 46_702_792_704  # Mixtral-8x7B as HF counts it
    assert total - active == 32 * (8 - 2) * 3 * 4096 * 14336  # six idle experts of three h×f_e matrices per layer


def test_expert_flops_follow_the_active_experts():
    """Per token, the experts cost 2 FLOPs per active expert weight (forward)."""
    experts = [mm for mm in moe.matmuls() if mm.name.startswith("layer/moe/experts_")]
    per_token = expand(Add(*(mm.forward_flops for mm in experts)) / (b * s))
    assert per_token == 2 * k * 3 * h * f_e


def test_routing_default_is_balanced_and_the_total_needs_only_the_sum():
    balanced = activations.total_bytes(moe.saved_tensors())
    free = activations.total_bytes(moe.saved_tensors(tokens_per_expert=T_e))
    assert expand(free.subs(T_e, s * b * k / E) - balanced) == 0
    assert moe.saved_tensors()["moe/expert/input"].shape == (E, s * b * k / E, h)
    # expert-side coefficients: 16 B token map + 4 B weight per assignment, 3 h-wide and 4 f_e-wide tensors
    coeff = dict(expand(balanced).as_coefficients_dict())
    assert coeff[b * h * k * s] == 6 and coeff[b * f_e * k * s] == 8
    assert coeff[E_s * b * f_e * s] == 8  # shared experts: 4 f_e-wide tensors each


def test_expert_parallel_splits_experts_not_the_activations_under_balance():
    inv = moe.saved_tensors(shared_experts=0)
    split = moe.expert_parallel(inv, e)
    assert expand(activations.total_bytes(split) - activations.total_bytes(inv)) == 0
    assert split["moe/expert/input"].local_shape == (E / e, e * s * b * k / E, h)
    per_gpu = params.count(moe.parameters_per_gpu(moe.parameters(shared_experts=0), e))
    full = params.count(moe.parameters(shared_experts=0))
    assert expand(full - per_gpu) == expand(L * 3 * E * h * f_e * (1 - 1 / e))


# --- traced: HF transformers Mixtral, CPU, bf16 ---------------------------------------

# (s, b, h, a, g, f_e, E, k)
MIXTRAL_DIMS = [(6, 2, 32, 4, 2, 24, 4, 2), (5, 3, 48, 6, 3, 16, 3, 1), (4, 2, 24, 4, 1, 20, 5, 3)]


def _mixtral(attention, H, A, G, FE, EE, K):
    require("transformers")
    from symbolic import trace as tr
    cfg = tr.hf_config({"model_type": "mixtral", "hidden_size": H, "num_attention_heads": A,
                        "num_key_value_heads": G, "intermediate_size": FE, "num_local_experts": EE,
                        "num_experts_per_tok": K}, attention)
    return tr, cfg


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("S,B,H,A,G,FE,EE,K", MIXTRAL_DIMS)
def test_mixtral_decoder_layer_matches_the_declared_inventory(attention, S, B, H, A, G, FE, EE, K):
    """The routing is whatever the random router picks: every expert-side term
    is linear in its token count, so the sum s·b·k is all the total needs."""
    require("torch")
    tr, cfg = _mixtral(attention, H, A, G, FE, EE, K)
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=S, b=B)
    got = tr.trace_module(layer, args, kwargs, custom_flops=tr.cpu_sdpa_flops())
    saved, mms, extra = tr.hf_declared(cfg)
    assert traced(got) == declared(saved, mms, extra, s=S, b=B, h=H, a=A, g=G, f_e=FE, E=EE, k=K)


def test_sparse_moe_block_alone_matches_the_moe_terms():
    torch = require("torch")
    tr, cfg = _mixtral("sdpa", 32, 4, 2, 24, 4, 2)
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(cfg).to(torch.bfloat16)
    x = torch.randn(2, 6, 32, dtype=torch.bfloat16, requires_grad=True)
    got = tr.trace_module(block, (x,))
    terms = moe.saved_tensors(shared_experts=0).select("moe")
    router = moe.matmuls(shared_experts=0).select(["layer/moe"])
    assert traced(got) == declared(terms, router, s=6, b=2, h=32, f_e=24, E=4, k=2)


def test_the_bill_counts_states_with_n_total_and_reports_n_active():
    from symbolic.bill.derive import make_bill
    from symbolic.layout.layout import Layout
    from symbolic.models.config import ModelConfig
    model = ModelConfig("mixtral-test", 32, 4096, 32, 32000, 4096, ffn=14336, tied=False, positions="rope",
                        arch="moe", kv_heads=8, mlp="swiglu", norm="rmsnorm", experts=8, experts_per_token=2,
                        expert_ffn=14336)
    bill = make_bill(model, Layout(tp=8, pp=4, sp=True))
    assert bill.totals["params"] == bill.totals["params_for_states"] == 46_702_792_704
    assert bill.totals["params"] - bill.totals["params_active"] == 32 * 6 * 3 * 4096 * 14336


# (s, b, h, a, g, f_e, shared width, E, k, norm_topk_prob, attention)
QWEN2_MOE_DIMS = [(6, 2, 32, 4, 2, 24, 48, 4, 2, False, "sdpa"), (5, 3, 48, 6, 3, 16, 48, 3, 1, True, "eager")]


@pytest.mark.parametrize("S,B,H,A,G,FE,SHARED,EE,K,NORM,attention", QWEN2_MOE_DIMS)
def test_qwen2_moe_layer_with_shared_experts_matches_the_declared_inventory(S, B, H, A, G, FE, SHARED, EE, K,
                                                                            NORM, attention):
    """Shared experts (one MLP of E_s expert widths behind a sigmoid gate), bf16
    routing weights, renormalisation as the config says."""
    require("torch")
    require("transformers")
    from symbolic import trace as tr
    cfg = tr.hf_config({"model_type": "qwen2_moe", "hidden_size": H, "num_attention_heads": A,
                        "num_key_value_heads": G, "moe_intermediate_size": FE,
                        "shared_expert_intermediate_size": SHARED, "num_experts": EE, "num_experts_per_tok": K,
                        "norm_topk_prob": NORM}, attention)
    assert tr.hf_values(cfg)["E_s"] == SHARED // FE
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=S, b=B)
    got = tr.trace_module(layer, args, kwargs, custom_flops=tr.cpu_sdpa_flops())
    saved, mms, extra = tr.hf_declared(cfg)
    assert ("moe/routing_weight_sum" in saved.names()) == NORM
    assert traced(got) == declared(saved, mms, extra, s=S, b=B, h=H, a=A, g=G, f_e=FE, E=EE, k=K,
                                   E_s=SHARED // FE)


def test_unknown_routing_is_refused():
    with pytest.raises(ValueError, match="known: mixtral, qwen2_moe"):
        moe.saved_tensors(style="switch")


def test_the_moe_layer_and_the_composed_families_share_one_recipe_of_parts():
    """moe.py's routed MLP and composed.py's are both expert_parts.moe_layer: the same terms, shape for shape
    (only the cited source differs: Mixtral's block for the hand-named layer)."""
    from dataclasses import replace

    from symbolic.models.architectures import composed, expert_parts, parts
    from symbolic.core.dims import E_s, f_e
    mine = moe.moe_part(shared_experts=0)
    theirs = expert_parts.moe(composed.ROUTERS["mixtral"])
    for a, z in ((mine.saved, theirs.saved), (mine.params, theirs.params), (mine.matmuls, theirs.matmuls)):
        assert [replace(x, source="") for x in a] == [replace(x, source="") for x in z]
    # E_s shared experts of width f_e: one gated MLP of width E_s·f_e, as HF builds it
    shared = moe.moe_part(shared_experts=E_s, style=moe.QWEN2_MOE)
    gated = expert_parts.moe(parts.Router("qwen2_moe", renormalize=False, weight_dtype="bf16"), shared_width=E_s * f_e,
                      shared_gate=True)
    assert [x.name for x in shared.saved] == [x.name for x in gated.saved]
    assert [x.bytes for x in shared.saved] == [x.bytes for x in gated.saved]
